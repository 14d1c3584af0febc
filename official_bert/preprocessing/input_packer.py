"""`BertInputPacker`: WordPiece ids of one or two segments -> the encoder's fixed-length inputs."""

import keras
import tensorflow as tf
import tensorflow_text as tf_text


@keras.saving.register_keras_serializable(package="official_bert")
class BertInputPacker(keras.layers.Layer):
  """Packs `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` into int32 `[batch, seq_length]` tensors.

  Segments too long for `seq_length` are truncated as the original `truncate_seq_pair` does:
  one token at a time from the end of the longer segment, the second one on a tie. tf.text's
  `RoundRobinTrimmer` keeps exactly those lengths (it hands the budget out one token to each
  segment in turn, the first segment first). As in the original, a row whose second segment has
  no tokens is packed as a single segment, `[CLS] a [SEP]`.

  Args:
    seq_length: length of the packed sequences, special tokens included.
    cls_id: id of `[CLS]`.
    sep_id: id of `[SEP]`.
    pad_id: id that fills the positions after the last `[SEP]`.
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    inputs: a ragged int tensor `[batch, (tokens)]`, or a list or tuple of one or two of them.

  Returns:
    A dict of int32 `[batch, seq_length]` tensors: `input_word_ids`, `input_mask` (1 on real
    tokens) and `input_type_ids` (0 for `[CLS]`, the first segment and its `[SEP]`, 1 after).

  Example:

    packer = BertInputPacker(seq_length=8, cls_id=101, sep_id=102)
    features = packer([tf.ragged.constant([[7, 8, 9]]), tf.ragged.constant([[4, 5]])])
    # features["input_word_ids"]: [[101, 7, 8, 9, 102, 4, 5, 102]]
  """

  def __init__(self, seq_length, cls_id, sep_id, pad_id=0, **kwargs):
    super().__init__(**kwargs)
    if seq_length < 3:
      raise ValueError(f"seq_length={seq_length} leaves no room for tokens: it must be at least 3.")
    self.seq_length = int(seq_length)
    self.cls_id = int(cls_id)
    self.sep_id = int(sep_id)
    self.pad_id = int(pad_id)

  def _as_segments(self, inputs):
    segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not 1 <= len(segments) <= 2:
      raise ValueError(f"BertInputPacker takes one or two segments, got {len(segments)}.")
    ragged = []
    for segment in segments:
      if not isinstance(segment, tf.RaggedTensor):
        segment = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(segment))
      ragged.append(tf.cast(segment, tf.int32))
    return ragged

  def _pack(self, segments):
    """Packs all rows with the given segments: `(word_ids, mask, type_ids)`, each dense."""
    # One [CLS] plus one [SEP] per segment.
    budget = self.seq_length - 1 - len(segments)
    trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    word_ids, type_ids = tf_text.combine_segments(
        trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id)
    input_word_ids, input_mask = tf_text.pad_model_inputs(
        word_ids, max_seq_length=self.seq_length, pad_value=self.pad_id)
    input_type_ids, _ = tf_text.pad_model_inputs(type_ids, max_seq_length=self.seq_length)
    return input_word_ids, input_mask, input_type_ids

  def call(self, inputs):
    segments = self._as_segments(inputs)
    packed = self._pack(segments)
    if len(segments) == 2:
      # The original adds segment B (and its [SEP]) only when it has tokens.
      has_second = (segments[1].row_lengths() > 0)[:, None]
      single = self._pack(segments[:1])
      packed = [tf.where(has_second, pair, alone) for pair, alone in zip(packed, single)]
    return {name: tf.cast(value, tf.int32) for name, value in
            zip(("input_word_ids", "input_mask", "input_type_ids"), packed)}

  def compute_output_spec(self, inputs):
    first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
    shape = (first.shape[0], self.seq_length)
    return {name: keras.KerasTensor(shape, dtype="int32")
            for name in ("input_word_ids", "input_mask", "input_type_ids")}

  def get_config(self):
    config = super().get_config()
    config.update({"seq_length": self.seq_length, "cls_id": self.cls_id, "sep_id": self.sep_id,
                   "pad_id": self.pad_id})
    return config
