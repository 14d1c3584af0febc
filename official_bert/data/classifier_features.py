"""Classification examples as BERT inputs: conversion, TFRecord files and the `tf.data` pipeline.

An example becomes `[CLS] text_a [SEP]` (segment 0), followed for a pair by `text_b [SEP]`
(segment 1) when text_b has tokens, with the pair truncated longest-first to fit and zeros padding
it to the sequence length, exactly as the original `run_classifier.py` did. The TFRecord files
keep the original feature names, so files written by either program can be read by the other:

  input_ids, input_mask, segment_ids   int64 [seq_length]
  label_ids                            int64 [1] (float [1] for regression)
  is_real_example                      int64 [1]

`create_classifier_dataset` reads them back as the model's input dict (`input_word_ids`,
`input_mask`, `input_type_ids`, int32) with labels and per-example weights. For evaluation it keeps
every example: the final partial batch is filled up with padding rows of weight 0 (the original's
`is_real_example=0`), so every batch has the same static shape and no example is dropped.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from official_bert import tokenization
from official_bert.common import file_io, tfrecord_errors

CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
_LOGGED_EXAMPLES = 3
_PROGRESS_EVERY = 10000


@dataclasses.dataclass(frozen=True)
class InputFeatures:
  """One example as fixed-length model inputs.

  Args:
    input_ids: WordPiece ids, padded with 0 to the sequence length.
    input_mask: 1 for real tokens, 0 for padding.
    segment_ids: 0 for `[CLS]`, text_a and its `[SEP]`; 1 for text_b and its `[SEP]`; 0 for padding.
    label_id: index of the label in the label list (0 for unlabeled examples), or the float score
      for regression.
    is_real_example: False only for rows added to fill a batch.
  """
  input_ids: list[int]
  input_mask: list[int]
  segment_ids: list[int]
  label_id: int | float
  is_real_example: bool = True


def _label_id(example, label_map, is_regression):
  if example.label is None:
    return 0.0 if is_regression else 0
  if is_regression:
    return float(example.label)
  if example.label not in label_map:
    raise ValueError(f"example {example.guid}: label {example.label!r} is not one of the labels "
                     f"{list(label_map)}")
  return label_map[example.label]


def convert_single_example(example, label_list, max_seq_length, tokenizer, is_regression=False):
  """Converts one `InputExample` into `InputFeatures`.

  Args:
    example: the `InputExample`.
    label_list: the label strings in label-id order (ignored for regression).
    max_seq_length: the sequence length, `[CLS]` and `[SEP]`s included.
    tokenizer: a `tokenization.FullTokenizer`.
    is_regression: whether the label is a float score.

  Returns:
    `InputFeatures`.
  """
  tokens_a = tokenizer.tokenize(example.text_a)
  # As in the original, a text_b that gives no tokens leaves a single sentence, `[CLS] a [SEP]`.
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
  reserved = 3 if tokens_b else 2
  if max_seq_length < reserved + 1:
    raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text beside [CLS] and "
                     f"[SEP]; use at least {reserved + 1}")
  if tokens_b:
    tokenization.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - reserved)
  else:
    tokens_a = tokens_a[:max_seq_length - reserved]
  tokens = [CLS_TOKEN, *tokens_a, SEP_TOKEN]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += [*tokens_b, SEP_TOKEN]
    segment_ids += [1] * (len(tokens_b) + 1)
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  padding = [0] * (max_seq_length - len(input_ids))
  label_map = {label: index for index, label in enumerate(label_list)}
  return InputFeatures(input_ids=input_ids + padding,
                       input_mask=[1] * len(input_ids) + padding,
                       segment_ids=segment_ids + padding,
                       label_id=_label_id(example, label_map, is_regression))


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                 is_regression=False):
  """Converts `InputExample`s into a list of `InputFeatures`, logging the first few.

  Args:
    examples: an iterable of `InputExample`.
    label_list, max_seq_length, tokenizer, is_regression: as for `convert_single_example`.

  Returns:
    A list of `InputFeatures`, one per example, in order.
  """
  features = []
  for index, example in enumerate(examples):
    feature = convert_single_example(example, label_list, max_seq_length, tokenizer,
                                     is_regression)
    if index < _LOGGED_EXAMPLES:
      tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:sum(feature.input_mask)])
      logging.info("Example %s: tokens %s; segment_ids %s; label %r (id %s)", example.guid,
                   " ".join(tokens), feature.segment_ids[:len(tokens)], example.label,
                   feature.label_id)
    if index and index % _PROGRESS_EVERY == 0:
      logging.info("Converted %d examples", index)
    features.append(feature)
  return features


def _int64_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def to_tf_example(feature, is_regression=False):
  """Returns the `tf.train.Example` of one `InputFeatures`, with the original feature names."""
  if is_regression:
    label = tf.train.Feature(float_list=tf.train.FloatList(value=[feature.label_id]))
  else:
    label = _int64_feature([feature.label_id])
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": _int64_feature(feature.input_ids),
      "input_mask": _int64_feature(feature.input_mask),
      "segment_ids": _int64_feature(feature.segment_ids),
      "label_ids": label,
      "is_real_example": _int64_feature([int(feature.is_real_example)]),
  }))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file, is_regression=False):
  r"""Converts `InputExample`s and writes them to one TFRecord file.

  The file is written under a temporary name beside `output_file` and renamed when complete, so
  an interrupted run never leaves a file that looks finished.

  Args:
    examples: a sequence of `InputExample`.
    label_list, max_seq_length, tokenizer, is_regression: as for `convert_single_example`.
    output_file: the TFRecord file to write (a local path or any `tf.io.gfile` URL).

  Returns:
    The number of records written.

  Example:

  >>> from official_bert.data.classifier_data import InputExample
  >>> with open("vocab.txt", "w") as f:
  ...   _ = f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "film"]))
  >>> tokenizer = tokenization.FullTokenizer("vocab.txt")
  >>> examples = [InputExample("train-0", "good film", None, "1"),
  ...             InputExample("train-1", "bad film", None, "0")]
  >>> file_based_convert_examples_to_features(examples, ["0", "1"], 8, tokenizer, "train.tf_record")
  2
  """
  features = convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                          is_regression)
  directory = os.path.dirname(output_file)
  if directory:
    tf.io.gfile.makedirs(directory)
  with file_io.atomic_path(output_file) as temporary, tf.io.TFRecordWriter(temporary) as writer:
    for feature in features:
      writer.write(to_tf_example(feature, is_regression).SerializeToString())
  logging.info("Wrote %d examples to %s", len(features), output_file)
  return len(features)


def _decode_fn(seq_length, is_regression):
  """Parses a serialized record into `(inputs, label, weight)`."""
  spec = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64, default_value=1),
  }

  def decode(record):
    parsed = tf.io.parse_single_example(record, spec)
    inputs = {
        "input_word_ids": tf.cast(parsed["input_ids"], tf.int32),
        "input_mask": tf.cast(parsed["input_mask"], tf.int32),
        "input_type_ids": tf.cast(parsed["segment_ids"], tf.int32),
    }
    label = parsed["label_ids"]
    label = label if is_regression else tf.cast(label, tf.int32)
    return inputs, label, tf.cast(parsed["is_real_example"], tf.float32)

  return decode


def _pad_to_batch_fn(batch_size):
  """Fills a batch of `(inputs, labels, weights)` up to `batch_size` rows of zeros (weight 0)."""

  def pad(inputs, labels, weights):
    missing = batch_size - tf.shape(weights)[0]

    def pad_rows(tensor):
      paddings = [[0, missing]] + [[0, 0]] * (tensor.shape.rank - 1)
      return tf.ensure_shape(tf.pad(tensor, paddings), [batch_size, *tensor.shape[1:]])

    return tf.nest.map_structure(pad_rows, (inputs, labels, weights))

  return pad


def create_classifier_dataset(file_pattern, seq_length, batch_size, is_training,
                              is_regression=False, shuffle_buffer_size=100, seed=None,
                              input_context=None):
  r"""Reads classifier TFRecord files as batches of model inputs, labels and example weights.

  Args:
    file_pattern: a TFRecord file, a glob pattern, or a comma-separated list of either.
    seq_length: the sequence length the files were written with.
    batch_size: examples per batch this pipeline yields (per replica with `input_context`).
    is_training: shuffle and repeat forever, dropping the incomplete last batch of each pass;
      otherwise read once in order and fill the final batch up with weight-0 padding rows.
    is_regression: labels are float scores rather than class ids.
    shuffle_buffer_size: examples in the shuffle buffer when training.
    seed: shuffle seed, for reproducible runs.
    input_context: a `tf.distribute.InputContext`; each input pipeline then reads its own shard.

  Returns:
    A `tf.data.Dataset` of `(inputs, labels, weights)`: `inputs` a dict of int32 `[batch,
    seq_length]` tensors `input_word_ids`, `input_mask`, `input_type_ids`; `labels` int32 `[batch]`
    (float32 for regression); `weights` float32 `[batch]`, 1 for real examples and 0 for padding.

  Example:

  >>> from official_bert.data.classifier_data import InputExample
  >>> with open("vocab.txt", "w") as f:
  ...   _ = f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "film"]))
  >>> rows = [("good film", "1"), ("bad", "0"), ("film", "1")]
  >>> examples = [InputExample(f"dev-{i}", text, None, label)
  ...             for i, (text, label) in enumerate(rows)]
  >>> _ = file_based_convert_examples_to_features(
  ...     examples, ["0", "1"], 8, tokenization.FullTokenizer("vocab.txt"), "eval.tf_record")
  >>> dataset = create_classifier_dataset("eval.tf_record", 8, 2, is_training=False)
  >>> inputs, labels, weights = next(iter(dataset))
  >>> inputs["input_word_ids"].numpy().tolist()
  [[2, 4, 6, 3, 0, 0, 0, 0], [2, 5, 3, 0, 0, 0, 0, 0]]
  >>> [weights.numpy().tolist() for _, _, weights in dataset]  # the last batch is padded
  [[1.0, 1.0], [1.0, 0.0]]
  """
  files = file_io.expand_globs(file_pattern, what="classifier TFRecord file")
  tfrecord_errors.note_tfrecord_files(files)
  dataset = tf.data.TFRecordDataset(files)
  if input_context is not None and input_context.num_input_pipelines > 1:
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  dataset = dataset.map(_decode_fn(seq_length, is_regression),
                        num_parallel_calls=tf.data.AUTOTUNE)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=seed).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
  else:
    dataset = dataset.batch(batch_size).map(_pad_to_batch_fn(batch_size))
  return dataset.prefetch(tf.data.AUTOTUNE)
