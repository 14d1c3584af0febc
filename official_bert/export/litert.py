"""LiteRT (TFLite) exports that take raw text: normalization, WordPiece, packing and the model in
one `.tflite` file.

The file needs no TensorFlow to run: LiteRT's interpreter (`pip install ai-edge-litert`) with
tensorflow-text's TFLite kernels (`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`):

    import numpy as np, tensorflow_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps
    interpreter = InterpreterWithCustomOps(
        model_path="/tmp/sst2.tflite",
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    classify = interpreter.get_signature_runner()
    classify(text=np.array(["a gripping film"]))["label"]

(`load_interpreter` does the same.) Every op in the file is a LiteRT built-in or one of those
kernels, none a TensorFlow op (LiteRT's interpreters from the package index have no Select TF
ops), so the text goes through tf.text's `FastBertNormalizer` and `FastWordpieceTokenizer`, and the
packing is written in built-in ops. The normalizer runs the original's per-character rules
(`normalizer_model`), not tf.text's own NFKC case folding.

Tokens are those of `FullTokenizer` but in two rare cases:
- uncased, a capital sigma that ends a word lower-cases to "σ" here and to "ς" in the original
  (`str.lower`'s one rule of context);
- a few dozen code points that Unicode 14 (Python 3.11) leaves unassigned, U+1B4E among them,
  are punctuation to the newer tables of tf.text's tokenizer and split a word here, as in
  `BertTokenizerLayer`.

The outputs are at `max_seq_length` always (a SavedModel cuts a batch to a bucket and pads the
outputs back, which gives the same values).

The model runs in float32 on the stock kernels (`formats.portable_model`).
"""

import json
import logging

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from official_bert import tokenization
from official_bert.export import formats, normalizer_model, signatures
from official_bert.models import BertClassifier, BertPretrainer, BertTokenClassifier
from official_bert.networks import BertEncoder

_KINDS = (BertClassifier.kind, BertTokenClassifier.kind, BertEncoder.kind, BertPretrainer.kind)
# As `BertTokenizerLayer`: UTF-8 needs at most 4 bytes a character.
_MAX_BYTES_PER_WORD = 4 * tokenization.MAX_INPUT_CHARS_PER_WORD


def check_kind(kind):
  """Refuses a kind whose raw-text signature LiteRT cannot express.

  Raises:
    formats.FormatError: a span labeler (its answer is cut from the context with string ops
      LiteRT has no kernel for) or a multiple-choice model.
  """
  if kind not in _KINDS:
    raise formats.FormatError(
        f"--format=litert cannot express the raw-text signature of a {kind} model (LiteRT "
        "has no kernels for its string work); export it with --format=onnx (token ids) or "
        "--format=saved_model.")


def load_interpreter(model_path=None, model_content=None, num_threads=None):
  """A LiteRT interpreter for an export of this module, with tensorflow-text's kernels.

  Args:
    model_path: the `.tflite` file (local), or None with `model_content`.
    model_content: the file's bytes.
    num_threads: the interpreter's CPU threads (None: LiteRT's default).

  Returns:
    An `ai_edge_litert.interpreter.Interpreter`; `get_signature_runner()` runs
    `serving_default`.
  """
  from ai_edge_litert.interpreter import InterpreterWithCustomOps  # pylint: disable=import-outside-toplevel

  return InterpreterWithCustomOps(
      model_path=model_path, model_content=model_content, num_threads=num_threads,
      custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS)


class LiteRtTextPacker:
  """Raw strings -> the encoder inputs, in ops LiteRT runs (see the module docstring).

  Args:
    vocab_file: the `vocab.txt`.
    do_lower_case: whether the model is uncased.
    seq_length: length of the packed sequences.
  """

  def __init__(self, vocab_file, do_lower_case, seq_length):
    vocab = tokenization.load_vocab(vocab_file)
    if tokenization.UNK_TOKEN not in vocab:
      raise ValueError(f"{vocab_file} has no {tokenization.UNK_TOKEN} line.")
    self.tokens = sorted(vocab, key=vocab.get)
    self.seq_length = seq_length
    self._ids = {token: vocab.get(token) for token in ("[UNK]", "[CLS]", "[SEP]")}
    # tf.text's normalizer with the original's per-character rules in place of its own
    # (NFKC case folding), which change the tokens of real text.
    self._normalizer = tf_text.FastBertNormalizer(
        model_buffer=normalizer_model.bert_normalizer_model(do_lower_case))
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=self.tokens, suffix_indicator="##", max_bytes_per_word=_MAX_BYTES_PER_WORD,
        token_out_type=tf.int32, unknown_token=tokenization.UNK_TOKEN)
    # Tells the first piece of each word: it never starts with "##".
    self._is_continuation = tf.constant([t.startswith("##") for t in self.tokens])
    self._bytes = tf_text.ByteSplitter()

  def tokenize(self, text):
    """Strings `[batch]` -> `(ids, rows)`: the WordPiece ids of all texts, one after another,
    and the text each belongs to (int32)."""
    text = self._normalizer.normalize(text)
    pieces, starts, ends = self._wordpiece.tokenize_with_offsets(text)
    ids = pieces.flat_values
    rows = tf.cast(pieces.value_rowids(), tf.int32)
    # A word of more than 200 characters is one [UNK], as in the original. Characters are the
    # UTF-8 bytes that do not continue another, counted from the start of the batch's bytes.
    text_bytes = self._bytes.split(text)
    byte_values = tf.cast(text_bytes.flat_values, tf.int32)
    is_lead = tf.cast(tf.logical_or(byte_values < 0x80, byte_values >= 0xC0), tf.int32)
    chars_before = tf.concat([[0], tf.cumsum(is_lead)], axis=0)
    row_start = tf.gather(tf.cast(text_bytes.row_starts(), tf.int32), rows)
    begin = tf.gather(chars_before, row_start + tf.cast(starts.flat_values, tf.int32))
    end = tf.gather(chars_before, row_start + tf.cast(ends.flat_values, tf.int32))
    is_word_start = tf.logical_not(tf.gather(self._is_continuation, ids))
    word = tf.cumsum(tf.cast(is_word_start, tf.int32)) - 1
    words = tf.reduce_sum(tf.cast(is_word_start, tf.int32))
    word_chars = (tf.math.unsorted_segment_max(end, word, words)
                  - tf.math.unsorted_segment_min(begin, word, words))
    too_long = tf.gather(word_chars > tokenization.MAX_INPUT_CHARS_PER_WORD, word)
    ids = tf.where(too_long, self._ids["[UNK]"], ids)
    keep = tf.logical_or(is_word_start, tf.logical_not(too_long))
    return tf.boolean_mask(ids, keep), tf.boolean_mask(rows, keep)

  def __call__(self, text_a, text_b=None):
    """Packs one or two string tensors `[batch]` as `BertInputPacker` does.

    Returns:
      The encoder's input dict, int32 `[batch, seq_length]`.
    """
    batch = tf.shape(text_a)[0]
    segments = [self._positions(*self.tokenize(text), batch)
                for text in ([text_a] if text_b is None else [text_a, text_b])]
    (ids_a, index_a, length_a), *rest = segments
    length_b = rest[0][2] if rest else tf.zeros_like(length_a)
    # The original truncates the longer segment one token at a time, the second on a tie, to
    # seq_length - 3 for a pair; a row whose second segment is empty is packed alone, to
    # seq_length - 2. The lengths it keeps in closed form:
    budget = tf.where(length_b > 0, self.seq_length - 3, self.seq_length - 2)
    kept_a = tf.minimum(length_a, tf.maximum(budget - length_b, (budget + 1) // 2))
    kept_b = tf.minimum(length_b, budget - kept_a)
    total = kept_a + 2 + tf.where(kept_b > 0, kept_b + 1, 0)
    shape = tf.stack([batch, self.seq_length])
    word_ids = self._scatter(ids_a, index_a, tf.ones_like(kept_a), kept_a, shape)
    if rest:
      ids_b, index_b, _ = rest[0]
      word_ids += self._scatter(ids_b, index_b, kept_a + 2, kept_b, shape)
    position = tf.range(self.seq_length)[None, :]
    is_sep = tf.logical_or(position == kept_a[:, None] + 1,
                           tf.logical_and(kept_b[:, None] > 0, position == total[:, None] - 1))
    word_ids = tf.where(position == 0, self._ids["[CLS]"],
                        tf.where(is_sep, self._ids["[SEP]"], word_ids))
    # In int32 arithmetic: the converter cannot fold some boolean forms of these into the model.
    mask = tf.cast(position < total[:, None], tf.int32)
    type_ids = tf.cast(position >= kept_a[:, None] + 2, tf.int32) * mask
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}

  @staticmethod
  def _positions(ids, rows, batch):
    """`(ids, rows, index)` -> `(ids, (row, index in row), tokens per row)`."""
    lengths = tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, batch)
    first = tf.cumsum(lengths) - lengths
    index = tf.range(tf.shape(ids)[0]) - tf.gather(first, rows)
    return ids, tf.stack([rows, index], axis=1), lengths

  @staticmethod
  def _scatter(ids, index, offset, kept, shape):
    """The ids whose index in their row is below `kept[row]`, at `offset[row] + index`."""
    rows, position = index[:, 0], index[:, 1]
    keep = position < tf.gather(kept, rows)
    position = position + tf.gather(offset, rows)
    where = tf.boolean_mask(tf.stack([rows, position], axis=1), keep)
    return tf.scatter_nd(where, tf.boolean_mask(ids, keep), shape)


def _text_functions(model, info, packer):
  """`{signature key: (function, specs)}` of the kind's raw-text signatures."""
  outputs = formats.token_id_outputs(model, info)
  text_specs = signatures.string_specs("text")
  pair_specs = signatures.string_specs("text_a", "text_b")
  if info.kind == BertClassifier.kind:
    if info.extra.get("sentence_pair", False):
      return {"serving_default": (lambda text_a, text_b: outputs(packer(text_a, text_b)),
                                  pair_specs)}
    return {"serving_default": (lambda text: outputs(packer(text)), text_specs)}
  if info.kind == BertTokenClassifier.kind:
    vocab = tf.constant(packer.tokens)

    def tag(text):
      inputs = packer(text)
      return {**outputs(inputs), "tokens": tf.gather(vocab, inputs["input_word_ids"]),
              "input_mask": inputs["input_mask"]}
    return {"serving_default": (tag, text_specs)}

  def encode(*texts):
    inputs = packer(*texts)
    return {**outputs(inputs), "input_mask": inputs["input_mask"]}
  return {"serving_default": (lambda text: encode(text), text_specs),
          "serve_text_pair": (lambda text_a, text_b: encode(text_a, text_b), pair_specs)}


def concrete_function(key, function, specs):
  """The function traced on `specs`, its variables folded into constants, named `key`.

  Keras keeps the model's variables as resources, which the converter would keep as LiteRT
  variables with no values; constants are what a served model needs. The frozen function is
  called from a second one, which gives the outputs their names again; the converter names
  each signature after its function.
  """
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import,import-outside-toplevel

  traced = tf.function(function, input_signature=specs, autograph=False).get_concrete_function()
  names = sorted(traced.structured_outputs)
  frozen = convert_to_constants.convert_variables_to_constants_v2(traced)

  def named(*args):
    return dict(zip(names, frozen(*args)))

  named.__name__ = key
  return tf.function(named, input_signature=specs, autograph=False).get_concrete_function()


def convert(model, info, *, max_seq_length, do_lower_case, precision="float32"):
  """The `.tflite` bytes of a model's raw-text signatures, with this package's mark.

  Args:
    model: the model (any dtype and kernels: its portable copy is converted).
    info: its `checkpoints.ModelInfo`, with `vocab_file`.
    max_seq_length: the packed length.
    do_lower_case: whether the model is uncased.
    precision: `float32`, or `int8`: LiteRT's dynamic-range quantization (int8 weights of the
      products, activations quantized per call by XNNPACK).
  """
  check_kind(info.kind)
  if info.vocab_file is None or do_lower_case is None:
    raise ValueError(f"A LiteRT export of the {info.kind} model needs its vocab.txt and whether "
                     "it is cased (--do_lower_case).")
  if not 3 <= max_seq_length <= info.config.max_position_embeddings:
    raise ValueError(f"max_seq_length must be between 3 and the model's max_position_embeddings "
                     f"({info.config.max_position_embeddings}), got {max_seq_length}.")
  model = formats.portable_model(model)
  packer = LiteRtTextPacker(info.vocab_file, do_lower_case, max_seq_length)
  functions = _text_functions(model, info, packer)
  concrete = [concrete_function(key, *value) for key, value in functions.items()]
  converter = tf.lite.TFLiteConverter.from_concrete_functions(concrete, tf.Module())
  converter.allow_custom_ops = True  # tensorflow-text's kernels, registered by the interpreter
  if precision == "int8":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  # TensorFlow's converter sets the absl logger to WARNING and leaves it there: the caller's
  # (and this package's) INFO logs would vanish for the rest of the process.
  absl_logger = logging.getLogger("absl")
  level = absl_logger.level
  try:
    flatbuffer = converter.convert()
  finally:
    absl_logger.setLevel(level)
  return _with_mark(flatbuffer, {"kind": info.kind, "max_seq_length": max_seq_length,
                                    "do_lower_case": bool(do_lower_case),
                                    "precision": precision})


def _with_mark(flatbuffer, mark):
  """The flatbuffer with this package's mark (`mark` as JSON) added to its metadata."""
  from ai_edge_litert import schema_py_generated as schema  # pylint: disable=import-outside-toplevel
  import flatbuffers  # pylint: disable=import-outside-toplevel

  model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
  buffer = schema.BufferT()
  buffer.data = np.frombuffer(json.dumps({"format": "official_bert LiteRT", **mark}).encode(),
                              np.uint8)
  model.buffers.append(buffer)
  metadata = schema.MetadataT()
  metadata.name = formats.MARK
  metadata.buffer = len(model.buffers) - 1
  model.metadata = [*(model.metadata or []), metadata]
  builder = flatbuffers.Builder(len(flatbuffer) + 1024)
  builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
  return bytes(builder.Output())


def is_ours(data):
  """Whether `data` (a file's bytes) is a LiteRT export of this package."""
  from ai_edge_litert import schema_py_generated as schema  # pylint: disable=import-outside-toplevel

  try:
    if not schema.Model.ModelBufferHasIdentifier(data, 0):
      return False
    model = schema.Model.GetRootAs(data, 0)
    return any(model.Metadata(i).Name() == formats.MARK.encode()
               for i in range(model.MetadataLength()))
  except Exception:  # noqa: BLE001  (any bytes that do not parse are not ours)
    return False


def export(model, info, path, *, max_seq_length, do_lower_case, precision="float32"):
  """Writes the `.tflite` file of `convert` to `path` whole.

  Returns:
    `path`.
  """
  return formats.write_file(path, convert(model, info, max_seq_length=max_seq_length,
                                          do_lower_case=do_lower_case, precision=precision))
