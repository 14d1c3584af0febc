"""Tests of the pre-training TFRecord reader (`official_bert.pretraining.reader`)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining import reader
from official_bert.pretraining.dynamic_masking import DynamicMasking

SEQ, PRED = 16, 4


def original_record(index):
  """A record built the way the original tool builds them: one `tf.train.Example` per instance."""
  ids = [2] + [10 + (index + i) % 50 for i in range(6)] + [3] + [20 + i for i in range(4)] + [3]
  ids += [0] * (SEQ - len(ids))
  positions = [2, 5, 0, 0]
  masked_ids = [ids[2], ids[5], 0, 0]
  ids[2] = ids[5] = 4

  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  features = collections.OrderedDict([
      ("input_ids", int_feature(ids)),
      ("input_mask", int_feature([1] * 13 + [0] * 3)),
      ("segment_ids", int_feature([0] * 8 + [1] * 5 + [0] * 3)),
      ("masked_lm_positions", int_feature(positions)),
      ("masked_lm_ids", int_feature(masked_ids)),
      ("masked_lm_weights",
       tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 1.0, 0.0, 0.0]))),
      ("next_sentence_labels", int_feature([index % 2])),
  ])
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write(path, indices, compression=""):
  with tf.io.TFRecordWriter(str(path), compression) as writer:
    for index in indices:
      writer.write(original_record(index))
  return str(path)


@pytest.fixture()
def files(tmp_path):
  return [write(tmp_path / f"part-{i}.tfrecord", range(10 * i, 10 * i + 10)) for i in range(4)]


def labels_of(dataset):
  return sorted(int(x) for _, labels in dataset for x in labels["next_sentence_labels"].numpy()
                ) if dataset is not None else []


def first_ids(dataset):
  return sorted(int(f["input_word_ids"][i, 1]) for f, _ in dataset
                for i in range(f["input_word_ids"].shape[0]))


def test_yields_the_model_inputs(files):
  dataset = reader.pretraining_dataset(files[0], SEQ, PRED, 4, is_training=False)
  features, labels = next(iter(dataset))
  assert {k: (v.dtype, v.shape) for k, v in features.items()} == {
      "input_word_ids": (tf.int32, (4, SEQ)), "input_mask": (tf.int32, (4, SEQ)),
      "input_type_ids": (tf.int32, (4, SEQ)), "masked_lm_positions": (tf.int32, (4, PRED))}
  assert {k: (v.dtype, v.shape) for k, v in labels.items()} == {
      "masked_lm_ids": (tf.int32, (4, PRED)), "masked_lm_weights": (tf.float32, (4, PRED)),
      "next_sentence_labels": (tf.int32, (4,))}
  assert features["input_word_ids"][0, 2] == 4 and labels["masked_lm_ids"][0, 0] == 11
  assert labels["next_sentence_labels"].numpy().tolist() == [0, 1, 0, 1]
  assert features["input_type_ids"].numpy()[0].tolist() == [0] * 8 + [1] * 5 + [0] * 3


def test_comma_lists_globs_and_gzip_mixed(tmp_path, files):
  gz = write(tmp_path / "extra.tfrecord.gz", range(100, 105), "GZIP")
  assert reader.compression_type(gz) == "GZIP"
  assert reader.compression_type(files[0]) == ""
  dataset = reader.pretraining_dataset(
      f"{tmp_path}/part-*.tfrecord,{gz}", SEQ, PRED, 5, is_training=False)
  assert len(first_ids(dataset)) == 45


def test_missing_files_and_wrong_lengths_are_clear_errors(tmp_path, files):
  with pytest.raises(FileNotFoundError, match="nothing"):
    reader.pretraining_dataset(f"{files[0]},{tmp_path}/nothing*", SEQ, PRED, 4, False)
  with pytest.raises(ValueError, match=r"part-0.tfrecord: records have 16 input_ids"):
    reader.pretraining_dataset(files[0], 128, PRED, 4, False)


def test_input_pipelines_read_disjoint_shares(files):
  shares = []
  for pipeline in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=2)
    dataset = reader.pretraining_dataset(files, SEQ, PRED, 8, is_training=False,
                                         input_context=context)
    assert next(iter(dataset))[0]["input_word_ids"].shape[0] == 4  # per-replica batch
    shares.append(first_ids(dataset))
  assert len(shares[0]) == len(shares[1]) == 20
  everything = first_ids(reader.pretraining_dataset(files, SEQ, PRED, 8, False))
  assert sorted(shares[0] + shares[1]) == everything


def test_fewer_files_than_pipelines_shards_records(files):
  shares = []
  for pipeline in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
    shares.append(labels_of(reader.pretraining_dataset(
        files[0], SEQ, PRED, 1, is_training=False, input_context=context)))
  assert shares == [[0] * 5, [1] * 5]


def test_training_repeats_shuffles_and_drops_the_remainder(files):
  dataset = reader.pretraining_dataset(files[:1], SEQ, PRED, 3, is_training=True, seed=1)
  batches = [f["input_word_ids"].numpy() for f, _ in dataset.take(10)]
  assert all(b.shape == (3, SEQ) for b in batches)
  firsts = [int(x) for b in batches for x in b[:, 1]]
  assert firsts[:10] != sorted(firsts[:10])


def test_dynamic_masking_in_the_reader(files):
  masker = DynamicMasking(vocab_size=60, cls_id=2, sep_id=3, mask_id=4,
                          max_predictions_per_seq=PRED)
  dataset = reader.pretraining_dataset(files, SEQ, PRED, 40, is_training=False,
                                       dynamic_masking=masker, seed=3)
  epochs = [next(iter(dataset)) for _ in range(2)]
  positions = [f["masked_lm_positions"].numpy() for f, _ in epochs]
  assert not np.array_equal(positions[0], positions[1])
  for features, labels in epochs:
    # 13 tokens: round(13 * 0.15) = 2 predictions, never on [CLS] / [SEP] / padding.
    assert (labels["masked_lm_weights"].numpy().sum(axis=1) == 2).all()
    chosen = features["masked_lm_positions"].numpy()[:, :2]
    assert not np.isin(chosen, [0, 7, 12, 13, 14, 15]).any()
    assert not np.isin(labels["masked_lm_ids"].numpy()[:, :2], [2, 3, 4, 0]).any()
