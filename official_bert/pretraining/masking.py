"""Masked LM predictions for pre-training instances, in numpy: the original tool's rule.

Per row, `min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))` tokens are chosen
(`length` counts `[CLS]` and `[SEP]`), never `[CLS]` or `[SEP]`: the original shuffles the candidate
tokens (whole words, under whole-word masking) and scans them, taking each one that still fits.
Of the chosen tokens 80% become `[MASK]`, 10% a random vocabulary id and 10% stay; under whole-word
masking the choice is made once per word, so all pieces of a word are treated alike. The positions
are sorted.

`dynamic_masking` applies the same rule in TensorFlow, inside `tf.data`.
"""

import dataclasses

import numpy as np

# The 80/10/10 rule for a token chosen for prediction: [MASK] below 0.8, unchanged below 0.9,
# a random vocabulary id above.
_MASK_RATE = 0.8
_KEEP_RATE = 0.1


def num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq):
  """The original's count of predictions: `min(max, max(1, round(length * prob)))`.

  `length` counts `[CLS]` and `[SEP]`; rounding is half to even, as Python's `round`.
  """
  counts = np.rint(np.asarray(lengths) * masked_lm_prob).astype(np.int64)
  return np.minimum(max_predictions_per_seq, np.maximum(1, counts))


@dataclasses.dataclass(frozen=True)
class Predictions:
  """The masked LM predictions of a batch of rows.

  Args:
    input_ids: int32 `[n, seq_length]`, with the chosen tokens masked.
    positions: int32 `[n, max_predictions]`, the chosen positions, sorted, 0-padded.
    labels: int32 `[n, max_predictions]`, the original ids there, 0-padded.
    weights: float32 `[n, max_predictions]`, 1.0 on real predictions.
    num_random: how many chosen tokens became a random id.
    num_kept: how many chosen tokens stayed unchanged.
  """

  input_ids: np.ndarray
  positions: np.ndarray
  labels: np.ndarray
  weights: np.ndarray
  num_random: int
  num_kept: int


def choose_and_mask(input_ids, candidate, budget, vocab, whole_word, max_predictions, rng):
  """Chooses up to `budget` candidate tokens per row and masks them with the 80/10/10 rule.

  Args:
    input_ids: int `[n, seq_length]`, the unmasked rows.
    candidate: bool `[n, seq_length]`, the positions that may be chosen.
    budget: int `[n]`, predictions per row (`num_to_predict`), at most `max_predictions`.
    vocab: `official_bert.pretraining.instances.VocabInfo`.
    whole_word: choose whole words (a piece and the `##` pieces after it) and decide the 80/10/10
      rule once per word.
    max_predictions: padded length of the outputs.
    rng: `np.random.Generator`.

  Returns:
    `Predictions`.
  """
  n, seq_length = input_ids.shape
  col = np.arange(seq_length)[None, :]
  if whole_word:
    chosen, action = _choose_whole_words(input_ids, candidate, budget, vocab, rng)
  else:
    # Single pieces always fit, so the original's shuffle-then-scan takes the first `budget`
    # candidates in a random order.
    order = np.argsort(np.where(candidate, rng.random((n, seq_length), np.float32), 2.0), axis=1)
    chosen = np.zeros_like(candidate)
    np.put_along_axis(chosen, order, col < budget[:, None], axis=1)
    chosen &= candidate
    action = rng.random((n, seq_length), np.float32)
  use_mask = chosen & (action < _MASK_RATE)
  use_random = chosen & (action >= _MASK_RATE + _KEEP_RATE)
  masked_ids = np.where(use_mask, vocab.mask_id, input_ids).astype(np.int32)
  masked_ids[use_random] = rng.integers(0, vocab.vocab_size, size=int(use_random.sum()))

  # Row-major order lists each row's chosen positions in increasing order, as the original sorts.
  rows, cols = np.nonzero(chosen)
  slot = (np.cumsum(chosen, axis=1) - 1)[rows, cols]
  positions = np.zeros((n, max_predictions), np.int32)
  labels = np.zeros((n, max_predictions), np.int32)
  weights = np.zeros((n, max_predictions), np.float32)
  positions[rows, slot] = cols
  labels[rows, slot] = input_ids[rows, cols]
  weights[rows, slot] = 1.0
  return Predictions(masked_ids, positions, labels, weights, num_random=int(use_random.sum()),
                     num_kept=int((chosen & ~use_mask & ~use_random).sum()))


def _choose_whole_words(input_ids, candidate, budget, vocab, rng):
  """The original's scan over whole words in random order, taking each word that still fits.

  Returns:
    `(chosen, action)`: the chosen positions, and a uniform draw per position that is the same for
    all pieces of a word (it decides [MASK] / unchanged / random id).
  """
  n, seq_length = input_ids.shape
  rows = np.arange(n)[:, None]
  col = np.arange(seq_length)[None, :]
  # A `##` piece continues the word before it; [CLS] and [SEP] end words.
  after_candidate = np.zeros_like(candidate)
  after_candidate[:, 1:] = candidate[:, :-1]
  word_start = candidate & ~(vocab.is_continuation[input_ids] & after_candidate)
  word_index = np.where(candidate, np.cumsum(word_start, axis=1) - 1, 0)
  num_words = word_start.sum(axis=1)
  word_length = np.bincount((rows * seq_length + word_index)[candidate],
                            minlength=n * seq_length).reshape(n, seq_length)
  order = np.argsort(np.where(col < num_words[:, None], rng.random((n, seq_length), np.float32),
                              2.0), axis=1)
  count = np.zeros(n, dtype=np.int64)
  chosen_word = np.zeros((n, seq_length), dtype=bool)
  # All rows advance together, one word per step.
  for rank in range(int(num_words.max(initial=0))):
    open_rows = (count < budget) & (rank < num_words)
    if not open_rows.any():
      break
    word = order[:, rank]
    length = word_length[rows[:, 0], word]
    take = open_rows & (count + length <= budget)
    chosen_word[rows[take, 0], word[take]] = True
    count += np.where(take, length, 0)
  chosen = candidate & chosen_word[rows, word_index]
  return chosen, rng.random((n, seq_length), np.float32)[rows, word_index]
