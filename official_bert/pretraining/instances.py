"""Pre-training instances: documents of WordPiece ids -> masked `[CLS] A [SEP] B [SEP]` pairs.

This is the algorithm of the original `create_pretraining_data.py`, run on integer ids held in flat
numpy arrays instead of lists of token strings:

* Each document is packed greedily into chunks of whole sentences up to a target length
  (`max_seq_length - 3`; with probability `short_seq_prob`, once per document, a random length in
  `[2, max_seq_length - 3]`).
* Sentence A is a random number of the chunk's leading sentences. B is the rest of the chunk (the
  real continuation, `next_sentence_labels = 0`), or, half of the time and whenever the chunk has a
  single sentence, text from a random other document (`1`); the chunk's unused sentences are then
  put back to start the next chunk. The other document is one of `documents`, or, given a
  `next_sentences.SegmentPool`, a segment drawn from the whole corpus.
* The pair is cut to `max_seq_length - 3` tokens by deleting, one token at a time, from the longer
  side, at its front or back with equal probability.
* `masked_lm_prob` of the tokens, never `[CLS]` or `[SEP]`, are chosen for prediction and masked
  (`masking`).

The sequential part (packing sentences, with the original's random choices in the original's
order) is a loop over sentence lengths; everything per token (truncation, packing, masking) is
vectorized over batches of instances.
"""

import dataclasses
import random

import numpy as np

from official_bert.pretraining import masking

# The chance that B is a random sentence run from another document, as in the original.
_RANDOM_NEXT_PROB = 0.5
# How often the original tries to draw a document other than the current one.
_RANDOM_DOCUMENT_TRIES = 10

# Instances truncated, packed and masked at once; bounds the memory of the per-token arrays.
BATCH_SIZE = 2048

# The original's TFRecord features, in its order; `Instances` holds one array for each.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  """The original tool's knobs for building instances.

  Args:
    max_seq_length: length of `input_ids` after padding; pairs hold at most this minus 3 tokens.
    max_predictions_per_seq: most masked positions per instance (the padded length of the
      `masked_lm_*` features).
    masked_lm_prob: fraction of the tokens (specials included in the count) chosen for prediction.
    short_seq_prob: probability that a document uses a random shorter target length.
    do_whole_word_mask: choose whole words (a piece and its `##` continuations) for masking.
    dupe_factor: number of passes over each document, each with new pairs and masks.
  """

  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  do_whole_word_mask: bool = False
  dupe_factor: int = 10

  def __post_init__(self):
    # Pairs need at least one token per side after `[CLS] A [SEP] B [SEP]`.
    if self.max_seq_length < 5:
      raise ValueError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
    if self.max_predictions_per_seq < 1:
      raise ValueError(
          f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
    if self.dupe_factor < 1:
      raise ValueError(f"dupe_factor must be at least 1, got {self.dupe_factor}")


@dataclasses.dataclass(frozen=True)
class VocabInfo:
  """What instance creation needs to know about the WordPiece vocabulary.

  Args:
    cls_id: id of `[CLS]`.
    sep_id: id of `[SEP]`.
    mask_id: id of `[MASK]`.
    is_continuation: bool array `[vocab_size]`, True for pieces that start with `##`.
  """

  cls_id: int
  sep_id: int
  mask_id: int
  is_continuation: np.ndarray

  @property
  def vocab_size(self):
    return len(self.is_continuation)

  @classmethod
  def from_tokens(cls, tokens):
    """Builds the info from the vocabulary's tokens in id order; raises if a special is missing."""
    index = {token: i for i, token in enumerate(tokens)}
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
    if missing:
      raise ValueError(f"the vocabulary lacks the special tokens {missing}")
    return cls(cls_id=index["[CLS]"], sep_id=index["[SEP]"], mask_id=index["[MASK]"],
               is_continuation=np.array([t.startswith("##") for t in tokens], dtype=bool))


@dataclasses.dataclass(frozen=True)
class Documents:
  """Tokenized documents in flat arrays.

  Args:
    token_ids: int32 `[num_tokens]`, the ids of all sentences one after another.
    sentence_splits: int64 `[num_sentences + 1]`; sentence `i` is
      `token_ids[sentence_splits[i]:sentence_splits[i + 1]]`. Sentences are not empty.
    document_splits: int64 `[num_documents + 1]`; document `d` holds the sentences
      `document_splits[d]` to `document_splits[d + 1] - 1`. Documents are not empty.
  """

  token_ids: np.ndarray
  sentence_splits: np.ndarray
  document_splits: np.ndarray

  @property
  def num_documents(self):
    return len(self.document_splits) - 1


@dataclasses.dataclass(frozen=True)
class Instances:
  """A batch of finished instances, padded like the original's TFRecord features.

  Args:
    input_ids: int32 `[n, max_seq_length]`, with the masked tokens replaced.
    input_mask: int32 `[n, max_seq_length]`, 1 on real tokens.
    segment_ids: int32 `[n, max_seq_length]`, 1 on `B [SEP]`.
    masked_lm_positions: int32 `[n, max_predictions_per_seq]`, sorted, 0-padded.
    masked_lm_ids: int32 `[n, max_predictions_per_seq]`, the original ids there, 0-padded.
    masked_lm_weights: float32 `[n, max_predictions_per_seq]`, 1.0 on real predictions.
    next_sentence_labels: int32 `[n]`, 1 when B is a random next.
    num_random_tokens: how many predicted tokens were replaced by a random id.
    num_kept_tokens: how many predicted tokens were left unchanged.
    num_same_document_next: how many random next sentences come from A's own document (only when
      no other document was drawn in the original's 10 tries, e.g. a corpus of one document).
  """

  input_ids: np.ndarray
  input_mask: np.ndarray
  segment_ids: np.ndarray
  masked_lm_positions: np.ndarray
  masked_lm_ids: np.ndarray
  masked_lm_weights: np.ndarray
  next_sentence_labels: np.ndarray
  num_random_tokens: int = 0
  num_kept_tokens: int = 0
  num_same_document_next: int = 0

  def __len__(self):
    return len(self.next_sentence_labels)

  def take(self, order):
    """Returns the instances at the indices `order`, e.g. a permutation."""
    return dataclasses.replace(self, **{name: getattr(self, name)[order] for name in FEATURE_NAMES})

  @classmethod
  def empty(cls, max_seq_length, max_predictions_per_seq):
    """No instances, with the shapes of the features."""
    widths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
              "segment_ids": max_seq_length, "masked_lm_positions": max_predictions_per_seq,
              "masked_lm_ids": max_predictions_per_seq,
              "masked_lm_weights": max_predictions_per_seq}
    arrays = {name: np.zeros((0, width), np.float32 if name == "masked_lm_weights" else np.int32)
              for name, width in widths.items()}
    return cls(**arrays, next_sentence_labels=np.zeros(0, np.int32))

  @classmethod
  def concatenate(cls, parts):
    """Joins several batches into one."""
    arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in FEATURE_NAMES}
    return cls(**arrays, num_random_tokens=sum(p.num_random_tokens for p in parts),
               num_kept_tokens=sum(p.num_kept_tokens for p in parts),
               num_same_document_next=sum(p.num_same_document_next for p in parts))


def create_instances(documents, options, vocab, seed_sequence, pool=None, first_document=0):
  """Runs `options.dupe_factor` passes over `documents` and shuffles the instances of all passes.

  Args:
    documents: `Documents`.
    options: `InstanceOptions`.
    vocab: `VocabInfo`.
    seed_sequence: `np.random.SeedSequence`; the same sequence gives the same instances.
    pool: a `next_sentences.SegmentPool` to draw random next sentences from; None draws them from
      `documents` as the original draws from its documents.
    first_document: the corpus-wide number of `documents`' first document, which tells the pool's
      segments of the current document apart.

  Returns:
    `Instances` in random order.

  Example:
    >>> docs = Documents(np.arange(5, 65, dtype=np.int32), np.arange(0, 61, 6),
    ...                  np.array([0, 5, 10]))
    >>> vocab = VocabInfo(cls_id=1, sep_id=2, mask_id=3, is_continuation=np.zeros(70, bool))
    >>> out = create_instances(docs, InstanceOptions(max_seq_length=16, dupe_factor=2), vocab,
    ...                        np.random.SeedSequence(1))
    >>> out.input_ids.shape[1], int(out.input_ids[0, 0])
    (16, 1)
  """
  batches = list(iterate_passes(documents, options, vocab, seed_sequence, pool, first_document))
  if not batches:
    return Instances.empty(options.max_seq_length, options.max_predictions_per_seq)
  instances = Instances.concatenate(batches)
  return instances.take(shuffled_order(seed_sequence, len(instances)))


def iterate_passes(documents, options, vocab, seed_sequence, pool=None, first_document=0):
  """Yields the instances of the `options.dupe_factor` passes, in document order, in batches.

  `create_instances` (whose arguments these are) is these batches joined and put in
  `shuffled_order`; a caller that wants less memory at once can serialize each batch first and
  shuffle the records.

  Yields:
    `Instances` of at most `BATCH_SIZE` instances each.
  """
  source = _Source.of(documents, pool, first_document)
  for dupe in range(options.dupe_factor):
    yield from _create_pass(source, options, vocab, _child_seed(seed_sequence, dupe + 1))


def shuffled_order(seed_sequence, num_instances):
  """The permutation that `create_instances` applies to the joined passes."""
  return np.random.default_rng(_child_seed(seed_sequence, 0)).permutation(num_instances)


def _child_seed(seed_sequence, key):
  """An independent stream derived from `seed_sequence` and `key` (`spawn` would keep state)."""
  return np.random.SeedSequence(seed_sequence.entropy, spawn_key=seed_sequence.spawn_key + (key,))


@dataclasses.dataclass(frozen=True)
class _Source:
  """The documents, and where random next sentences come from, as lists for the Python loop.

  `token_ids` holds the documents' tokens, then the pool's; `splits` the sentence boundaries of
  both, the pool's shifted past the documents' tokens. Without a pool, `segment_splits` are the
  document splits; with one, they are the pool's segments (sentence numbers after the documents').
  """

  token_ids: np.ndarray
  splits: list
  doc_splits: list
  segment_splits: list
  segment_documents: list
  first_document: int
  from_pool: bool

  @classmethod
  def of(cls, documents, pool, first_document):
    doc_splits = documents.document_splits.tolist()
    if pool is None:
      return cls(documents.token_ids, documents.sentence_splits.tolist(), doc_splits, doc_splits,
                 list(range(first_document, first_document + len(doc_splits) - 1)),
                 first_document, False)
    num_tokens, num_sentences = len(documents.token_ids), len(documents.sentence_splits) - 1
    splits = np.concatenate([documents.sentence_splits[:-1],
                             pool.sentence_splits + num_tokens])
    return cls(np.concatenate([documents.token_ids, pool.token_ids]), splits.tolist(), doc_splits,
               (pool.segment_splits + num_sentences).tolist(), pool.document_ids.tolist(),
               first_document, True)


def _create_pass(source, options, vocab, seed_sequence):
  """One pass over the documents: sentence pairs, then truncation, packing, masking in batches."""
  py_rng = random.Random(int(_child_seed(seed_sequence, 0).generate_state(1, np.uint64)[0]))
  np_rng = np.random.default_rng(_child_seed(seed_sequence, 1))
  spans = _pair_spans(source, options, py_rng)
  for begin in range(0, len(spans[0]), BATCH_SIZE):
    a_lo, a_hi, b_lo, b_hi, is_random_next, same_document = (
        x[begin:begin + BATCH_SIZE] for x in spans)
    a_lo, a_hi, b_lo, b_hi = _truncate_pairs(a_lo, a_hi, b_lo, b_hi, options.max_seq_length - 3,
                                             np_rng)
    input_ids, len_a, len_b = _pack(source.token_ids, a_lo, a_hi, b_lo, b_hi, vocab,
                                    options.max_seq_length)
    instances = _mask(input_ids, len_a, len_b, is_random_next, options, vocab, np_rng)
    yield dataclasses.replace(instances, num_same_document_next=int(same_document.sum()))


def _pair_spans(source, options, rng):
  """Chooses sentences A and B for every instance as token ranges `[lo, hi)` of `token_ids`.

  The loop makes the original's random choices in the original's order; it only handles sentence
  lengths, so it costs a few Python operations per sentence, none per token. A random next is a
  uniformly drawn document and a uniformly drawn sentence in it, as in the original, or, from a
  pool, a uniformly drawn segment (already such a draw) from its first sentence.

  Returns:
    `(a_lo, a_hi, b_lo, b_hi, is_random_next, same_document)`, one entry per instance;
    `same_document` marks random next sentences from A's own document.
  """
  uniform = rng.random
  # A uniform integer in [low, high], like `random.randint` but without its overhead.
  def randint(low, high):
    return low + int(uniform() * (high - low + 1))
  splits, doc_splits = source.splits, source.doc_splits
  segment_splits, segment_documents = source.segment_splits, source.segment_documents
  num_docs, num_segments = len(doc_splits) - 1, len(segment_splits) - 1
  max_num_tokens = options.max_seq_length - 3
  a_lo, a_hi, b_lo, b_hi, is_random_next, same_document = [], [], [], [], [], []
  for doc in range(num_docs):
    document_id = source.first_document + doc
    first, end = doc_splits[doc], doc_splits[doc + 1]
    target = max_num_tokens
    if uniform() < options.short_seq_prob:
      target = randint(2, max_num_tokens)
    chunk_start = first
    i = first
    while i < end:
      if i == end - 1 or splits[i + 1] - splits[chunk_start] >= target:
        chunk_size = i - chunk_start + 1
        a_end = chunk_start + (randint(1, chunk_size - 1) if chunk_size >= 2 else 1)
        a_lo.append(splits[chunk_start])
        a_hi.append(splits[a_end])
        if chunk_size == 1 or uniform() < _RANDOM_NEXT_PROB:
          target_b = target - (splits[a_end] - splits[chunk_start])
          for _ in range(_RANDOM_DOCUMENT_TRIES):
            other = randint(0, num_segments - 1)
            if segment_documents[other] != document_id:
              break
          other_end = segment_splits[other + 1]
          j = segment_splits[other]
          if not source.from_pool:
            j = randint(j, other_end - 1)
          b_lo.append(splits[j])
          j += 1
          while j < other_end and splits[j] - b_lo[-1] < target_b:
            j += 1
          b_hi.append(splits[j])
          is_random_next.append(1)
          same_document.append(segment_documents[other] == document_id)
          # The sentences of the chunk after A were not used: the next chunk starts with them.
          i = a_end - 1
        else:
          b_lo.append(splits[a_end])
          b_hi.append(splits[i + 1])
          is_random_next.append(0)
          same_document.append(False)
        chunk_start = i + 1
      i += 1
  def as_array(values):
    return np.array(values, dtype=np.int64)
  return (as_array(a_lo), as_array(a_hi), as_array(b_lo), as_array(b_hi),
          np.array(is_random_next, dtype=np.int32), np.array(same_document, dtype=bool))


def _truncate_pairs(a_lo, a_hi, b_lo, b_hi, max_num_tokens, rng):
  """Cuts each pair to `max_num_tokens` like the original, in closed form.

  The original deletes one token at a time from the longer side (B on a tie), at the front or the
  back with a fair coin. The number of deletions per side follows from the two lengths alone, and
  the number of those at the front is a binomial draw, which gives the same distribution without a
  loop over tokens.
  """
  len_a, len_b = a_hi - a_lo, b_hi - b_lo
  excess = np.maximum(len_a + len_b - max_num_tokens, 0)
  a_longer = len_a > len_b
  # First the longer side is cut down to the other's length, then the two alternate, B first.
  from_longer = np.minimum(excess, np.abs(len_a - len_b))
  rest = excess - from_longer
  cut_a = np.where(a_longer, from_longer, 0) + rest // 2
  cut_b = np.where(a_longer, 0, from_longer) + (rest - rest // 2)
  front_a = rng.binomial(cut_a, 0.5)
  front_b = rng.binomial(cut_b, 0.5)
  return a_lo + front_a, a_hi - (cut_a - front_a), b_lo + front_b, b_hi - (cut_b - front_b)


def _pack(token_ids, a_lo, a_hi, b_lo, b_hi, vocab, max_seq_length):
  """Builds `[CLS] A [SEP] B [SEP]` rows, 0-padded; returns them and the lengths of A and B."""
  len_a, len_b = a_hi - a_lo, b_hi - b_lo
  col = np.arange(max_seq_length)[None, :]
  in_a = (col >= 1) & (col <= len_a[:, None])
  in_b = (col >= len_a[:, None] + 2) & (col < (len_a + len_b)[:, None] + 2)
  source = np.where(in_a, a_lo[:, None] + col - 1, b_lo[:, None] + col - len_a[:, None] - 2)
  input_ids = np.where(in_a | in_b, token_ids[np.where(in_a | in_b, source, 0)], 0)
  input_ids = input_ids.astype(np.int32)
  rows = np.arange(len(a_lo))
  input_ids[:, 0] = vocab.cls_id
  input_ids[rows, len_a + 1] = vocab.sep_id
  input_ids[rows, len_a + len_b + 2] = vocab.sep_id
  return input_ids, len_a, len_b


def _mask(input_ids, len_a, len_b, is_random_next, options, vocab, rng):
  """Chooses and masks the predicted tokens of every row; returns the finished `Instances`."""
  col = np.arange(input_ids.shape[1])[None, :]
  lengths = len_a + len_b + 3
  # Positions, not ids, tell the specials apart: the text may hold the ids of [CLS] or [SEP].
  candidate = (col >= 1) & (col < lengths[:, None] - 1) & (col != len_a[:, None] + 1)
  budget = masking.num_to_predict(lengths, options.masked_lm_prob,
                                  options.max_predictions_per_seq)
  predictions = masking.choose_and_mask(
      input_ids, candidate, budget, vocab, options.do_whole_word_mask,
      options.max_predictions_per_seq, rng)
  return Instances(
      input_ids=predictions.input_ids,
      input_mask=(col < lengths[:, None]).astype(np.int32),
      segment_ids=((col >= len_a[:, None] + 2) & (col < lengths[:, None])).astype(np.int32),
      masked_lm_positions=predictions.positions,
      masked_lm_ids=predictions.labels,
      masked_lm_weights=predictions.weights,
      next_sentence_labels=is_random_next,
      num_random_tokens=predictions.num_random,
      num_kept_tokens=predictions.num_kept)
