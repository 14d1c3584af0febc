"""Tests of dynamic masking in tf.data (`official_bert.pretraining.dynamic_masking`)."""

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining import dynamic_masking, masking
from official_bert.pretraining import instances as pi

from testing import shared_data

CLS, SEP, MASK, PAD = 1, 2, 3, 0
VOCAB_SIZE = 1000
CONTINUATION = tuple(i >= 500 for i in range(VOCAB_SIZE))


def make_batch(seed, batch=256, seq_length=128, continuation_rate=0.0):
  """Unmasked `[CLS] A [SEP] B [SEP]` rows of random lengths, 0-padded."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((batch, seq_length), np.int32)
  for row in range(batch):
    length = rng.integers(8, seq_length + 1)
    tokens = rng.integers(10, 500, length)
    pieces = rng.random(length) < continuation_rate
    tokens[pieces] = rng.integers(500, VOCAB_SIZE, pieces.sum())
    split = rng.integers(2, length - 2)
    tokens[0], tokens[split], tokens[length - 1] = CLS, SEP, SEP
    ids[row, :length] = tokens
  return ids, (ids > 0).astype(np.int32)


def dynamic(**kwargs):
  return dynamic_masking.DynamicMasking(vocab_size=VOCAB_SIZE, cls_id=CLS, sep_id=SEP,
                                        mask_id=MASK, **kwargs)


def chosen_mask(out):
  weights = out["masked_lm_weights"].numpy()
  chosen = np.zeros(out["input_word_ids"].shape, bool)
  rows, cols = np.nonzero(weights)
  chosen[rows, out["masked_lm_positions"].numpy()[rows, cols]] = True
  return chosen


def test_rate_split_and_untouched_tokens():
  ids, mask = make_batch(0)
  out = dynamic()(ids, mask, seed=tf.constant([1, 2]))
  weights = out["masked_lm_weights"].numpy()
  np.testing.assert_array_equal(weights.sum(axis=1),
                                masking.num_to_predict(mask.sum(axis=1), 0.15, 20))
  chosen = chosen_mask(out)
  masked_ids = out["input_word_ids"].numpy()
  np.testing.assert_array_equal(masked_ids[~chosen], ids[~chosen])
  assert not np.isin(ids[chosen], [CLS, SEP, PAD]).any()
  rows, cols = np.nonzero(weights)
  positions = out["masked_lm_positions"].numpy()
  np.testing.assert_array_equal(out["masked_lm_ids"].numpy()[rows, cols],
                                ids[rows, positions[rows, cols]])
  assert all((np.diff(positions[r, :int(weights[r].sum())]) > 0).all() for r in range(len(ids)))
  shown = masked_ids[chosen]
  assert abs(np.mean(shown == MASK) - 0.8) < 0.03
  assert abs(np.mean(shown == ids[chosen]) - 0.1) < 0.025
  assert (out["masked_lm_positions"].numpy()[weights == 0] == 0).all()


def test_whole_words_are_masked_together():
  ids, mask = make_batch(1, continuation_rate=0.4)
  out = dynamic(is_continuation=CONTINUATION)(ids, mask, seed=tf.constant([3, 4]))
  chosen = chosen_mask(out)
  is_mask = out["input_word_ids"].numpy() == MASK
  continues = np.array(CONTINUATION)[ids] & ~np.isin(np.roll(ids, 1, axis=1), [CLS, SEP, PAD])
  continues[:, 0] = False
  rows, cols = np.nonzero(continues)
  np.testing.assert_array_equal(chosen[rows, cols], chosen[rows, cols - 1])
  both = chosen[rows, cols]
  assert both.sum() > 300
  assert np.mean(is_mask[rows, cols][both] != is_mask[rows, cols - 1][both]) < 0.005
  assert (out["masked_lm_weights"].numpy().sum(axis=1) <= 20).all()
  rate = out["masked_lm_weights"].numpy().sum() / (mask.sum() - 3 * len(ids))
  assert 0.13 < rate < 0.17


def test_restore_undoes_static_masks():
  vocab = pi.VocabInfo(CLS, SEP, MASK, np.array(CONTINUATION))
  rng = np.random.default_rng(0)
  lengths = rng.integers(3, 30, 400)
  documents = pi.Documents(rng.integers(10, 500, lengths.sum()).astype(np.int32),
                           np.concatenate([[0], np.cumsum(lengths)]), np.arange(0, 401, 10))
  instances = pi.create_instances(documents, pi.InstanceOptions(dupe_factor=1), vocab,
                                  np.random.SeedSequence(0))
  restored = dynamic_masking.restore_token_ids(
      instances.input_ids, instances.masked_lm_positions, instances.masked_lm_ids,
      instances.masked_lm_weights)
  restored = restored.numpy()
  assert not (restored == MASK).any() and (instances.input_ids == MASK).any()
  changed = restored != instances.input_ids
  assert changed.sum() <= instances.masked_lm_weights.sum()


def test_pipeline_masks_change_between_epochs_and_repeat_with_the_seed():
  ids, mask = make_batch(2, batch=64)
  features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids),
              "masked_lm_positions": np.zeros((64, 20), np.int32)}
  labels = {"masked_lm_ids": np.zeros((64, 20), np.int32),
            "masked_lm_weights": np.zeros((64, 20), np.float32),
            "next_sentence_labels": np.zeros(64, np.int32)}
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(16)

  def epochs(seed):
    masked = dynamic_masking.apply_dynamic_masking(dataset, dynamic(), seed=seed)
    return [np.concatenate([f["masked_lm_positions"].numpy() for f, _ in masked])
            for _ in range(2)]

  first, second = epochs(5)
  assert not np.array_equal(first, second)
  np.testing.assert_array_equal(epochs(5)[0], first)
  for inputs, labels in dynamic_masking.apply_dynamic_masking(dataset, dynamic(), seed=5).take(1):
    assert inputs["input_word_ids"].dtype == tf.int32
    assert labels["masked_lm_weights"].dtype == tf.float32
    assert set(inputs) == {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions"}


def test_short_sequences_and_few_predictions():
  ids = np.array([[CLS, 20, SEP, 30, SEP, 0, 0, 0]], np.int32)
  out = dynamic(max_predictions_per_seq=10)(ids, (ids > 0).astype(np.int32), tf.constant([0, 1]))
  assert out["masked_lm_positions"].shape == (1, 10)
  assert out["masked_lm_weights"].numpy().sum() == 1
  assert out["masked_lm_positions"].numpy()[0, 0] in (1, 3)


def test_from_vocab_file(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing"]))
  made = dynamic_masking.DynamicMasking.from_vocab_file(str(vocab), whole_word_mask=True)
  assert (made.vocab_size, made.cls_id, made.sep_id, made.mask_id) == (7, 2, 3, 4)
  assert made.is_continuation == (False,) * 6 + (True,)
  vocab.write_text("[PAD]\n[UNK]\nplay\n")
  with pytest.raises(ValueError, match="lacks the special tokens"):
    dynamic_masking.DynamicMasking.from_vocab_file(str(vocab))


def test_real_vocabulary_ids():
  made = dynamic_masking.DynamicMasking.from_vocab_file(
      str(shared_data("vocab/bert-base-uncased-vocab.txt")))
  assert (made.vocab_size, made.pad_id, made.cls_id, made.sep_id, made.mask_id) == (
      30522, 0, 101, 102, 103)
