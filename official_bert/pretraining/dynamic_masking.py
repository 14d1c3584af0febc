"""Dynamic masking: new masked LM predictions for pre-training records every epoch, in `tf.data`.

Records written by `create_pretraining_data.py` carry one fixed set of masks (`dupe_factor` sets
per document). `DynamicMasking` first restores the original token ids from `input_ids`,
`masked_lm_positions` and `masked_lm_ids`, then masks anew with the original rule:

* `min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))` predictions per sequence
  (`length` counts `[CLS]` and `[SEP]`; rounding half to even), never on `[CLS]`, `[SEP]` or
  `[PAD]`;
* positions visited in random order, a word (with whole-word masking: a piece and the `##`
  pieces after it) taken if it still fits;
* 80% `[MASK]`, 10% a random id, 10% unchanged, decided once per word.

The randomness is stateless (`tf.random.stateless_*`), driven by one seed per batch, so that a
pipeline with a fixed seed is reproducible while each epoch draws new seeds.

`tensorflow_text`'s `RandomItemSelector` and `MaskValuesChooser` were measured against this rule and
do not fit it: the selector takes `ceil(rate * selectable items)` (items are words under whole-word
masking, so a row can exceed `max_predictions_per_seq` pieces), the value chooser draws per piece
rather than per word, and both draw from stateful random ops through a per-row `map_fn`.
"""

import dataclasses

import tensorflow as tf

from official_bert import tokenization

# The 80/10/10 rule: [MASK] below 0.8, unchanged below 0.9, a random id above.
_MASK_RATE = 0.8
_KEEP_RATE = 0.1


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
  """Re-masks batches of parsed pre-training records.

  Args:
    vocab_size: number of ids; random replacements are drawn from `[0, vocab_size)`.
    cls_id: id of `[CLS]`.
    sep_id: id of `[SEP]`.
    mask_id: id of `[MASK]`.
    pad_id: id of `[PAD]` (0 in the BERT vocabularies).
    max_predictions_per_seq: most predictions per sequence (the padded length of the outputs).
    masked_lm_prob: fraction of the tokens to predict.
    is_continuation: for whole-word masking, a bool sequence `[vocab_size]`, True for pieces that
      start with `##`; None masks single pieces.

  Example:
    >>> masking = DynamicMasking(vocab_size=30522, cls_id=101, sep_id=102, mask_id=103)
    >>> ids = tf.constant([[101, 2023, 2003, 1037, 3231, 102, 2009, 2573, 102, 0]])
    >>> out = masking(ids, tf.cast(ids > 0, tf.int32), seed=tf.constant([1, 2]))
    >>> int(tf.reduce_sum(out["masked_lm_weights"]))
    1
  """

  vocab_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  pad_id: int = 0
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  is_continuation: tuple = None

  @classmethod
  def from_vocab_file(cls, vocab_file, max_predictions_per_seq=20, masked_lm_prob=0.15,
                      whole_word_mask=False):
    """Builds the masking for a `vocab.txt`: its size, its special ids and its `##` pieces.

    Args:
      vocab_file: the WordPiece vocabulary.
      max_predictions_per_seq: see the class.
      masked_lm_prob: see the class.
      whole_word_mask: mask whole words.

    Raises:
      ValueError: the vocabulary lacks `[CLS]`, `[SEP]`, `[MASK]` or `[PAD]`.
    """
    vocab = tokenization.load_vocab(vocab_file)
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[PAD]") if t not in vocab]
    if missing:
      raise ValueError(f"vocab file {vocab_file!r} lacks the special tokens {missing}")
    continuation = None
    if whole_word_mask:
      continuation = tuple(token.startswith("##") for token in sorted(vocab, key=vocab.get))
    return cls(vocab_size=len(vocab), cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"],
               mask_id=vocab["[MASK]"], pad_id=vocab["[PAD]"],
               max_predictions_per_seq=max_predictions_per_seq, masked_lm_prob=masked_lm_prob,
               is_continuation=continuation)

  def __call__(self, token_ids, input_mask, seed):
    """Chooses and masks the predictions of a batch of unmasked sequences.

    Args:
      token_ids: int `[batch, seq_length]`, the original ids, 0-padded.
      input_mask: int `[batch, seq_length]`, 1 on real tokens.
      seed: int `[2]`, the stateless seed of this batch.

    Returns:
      A dict of `[batch, ...]` tensors: `input_word_ids` (int32, masked), `masked_lm_positions`
      (int32, sorted, 0-padded), `masked_lm_ids` (int32) and `masked_lm_weights` (float32), the
      last three `[batch, max_predictions_per_seq]`.
    """
    ids = tf.cast(token_ids, tf.int32)
    seq_length = tf.shape(ids)[1]
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)
    candidate = ((tf.cast(input_mask, tf.int32) > 0) & (ids != self.cls_id)
                 & (ids != self.sep_id) & (ids != self.pad_id))
    word_start = candidate
    if self.is_continuation is not None:
      continuation = tf.gather(tf.constant(self.is_continuation, tf.bool), ids)
      after_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
      word_start = candidate & ~(continuation & after_candidate)
    word_index = tf.maximum(tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1, 0)
    num_words = tf.reduce_sum(tf.cast(word_start, tf.int32), axis=1)
    lengths = tf.reduce_sum(tf.cast(input_mask, tf.float32), axis=1)
    budget = tf.minimum(self.max_predictions_per_seq,
                        tf.maximum(1, tf.cast(tf.round(lengths * self.masked_lm_prob), tf.int32)))

    col = tf.range(seq_length)[None, :]
    keys = tf.random.stateless_uniform(tf.shape(ids), seeds[0])
    keys = tf.where(col < num_words[:, None], keys, 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    if self.is_continuation is None:
      # Single pieces always fit: the first `budget` positions in random order are taken.
      rank = tf.argsort(order, axis=1)
      chosen_word = (rank < budget[:, None]) & (col < num_words[:, None])
    else:
      chosen_word = self._take_whole_words(candidate, word_index, num_words, order, budget)
    chosen = candidate & tf.gather(chosen_word, word_index, batch_dims=1)

    action = tf.gather(tf.random.stateless_uniform(tf.shape(ids), seeds[1]), word_index,
                       batch_dims=1)
    random_ids = tf.random.stateless_uniform(tf.shape(ids), seeds[2], maxval=self.vocab_size,
                                             dtype=tf.int32)
    masked = tf.where(chosen & (action < _MASK_RATE), self.mask_id,
                      tf.where(chosen & (action >= _MASK_RATE + _KEEP_RATE), random_ids, ids))

    max_predictions = self.max_predictions_per_seq
    # A stable sort of "not chosen" lists the chosen positions first, in increasing order.
    positions = tf.argsort(tf.cast(~chosen, tf.int32), axis=1, stable=True)
    positions = tf.pad(positions, [[0, 0], [0, tf.maximum(0, max_predictions - seq_length)]])
    positions = positions[:, :max_predictions]
    valid = tf.range(max_predictions)[None, :] < tf.reduce_sum(
        tf.cast(chosen, tf.int32), axis=1, keepdims=True)
    return {
        "input_word_ids": masked,
        "masked_lm_positions": tf.where(valid, positions, 0),
        "masked_lm_ids": tf.where(valid, tf.gather(ids, positions, batch_dims=1), 0),
        "masked_lm_weights": tf.cast(valid, tf.float32),
    }

  def _take_whole_words(self, candidate, word_index, num_words, order, budget):
    """The original's scan: words in random order, each taken when it still fits the budget."""
    batch, seq_length = tf.shape(candidate)[0], tf.shape(candidate)[1]
    rows = tf.range(batch)
    word_length = tf.math.unsorted_segment_sum(
        tf.cast(candidate, tf.int32), rows[:, None] * seq_length + word_index, batch * seq_length)
    word_length = tf.reshape(word_length, [batch, seq_length])

    def step(rank, count, chosen_word):
      word = order[:, rank]
      length = tf.gather(word_length, word, batch_dims=1)
      take = (rank < num_words) & (count + length <= budget)
      chosen_word |= tf.one_hot(word, seq_length, on_value=True, off_value=False) & take[:, None]
      return rank + 1, count + tf.where(take, length, 0), chosen_word

    def not_done(rank, count, chosen_word):
      del chosen_word
      return (rank < seq_length) & tf.reduce_any((count < budget) & (rank < num_words))

    _, _, chosen_word = tf.while_loop(
        not_done, step, (0, tf.zeros([batch], tf.int32), tf.zeros([batch, seq_length], tf.bool)))
    return chosen_word


def restore_token_ids(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
  """Undoes the masks of a record: puts `masked_lm_ids` back at `masked_lm_positions`.

  Args:
    input_ids: int `[batch, seq_length]`, as stored (with `[MASK]` and random ids).
    masked_lm_positions: int `[batch, predictions]`.
    masked_lm_ids: int `[batch, predictions]`, the original ids there.
    masked_lm_weights: float `[batch, predictions]`; positions with weight 0 are padding.

  Returns:
    int32 `[batch, seq_length]`, the original ids.
  """
  input_ids = tf.cast(input_ids, tf.int32)
  positions = tf.cast(masked_lm_positions, tf.int32)
  rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
  valid = masked_lm_weights > 0
  indices = tf.boolean_mask(tf.stack([rows, positions], axis=-1), valid)
  updates = tf.boolean_mask(tf.cast(masked_lm_ids, tf.int32), valid)
  return tf.tensor_scatter_nd_update(input_ids, indices, updates)


def apply_dynamic_masking(dataset, masking, seed=None):
  """Re-masks every batch of a dataset of `(features, labels)` from `pretraining_dataset`.

  Args:
    dataset: batches of `(features, labels)` dicts with the model's pre-training inputs.
    masking: `DynamicMasking`.
    seed: int or None; with a seed the sequence of masks is reproducible. Each iteration over the
      dataset (each epoch) draws new masks either way.

  Returns:
    The dataset with new `input_word_ids`, `masked_lm_positions`, `masked_lm_ids` and
    `masked_lm_weights`.
  """
  seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)

  def remask(batch, batch_seed):
    features, labels = batch
    original = restore_token_ids(features["input_word_ids"], features["masked_lm_positions"],
                                 labels["masked_lm_ids"], labels["masked_lm_weights"])
    out = masking(original, features["input_mask"], batch_seed)
    features = dict(features, input_word_ids=out["input_word_ids"],
                    masked_lm_positions=out["masked_lm_positions"])
    labels = dict(labels, masked_lm_ids=out["masked_lm_ids"],
                  masked_lm_weights=out["masked_lm_weights"])
    return features, labels

  return tf.data.Dataset.zip((dataset, seeds)).map(remask,
                                                   num_parallel_calls=tf.data.AUTOTUNE)
