"""Tests of the pre-training instance algorithm on id arrays (no text, no TensorFlow ops)."""

import random

import numpy as np
import pytest

from official_bert.pretraining import instances as pi
from official_bert.pretraining import masking

CLS, SEP, MASK = 1, 2, 3
VOCAB_SIZE = 1000
# Ids from 500 up are "##" pieces.
CONTINUATION = np.arange(VOCAB_SIZE) >= 500
VOCAB = pi.VocabInfo(cls_id=CLS, sep_id=SEP, mask_id=MASK, is_continuation=CONTINUATION)


def make_documents(seed, num_docs=60, sentences=(2, 30), tokens=(3, 40), continuation_rate=0.0):
  """Random documents; every token is unique, so each instance can be traced back to its source."""
  rng = np.random.default_rng(seed)
  sentence_counts = rng.integers(*sentences, size=num_docs)
  lengths = rng.integers(*tokens, size=sentence_counts.sum())
  num_tokens = int(lengths.sum())
  # Token ids are positions in the flat array; `vocab_ids` maps them to vocabulary ids.
  vocab_ids = rng.integers(10, 500, size=num_tokens)
  pieces = rng.random(num_tokens) < continuation_rate
  vocab_ids[pieces] = rng.integers(500, VOCAB_SIZE, size=pieces.sum())
  documents = pi.Documents(
      token_ids=vocab_ids.astype(np.int32),
      sentence_splits=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
      document_splits=np.concatenate([[0], np.cumsum(sentence_counts)]).astype(np.int64))
  return documents


def make(documents, seed=0, **options):
  options.setdefault("dupe_factor", 2)
  return pi.create_instances(documents, pi.InstanceOptions(**options), VOCAB,
                             np.random.SeedSequence(seed))


def restore(instances):
  """The ids before masking."""
  ids = instances.input_ids.copy()
  rows, cols = np.nonzero(instances.masked_lm_weights)
  ids[rows, instances.masked_lm_positions[rows, cols]] = instances.masked_lm_ids[rows, cols]
  return ids


@pytest.fixture(scope="module")
def documents():
  return make_documents(0)


@pytest.fixture(scope="module")
def instances(documents):
  return make(documents, dupe_factor=5)


def test_layout_is_cls_a_sep_b_sep_padded(instances):
  lengths = instances.input_mask.sum(axis=1)
  assert lengths.max() <= 128 and lengths.min() >= 5
  for row in range(0, len(instances), 37):
    n = lengths[row]
    ids, segments = restore(instances)[row], instances.segment_ids[row]
    assert (instances.input_mask[row, :n] == 1).all() and (instances.input_mask[row, n:] == 0).all()
    assert ids[0] == CLS and ids[n - 1] == SEP and (ids[n:] == 0).all()
    sep_a = np.flatnonzero(ids[:n] == SEP)[0]
    assert (segments[:sep_a + 1] == 0).all() and (segments[sep_a + 1:n] == 1).all()
    assert (segments[n:] == 0).all()
    assert np.count_nonzero(ids[:n] == SEP) == 2 and np.count_nonzero(ids == CLS) == 1


def test_sentences_come_from_the_documents(documents, instances):
  flat = documents.token_ids.tolist()
  text = "," + ",".join(map(str, flat)) + ","
  restored = restore(instances)
  contiguous = 0
  for row in range(0, len(instances), 7):
    ids = restored[row, :instances.input_mask[row].sum()]
    sep_a = np.flatnonzero(ids == SEP)[0]
    a, b = ids[1:sep_a], ids[sep_a + 1:-1]
    assert "," + ",".join(map(str, a)) + "," in text
    assert "," + ",".join(map(str, b)) + "," in text
    if instances.next_sentence_labels[row] == 0 and len(ids) < 128:
      # The real continuation, not truncated: B follows A directly in the document.
      assert "," + ",".join(map(str, np.concatenate([a, b]))) + "," in text
      contiguous += 1
  assert contiguous > 20


def test_mask_rate_and_the_80_10_10_split(instances):
  lengths = instances.input_mask.sum(axis=1)
  expected = masking.num_to_predict(lengths, 0.15, 20)
  np.testing.assert_array_equal(instances.masked_lm_weights.sum(axis=1), expected)
  rate = instances.masked_lm_weights.sum() / (lengths - 3).sum()
  assert 0.145 < rate < 0.165
  rows, cols = np.nonzero(instances.masked_lm_weights)
  positions = instances.masked_lm_positions[rows, cols]
  shown = instances.input_ids[rows, positions]
  labels = instances.masked_lm_ids[rows, cols]
  masked = np.mean(shown == MASK)
  kept = np.mean(shown == labels)
  assert abs(masked - 0.8) < 0.015
  assert abs(kept - 0.1) < 0.012  # includes random draws that hit the label (1 in 1000)
  assert abs(1 - masked - kept - 0.1) < 0.012
  # The counts add up, but for random ids that happen to be [MASK] (1 in 1000).
  total = instances.num_random_tokens + instances.num_kept_tokens + np.sum(shown == MASK)
  assert len(rows) <= total <= 1.003 * len(rows)


def test_specials_and_padding_are_never_predicted(instances):
  restored = restore(instances)
  rows, cols = np.nonzero(instances.masked_lm_weights)
  predicted = restored[rows, instances.masked_lm_positions[rows, cols]]
  assert not np.isin(predicted, [CLS, SEP, 0]).any()
  assert (instances.masked_lm_positions[rows, cols] > 0).all()
  padding = instances.masked_lm_weights == 0
  assert (instances.masked_lm_positions[padding] == 0).all()
  assert (instances.masked_lm_ids[padding] == 0).all()


def test_positions_are_sorted_and_unique(instances):
  for row in range(len(instances)):
    n = int(instances.masked_lm_weights[row].sum())
    positions = instances.masked_lm_positions[row, :n]
    assert (np.diff(positions) > 0).all()


def test_about_half_random_next(instances):
  # Above one half: a chunk with a single sentence always takes a random next, as the original.
  assert 0.5 <= instances.next_sentence_labels.mean() < 0.6


def test_short_seq_prob_makes_shorter_sequences(documents):
  never = make(documents, short_seq_prob=0.0)
  always = make(documents, short_seq_prob=1.0)
  assert always.input_mask.sum(axis=1).mean() < 0.75 * never.input_mask.sum(axis=1).mean()
  full = np.mean(never.input_mask.sum(axis=1) >= 120)
  assert full > 2 * np.mean(always.input_mask.sum(axis=1) >= 120)


def test_max_seq_length_and_max_predictions_are_respected():
  instances = make(make_documents(3), max_seq_length=32, max_predictions_per_seq=3)
  assert instances.input_ids.shape[1] == 32 and instances.masked_lm_positions.shape[1] == 3
  assert instances.input_mask.sum(axis=1).max() <= 32
  assert instances.masked_lm_weights.sum(axis=1).max() <= 3


def test_whole_word_masking_takes_whole_words():
  documents = make_documents(4, continuation_rate=0.4)
  instances = make(documents, do_whole_word_mask=True, dupe_factor=3)
  restored = restore(instances)
  lengths = instances.input_mask.sum(axis=1)
  words_with_pieces = mixed = 0
  for row in range(len(instances)):
    n = lengths[row]
    chosen = np.zeros(restored.shape[1], bool)
    count = int(instances.masked_lm_weights[row].sum())
    chosen[instances.masked_lm_positions[row, :count]] = True
    is_mask = instances.input_ids[row] == MASK
    ids = restored[row]
    for pos in range(2, n - 1):
      continues = CONTINUATION[ids[pos]] and ids[pos - 1] not in (CLS, SEP)
      if continues:
        assert chosen[pos] == chosen[pos - 1], (row, pos)
        words_with_pieces += chosen[pos]
        mixed += chosen[pos] and is_mask[pos] != is_mask[pos - 1]
  assert words_with_pieces > 1000
  # One 80/10/10 draw per word: [MASK] on all its pieces or on none, but for random ids that
  # happen to be [MASK] (1 in 1000).
  assert mixed <= 0.003 * words_with_pieces
  rate = instances.masked_lm_weights.sum() / (lengths - 3).sum()
  assert 0.14 < rate < 0.165


def test_same_seed_same_instances_other_seed_other_instances(documents):
  first, again, other = make(documents, seed=5), make(documents, seed=5), make(documents, seed=6)
  for name in pi.FEATURE_NAMES:
    np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
  assert not np.array_equal(first.input_ids, other.input_ids)


def test_dupe_factor_repeats_the_documents_with_new_masks(documents):
  one, three = make(documents, dupe_factor=1), make(documents, dupe_factor=3)
  assert 2.5 * len(one) < len(three) < 3.5 * len(one)


def original_pairs(documents, max_seq_length, short_seq_prob, rng):
  """The original tool's sentence pairing, transcribed on lists of sentences (lists of ids).

  Random integers are drawn as `_pair_spans` draws them, so that both make the same choices.
  """
  uniform = rng.random

  def randint(low, high):
    return low + int(uniform() * (high - low + 1))

  pairs = []
  for doc, document in enumerate(documents):
    target = max_seq_length - 3
    if uniform() < short_seq_prob:
      target = randint(2, max_seq_length - 3)
    chunk, length, i = [], 0, 0
    while i < len(document):
      chunk.append(document[i])
      length += len(document[i])
      if i == len(document) - 1 or length >= target:
        a_end = randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
        a = [t for sentence in chunk[:a_end] for t in sentence]
        if len(chunk) == 1 or uniform() < 0.5:
          for _ in range(10):
            other = randint(0, len(documents) - 1)
            if other != doc:
              break
          b = []
          for sentence in documents[other][randint(0, len(documents[other]) - 1):]:
            b.extend(sentence)
            if len(b) >= target - len(a):
              break
          i -= len(chunk) - a_end
          pairs.append((a, b, 1))
        else:
          pairs.append((a, [t for sentence in chunk[a_end:] for t in sentence], 0))
        chunk, length = [], 0
      i += 1
  return pairs


@pytest.mark.parametrize("short_seq_prob", [0.1, 0.9])
def test_sentence_pairs_are_the_originals(short_seq_prob):
  documents = make_documents(7, num_docs=30)
  flat, splits = documents.token_ids.tolist(), documents.sentence_splits
  as_lists = [[flat[splits[k]:splits[k + 1]] for k in range(first, end)]
              for first, end in zip(documents.document_splits[:-1], documents.document_splits[1:])]
  options = pi.InstanceOptions(max_seq_length=64, short_seq_prob=short_seq_prob)
  a_lo, a_hi, b_lo, b_hi, labels, _ = pi._pair_spans(pi._Source.of(documents, None, 0), options,
                                                     random.Random(3))
  expected = original_pairs(as_lists, 64, short_seq_prob, random.Random(3))
  assert len(expected) == len(labels) > 100
  for k, (a, b, label) in enumerate(expected):
    assert (flat[a_lo[k]:a_hi[k]], flat[b_lo[k]:b_hi[k]], labels[k]) == (a, b, label)


def test_truncation_matches_the_original_one_token_at_a_time():
  rng = np.random.default_rng(0)
  len_a = rng.integers(1, 200, size=2000)
  len_b = rng.integers(1, 200, size=2000)
  zeros = np.zeros_like(len_a)
  a_lo, a_hi, b_lo, b_hi = pi._truncate_pairs(zeros, len_a, zeros, len_b, 125, rng)
  for i in range(len(len_a)):
    a, b = int(len_a[i]), int(len_b[i])
    while a + b > 125:  # the original's rule: shorten the longer side, B on a tie
      if a > b:
        a -= 1
      else:
        b -= 1
    assert (a_hi[i] - a_lo[i], b_hi[i] - b_lo[i]) == (a, b)
  cut_a = len_a - (a_hi - a_lo)
  assert abs(a_lo.sum() / cut_a.sum() - 0.5) < 0.01  # front or back with a fair coin


def test_num_to_predict_rounds_half_to_even_and_clips():
  counts = masking.num_to_predict([128, 30, 10, 5, 3, 500], 0.15, 20)
  np.testing.assert_array_equal(counts, [19, 4, 2, 1, 1, 20])


def test_single_document_takes_random_next_from_itself():
  documents = pi.Documents(np.arange(10, 70, dtype=np.int32), np.arange(0, 61, 6),
                           np.array([0, 10]))
  instances = make(documents, max_seq_length=16)
  assert len(instances) > 0 and instances.next_sentence_labels.any()


def test_options_are_checked():
  with pytest.raises(ValueError, match="max_seq_length"):
    pi.InstanceOptions(max_seq_length=4)
  with pytest.raises(ValueError, match="masked_lm_prob"):
    pi.InstanceOptions(masked_lm_prob=0.0)
  with pytest.raises(ValueError, match="dupe_factor"):
    pi.InstanceOptions(dupe_factor=0)


def test_vocab_without_special_tokens_is_rejected():
  with pytest.raises(ValueError, match=r"\[MASK\]"):
    pi.VocabInfo.from_tokens(["[PAD]", "[CLS]", "[SEP]", "a"])
