"""Reading pre-training TFRecords, ours or the original tool's, into the model's input dicts.

The records hold the original features (`input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`);
`pretraining_dataset` yields batches of `(features, labels)`:

* features: `input_word_ids`, `input_mask`, `input_type_ids` (int32 `[batch, seq_length]`) and
  `masked_lm_positions` (int32 `[batch, max_predictions_per_seq]`), the inputs of
  `BertPretrainer`;
* labels: `masked_lm_ids` (int32), `masked_lm_weights` (float32), both
  `[batch, max_predictions_per_seq]`, and `next_sentence_labels` (int32 `[batch]`, 1 = random next).

The order the reader assumes: each file already holds its records in a uniformly random order, as
`create_pretraining_data` writes them (and the original tool did). Training reads the files in a
shuffled order, `cycle_length` at a time, and then through a shuffle buffer that only mixes
neighbouring records: it cannot undo an order in which the records follow the corpus. Files
written in corpus order (by another tool, or by earlier versions of this package) train measurably
slower; shuffle them once with `bert-shuffle-records` (`official_bert.pretraining.shuffle_records`).
"""

import tensorflow as tf

from official_bert.common import file_io, tfrecord_errors
from official_bert.pretraining.dynamic_masking import apply_dynamic_masking

_GZIP_MAGIC = b"\x1f\x8b"


def feature_spec(seq_length, max_predictions_per_seq):
  """The original `run_pretraining.py` parsing spec for `tf.io.parse_example`."""
  return {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


def compression_type(path):
  """`"GZIP"` when the file starts with the gzip magic bytes, else `""`."""
  with tf.io.gfile.GFile(path, "rb") as f:
    return "GZIP" if f.read(2) == _GZIP_MAGIC else ""


def pretraining_dataset(file_patterns, seq_length, max_predictions_per_seq, batch_size,
                        is_training, *, input_context=None, dynamic_masking=None, seed=None,
                        shuffle_buffer_size=10000, cycle_length=8, vocab_size=None,
                        type_vocab_size=None):
  """A `tf.data` pipeline over pre-training TFRecords.

  Args:
    file_patterns: comma-separated files or globs (a string or a list of them); plain or GZIP
      files, recognised by their first bytes.
    seq_length: `max_seq_length` the records were written with.
    max_predictions_per_seq: as the records were written with.
    batch_size: the global batch size; with `input_context`, each input pipeline batches
      `input_context.get_per_replica_batch_size(batch_size)`.
    is_training: shuffle files and records, repeat forever and drop the last partial batch.
    input_context: `tf.distribute.InputContext`; each input pipeline reads its share of the files
      (of the records, when there are fewer files than pipelines).
    dynamic_masking: a `DynamicMasking` (`official_bert.pretraining.dynamic_masking`) to draw new
      masks for every batch (so every epoch), or None to use the stored masks.
    seed: seeds shuffling and dynamic masking.
    shuffle_buffer_size: records in the shuffle buffer when training. It mixes neighbours only;
      the files must be in random order already (see the module docstring).
    cycle_length: files read at once.
    vocab_size: the model's; when given, every batch is checked to hold token ids (`input_ids`,
      `masked_lm_ids`) in `[0, vocab_size)`, and fails naming the file of a record that does not
      (see `tfrecord_errors.check_range`): XLA would clamp such an id and train on silently.
    type_vocab_size: likewise for `segment_ids`, when given.

  Returns:
    A `tf.data.Dataset` of `(features, labels)` dicts (see the module docstring).

  Example, over the files `create_pretraining_data` wrote:

      ds = pretraining_dataset("out/*.tfrecord", 128, 20, batch_size=32, is_training=True)
      features, labels = next(iter(ds))
  """
  files = file_io.expand_globs(file_patterns, what="pre-training data")
  compression_types = [compression_type(f) for f in files]
  tfrecord_errors.note_tfrecord_files(files, compression_types)
  with tfrecord_errors.naming_damaged_tfrecords():
    _check_lengths(files[0], seq_length, max_predictions_per_seq)
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  shard_files = num_pipelines > 1 and len(files) >= num_pipelines

  dataset = tf.data.Dataset.from_tensor_slices((files, compression_types))
  if shard_files:
    dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.shuffle(len(files), seed=seed).repeat()
  # Each record travels with its file's path, for the range checks' messages.
  dataset = dataset.interleave(
      lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression).map(
          lambda record: (record, path)),
      cycle_length=min(cycle_length, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
      deterministic=not is_training)
  if num_pipelines > 1 and not shard_files:
    dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
  dataset = dataset.batch(batch_size, drop_remainder=is_training)
  spec = feature_spec(seq_length, max_predictions_per_seq)
  limits = {"input_ids": (vocab_size, "vocab_size"), "masked_lm_ids": (vocab_size, "vocab_size"),
            "segment_ids": (type_vocab_size, "type_vocab_size"),
            "masked_lm_positions": (seq_length, "seq_length"),
            "next_sentence_labels": (2, "a label, 0 or 1")}
  limits = {name: limit for name, limit in limits.items() if limit[0] is not None}

  def to_model_inputs(records, paths):
    example = tf.io.parse_example(records, spec)
    checks = [tfrecord_errors.check_range(example[name], paths, name, 0, high, limit_name)
              for name, (high, limit_name) in limits.items()]
    with tf.control_dependencies(checks):
      return _to_model_inputs({name: tf.identity(value) for name, value in example.items()})

  dataset = dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
  if dynamic_masking is not None:
    dataset = apply_dynamic_masking(dataset, dynamic_masking, seed=seed)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _to_model_inputs(example):
  """Renames the original features to the model's inputs and labels, as int32 / float32."""
  def to_int(name):
    return tf.cast(example[name], tf.int32)
  features = {
      "input_word_ids": to_int("input_ids"),
      "input_mask": to_int("input_mask"),
      "input_type_ids": to_int("segment_ids"),
      "masked_lm_positions": to_int("masked_lm_positions"),
  }
  labels = {
      "masked_lm_ids": to_int("masked_lm_ids"),
      "masked_lm_weights": example["masked_lm_weights"],
      "next_sentence_labels": to_int("next_sentence_labels")[..., 0],
  }
  return features, labels


def _check_lengths(path, seq_length, max_predictions_per_seq):
  """Fails early, naming the file, when its records have other lengths than the arguments."""
  dataset = tf.data.TFRecordDataset(path, compression_type=compression_type(path))
  for record in dataset.take(1):
    example = tf.train.Example.FromString(record.numpy()).features.feature
    found = {"input_ids": len(example["input_ids"].int64_list.value),
             "masked_lm_positions": len(example["masked_lm_positions"].int64_list.value)}
    expected = {"input_ids": seq_length, "masked_lm_positions": max_predictions_per_seq}
    if found != expected:
      raise ValueError(
          f"{path}: records have {found['input_ids']} input_ids and "
          f"{found['masked_lm_positions']} masked_lm_positions, but seq_length={seq_length} and "
          f"max_predictions_per_seq={max_predictions_per_seq} were given; pass the values of "
          "create_pretraining_data.py (--max_seq_length, --max_predictions_per_seq)")
