"""Tests for official_bert/data/classifier_features.py: conversion, TFRecords and tf.data."""

import numpy as np
import pytest
import tensorflow as tf

from official_bert import tokenization
from official_bert.data import classifier_features, glue
from official_bert.data.classifier_data import InputExample

from testing import shared_data, tiny_tokenizer

# Line number = token id.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog",
         "##s", "ran", ".", "a"]
FEATURE_NAMES = {"input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  return tiny_tokenizer(tmp_path_factory.mktemp("vocab") / "vocab.txt", VOCAB)


def convert(example, tokenizer, max_seq_length=8, labels=("0", "1"), is_regression=False):
  return classifier_features.convert_single_example(example, list(labels), max_seq_length,
                                                    tokenizer, is_regression)


def test_single_sentence(tokenizer):
  # [CLS] the cat sat . [SEP] [PAD] [PAD]
  feature = convert(InputExample("train-0", "The cat sat.", None, "1"), tokenizer)
  assert feature.input_ids == [2, 5, 6, 7, 13, 3, 0, 0]
  assert feature.input_mask == [1, 1, 1, 1, 1, 1, 0, 0]
  assert feature.segment_ids == [0] * 8
  assert feature.label_id == 1 and feature.is_real_example


def test_single_sentence_is_cut_to_fit(tokenizer):
  # 6 tokens, room for 5 - 2 = 3: [CLS] the cat sat [SEP]; unknown words become [UNK] (id 1).
  feature = convert(InputExample("x", "the cat sat on the mat", None, "0"), tokenizer, 5)
  assert feature.input_ids == [2, 5, 6, 7, 3]
  assert convert(InputExample("x", "zebra", None, "0"), tokenizer).input_ids[:3] == [2, 1, 3]


def test_pair_truncated_longest_first(tokenizer):
  # a = the cat sat on the mat (6 tokens), b = dog ##s ran (3); room for 8 - 3 = 5 tokens.
  # 6+3: cut a -> 5+3: cut a -> 4+3: cut a -> 3+3 tie: cut b -> 3+2 = 5.
  # [CLS] the cat sat [SEP] dog ##s [SEP]
  feature = convert(InputExample("x", "The cat sat on the mat", "Dogs ran", "0"), tokenizer)
  assert feature.input_ids == [2, 5, 6, 7, 3, 10, 11, 3]
  assert feature.input_mask == [1] * 8
  assert feature.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1]
  # With room to spare: [CLS] a cat [SEP] the dog ##s ran . [SEP] [PAD] [PAD]
  feature = convert(InputExample("x", "A cat", "The dogs ran.", "0"), tokenizer, 12)
  assert feature.input_ids == [2, 14, 6, 3, 5, 10, 11, 12, 13, 3, 0, 0]
  assert feature.segment_ids == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0]
  assert feature.input_mask == [1] * 10 + [0, 0]


@pytest.mark.parametrize("text_b", ["\x07\ufffd", "  ", ""])
def test_a_text_b_without_tokens_leaves_a_single_sentence_as_in_the_original(tokenizer, text_b):
  # No second [SEP], and text_a has the single sentence's room: 8 - 2 = 6 tokens, none cut.
  feature = convert(InputExample("x", "the cat sat on the mat", text_b, "0"), tokenizer)
  assert feature.input_ids == [2, 5, 6, 7, 8, 5, 9, 3]
  assert feature.segment_ids == [0] * 8 and feature.input_mask == [1] * 8
  assert convert(InputExample("x", "a", text_b, "0"), tokenizer, 3).input_ids == [2, 14, 3]


def test_labels(tokenizer):
  nli = ["contradiction", "entailment", "neutral"]
  assert convert(InputExample("x", "a", "b", "neutral"), tokenizer, labels=nli).label_id == 2
  # Unlabeled test examples get label id 0; regression keeps the float score.
  assert convert(InputExample("x", "a", "b", None), tokenizer, labels=nli).label_id == 0
  assert convert(InputExample("x", "a", "b", 3.8), tokenizer, is_regression=True).label_id == 3.8
  with pytest.raises(ValueError, match="example dev-3: label 'maybe' is not one of the labels"):
    convert(InputExample("dev-3", "a", "b", "maybe"), tokenizer, labels=nli)
  with pytest.raises(ValueError, match="max_seq_length=3 leaves no room"):
    convert(InputExample("x", "a", "b", "0"), tokenizer, 3)


def test_real_vocab_on_a_real_mrpc_pair():
  vocab = shared_data("vocab/bert-base-uncased-vocab.txt")
  example = glue.GlueProcessor("MRPC", shared_data("glue/MRPC")).get_dev_examples()[0]
  tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
  feature = convert(example, tokenizer, 128)
  length = sum(feature.input_mask)
  tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:length])
  first_sep = tokens.index("[SEP]")
  assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[UNK]" not in tokens
  assert feature.segment_ids[:length] == [0] * (first_sep + 1) + [1] * (length - first_sep - 1)
  # Gluing the word pieces back together gives the lower-cased texts without spaces.
  rebuilt = "".join(token.removeprefix("##") for token in tokens[1:first_sep])
  assert rebuilt == example.text_a.lower().replace(" ", "")
  rebuilt = "".join(token.removeprefix("##") for token in tokens[first_sep + 1:-1])
  assert rebuilt == example.text_b.lower().replace(" ", "")


EXAMPLES = [
    InputExample("dev-0", "The cat sat.", None, "1"),
    InputExample("dev-1", "A dog ran.", None, "0"),
    InputExample("dev-2", "The mat.", None, "1"),
    InputExample("dev-3", "Dogs sat on a cat.", None, "0"),
    InputExample("dev-4", "The dog.", None, "1"),
]


def write_records(tmp_path, tokenizer, examples=EXAMPLES, is_regression=False):
  path = str(tmp_path / "eval.tf_record")
  count = classifier_features.file_based_convert_examples_to_features(
      examples, [] if is_regression else ["0", "1"], 8, tokenizer, path, is_regression)
  assert count == len(examples)
  return path


def test_tfrecord_keeps_the_original_feature_names(tmp_path, tokenizer):
  path = write_records(tmp_path, tokenizer)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.tf_record"]
  records = [tf.train.Example.FromString(raw.numpy()) for raw in tf.data.TFRecordDataset(path)]
  assert len(records) == 5
  first = records[0].features.feature
  assert set(first) == FEATURE_NAMES
  assert list(first["input_ids"].int64_list.value) == [2, 5, 6, 7, 13, 3, 0, 0]
  assert list(first["input_mask"].int64_list.value) == [1, 1, 1, 1, 1, 1, 0, 0]
  assert list(first["segment_ids"].int64_list.value) == [0] * 8
  assert list(first["label_ids"].int64_list.value) == [1]
  assert list(first["is_real_example"].int64_list.value) == [1]


def test_failed_conversion_leaves_no_file(tmp_path, tokenizer):
  bad = EXAMPLES[:2] + [InputExample("dev-9", "a", None, "2")]
  with pytest.raises(ValueError, match="dev-9"):
    write_records(tmp_path, tokenizer, bad)
  assert not list(tmp_path.iterdir())


def test_eval_dataset_pads_the_last_batch_and_drops_nothing(tmp_path, tokenizer):
  path = write_records(tmp_path, tokenizer)
  dataset = classifier_features.create_classifier_dataset(path, 8, batch_size=2,
                                                          is_training=False)
  inputs_spec, labels_spec, weights_spec = dataset.element_spec
  assert set(inputs_spec) == {"input_word_ids", "input_mask", "input_type_ids"}
  for spec in inputs_spec.values():
    assert spec.shape == (2, 8) and spec.dtype == tf.int32
  assert labels_spec.shape == (2,) and labels_spec.dtype == tf.int32
  assert weights_spec.shape == (2,) and weights_spec.dtype == tf.float32
  batches = list(dataset.as_numpy_iterator())
  assert len(batches) == 3
  labels = np.concatenate([labels for _, labels, _ in batches])
  weights = np.concatenate([weights for _, _, weights in batches])
  np.testing.assert_array_equal(labels, [1, 0, 1, 0, 1, 0])
  np.testing.assert_array_equal(weights, [1, 1, 1, 1, 1, 0])
  last_inputs = batches[-1][0]
  np.testing.assert_array_equal(last_inputs["input_word_ids"][0], [2, 5, 10, 13, 3, 0, 0, 0])
  for tensor in last_inputs.values():
    np.testing.assert_array_equal(tensor[1], np.zeros(8))


def test_training_dataset_repeats_with_full_batches(tmp_path, tokenizer):
  path = write_records(tmp_path, tokenizer)
  dataset = classifier_features.create_classifier_dataset(path, 8, batch_size=2,
                                                          is_training=True, seed=1)
  batches = list(dataset.take(6).as_numpy_iterator())
  # 12 examples drawn from 5: the file is read more than once, always in full batches.
  assert [inputs["input_word_ids"].shape for inputs, _, _ in batches] == [(2, 8)] * 6
  assert all(weights.tolist() == [1.0, 1.0] for _, _, weights in batches)
  first_tokens = {int(inputs["input_word_ids"][i][1]) for inputs, _, _ in batches for i in (0, 1)}
  assert first_tokens == {5, 14, 10}  # the, a, dog: every example starts with one of them


def test_regression_labels_are_floats(tmp_path, tokenizer):
  examples = [InputExample("train-0", "a cat", "a dog", 3.8),
              InputExample("train-1", "the mat", "the cat", 0.25)]
  path = write_records(tmp_path, tokenizer, examples, is_regression=True)
  record = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(path))).numpy())
  assert list(record.features.feature["label_ids"].float_list.value) == pytest.approx([3.8])
  dataset = classifier_features.create_classifier_dataset(path, 8, 4, is_training=False,
                                                          is_regression=True)
  _, labels, weights = next(iter(dataset))
  assert labels.dtype == tf.float32
  np.testing.assert_allclose(labels.numpy(), [3.8, 0.25, 0, 0], rtol=1e-6)
  np.testing.assert_array_equal(weights.numpy(), [1, 1, 0, 0])


def test_reads_original_padding_examples_and_shards(tmp_path):
  # A file as the original run_classifier.py writes for TPU eval: a PaddingInputExample has
  # is_real_example = 0.
  path = str(tmp_path / "original.tf_record")
  with tf.io.TFRecordWriter(path) as writer:
    for index, real in enumerate([1, 1, 1, 0]):
      feature = classifier_features.InputFeatures([2, 5 + index, 3, 0], [1, 1, 1, 0],
                                                  [0, 0, 0, 0], index % 2, bool(real))
      writer.write(classifier_features.to_tf_example(feature).SerializeToString())
  dataset = classifier_features.create_classifier_dataset(path, 4, 4, is_training=False)
  inputs, labels, weights = next(iter(dataset))
  np.testing.assert_array_equal(weights.numpy(), [1, 1, 1, 0])
  np.testing.assert_array_equal(labels.numpy(), [0, 1, 0, 1])
  # The second of two input pipelines reads records 1 and 3, then pads to its batch of 4.
  context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
  dataset = classifier_features.create_classifier_dataset(path, 4, 4, is_training=False,
                                                          input_context=context)
  inputs, labels, weights = next(iter(dataset))
  np.testing.assert_array_equal(inputs["input_word_ids"].numpy()[:, 1], [6, 8, 0, 0])
  np.testing.assert_array_equal(weights.numpy(), [1, 0, 0, 0])
  with pytest.raises(FileNotFoundError, match="classifier TFRecord file .*: no such file"):
    classifier_features.create_classifier_dataset(str(tmp_path / "missing*"), 4, 4, False)
