"""Random next sentences from the whole corpus, in bounded memory: a pool of segments.

The original tool holds every document in memory and takes a random next sentence B from a random
other document of the whole input: a document drawn uniformly, a sentence drawn uniformly in it,
and the sentences from there on until B is long enough. Shards here are processed apart, so the
draws are made ahead, once for all shards:

* every shard is tokenized first (`writer`), and its documents saved (`save_documents`);
* `build_pool` draws `size` segments with the original's rule over ALL documents of the corpus,
  shard by shard, and keeps each as the sentences from its start until `max_num_tokens - 1`
  tokens, the most a B can want, or its document's end;
* when the instances of a shard are built, a random next sentence is a uniformly drawn segment of
  the pool, drawn again (up to the original's 10 tries) while it comes from the current document,
  and cut to the length B wants, as the original cuts its document's sentences.

So B follows the original's distribution, whatever the shard: a book alone in its shard no longer
draws from itself. The pool is the one deviation: at most `MAX_POOL_SEGMENTS` segments (tens of
MB), so with a corpus much larger than the pool, or with `dupe_factor` passes, a segment serves as
B several times.
"""

import concurrent.futures
import dataclasses
import io
import os
import threading

import numpy as np
import tensorflow as tf

from official_bert.pretraining.instances import Documents

# The most segments in a pool: at most this times about `max_seq_length` int32 tokens per process.
MAX_POOL_SEGMENTS = 1 << 16
# The pool's random stream is `SeedSequence([random_seed, _POOL_STREAM])`; shard `i` uses
# `SeedSequence(random_seed, spawn_key=(i,))`, so the two never meet.
_POOL_STREAM = 0x6e737030


@dataclasses.dataclass(frozen=True)
class SegmentPool:
  """Runs of sentences drawn from the whole corpus, the candidates for a random next sentence.

  Args:
    token_ids: int32 `[num_tokens]`, the ids of all sentences one after another.
    sentence_splits: int64 `[num_sentences + 1]`, as in `Documents`.
    segment_splits: int64 `[num_segments + 1]`; segment `k` holds the sentences
      `segment_splits[k]` to `segment_splits[k + 1] - 1`.
    document_ids: int64 `[num_segments]`, the corpus-wide number of each segment's document (the
      documents of shard 0 first, each shard's in order).
  """

  token_ids: np.ndarray
  sentence_splits: np.ndarray
  segment_splits: np.ndarray
  document_ids: np.ndarray

  def __len__(self):
    return len(self.document_ids)

  def save(self, path):
    """Writes the pool to `path` (`.npz`)."""
    _save_arrays(path, dataclasses.asdict(self))

  @classmethod
  def load(cls, path):
    return cls(**_load_arrays(path))


def documents_path(folder, index):
  """Where the first round saves the tokenized documents of shard `index`."""
  return os.path.join(folder, f"documents-{index:07d}.npz")


def pool_path(folder):
  """Where the driver saves the pool between the rounds."""
  return os.path.join(folder, "next-sentence-pool.npz")


def save_documents(path, documents):
  """Writes a shard's tokenized `Documents` to `path` (`.npz`), to be built into instances later."""
  _save_arrays(path, dataclasses.asdict(documents))


def load_documents(path):
  return Documents(**_load_arrays(path))


def _save_arrays(path, arrays):
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  with tf.io.gfile.GFile(path, "wb") as f:
    f.write(buffer.getvalue())


# `np.load` parses each array's header with `ast.literal_eval`, which CPython 3.11 (3.11.7 in CI)
# can fail with "AST constructor recursion depth mismatch" when threads parse at once (the
# writer's threads load documents concurrently); the header parse is serialised.
_PARSE_LOCK = threading.Lock()


def _load_arrays(path):
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  with _PARSE_LOCK, np.load(io.BytesIO(data)) as arrays:
    return {name: arrays[name] for name in arrays.files}


def pool_size(num_sentences):
  """Segments worth drawing: one per sentence of the corpus, at most `MAX_POOL_SEGMENTS`."""
  return int(min(MAX_POOL_SEGMENTS, num_sentences))


def build_pool(folder, documents_per_shard, size, max_num_tokens, random_seed):
  """Draws `size` segments, each from a uniformly drawn document of the whole corpus.

  As in the original, the document is drawn uniformly among all documents and the first sentence
  uniformly among the document's sentences; the segment runs from there until it holds
  `max_num_tokens - 1` tokens or the document ends.

  Args:
    folder: where the shards' documents were saved (`documents_path`); they are read in shard
      order, one at a time.
    documents_per_shard: the number of documents of each shard.
    size: segments to draw.
    max_num_tokens: `max_seq_length - 3`.
    random_seed: the run's seed; the same seed and corpus give the same pool.

  Returns:
    `SegmentPool`.
  """
  draws = PoolDraws.draw(documents_per_shard, size, random_seed)

  def segments_of(shard):
    return draws.segments_of(shard, load_documents(documents_path(folder, shard)), max_num_tokens)

  # Two shards at a time: loading and slicing are numpy work, mostly without the GIL.
  with concurrent.futures.ThreadPoolExecutor(2) as threads:
    return join_pools(list(threads.map(segments_of, draws.shards())))


@dataclasses.dataclass(frozen=True)
class PoolDraws:
  """Which documents the pool's segments come from, and where in them they start.

  The draws need only the number of documents of each shard, so that each shard's segments can be
  cut where the shard is (`segments_of`) and the parts joined in shard order (`join_pools`).

  Args:
    first_documents: int64 `[num_shards + 1]`, the corpus-wide number of each shard's first
      document, then the number of documents.
    picks: int64 `[size]`, the drawn documents, corpus-wide numbers in ascending order.
    where: float64 `[size]`, in `[0, 1)`: how far into its document each segment starts.
  """

  first_documents: np.ndarray
  picks: np.ndarray
  where: np.ndarray

  @classmethod
  def draw(cls, documents_per_shard, size, random_seed):
    """Draws `size` documents uniformly from all; the same seed and counts give the same draws.

    Args:
      documents_per_shard: the number of documents of each shard, in shard order.
      size: segments to draw.
      random_seed: the run's seed.
    """
    rng = np.random.default_rng(np.random.SeedSequence([random_seed, _POOL_STREAM]))
    offsets = np.concatenate([[0], np.cumsum(documents_per_shard)]).astype(np.int64)
    picks = (np.sort(rng.integers(0, offsets[-1], size=size)) if offsets[-1]
             else np.zeros(0, np.int64))
    return cls(offsets, picks, rng.random(size=len(picks)))

  def shards(self):
    """The shards that hold at least one drawn document, in order."""
    return np.unique(self._shard_of()).tolist()

  def _shard_of(self):
    return np.searchsorted(self.first_documents, self.picks, side="right") - 1

  def segments_of(self, shard, documents, max_num_tokens):
    """Cuts the segments drawn from one shard out of its documents.

    Args:
      shard: the shard's number.
      documents: its `Documents`.
      max_num_tokens: `max_seq_length - 3`.

    Returns:
      `SegmentPool` of the shard's segments, in the order of the draws.
    """
    mine = self._shard_of() == shard
    local = self.picks[mine] - self.first_documents[shard]
    doc_splits, splits = documents.document_splits, documents.sentence_splits
    first, end = doc_splits[local], doc_splits[local + 1]
    start = first + (self.where[mine] * (end - first)).astype(np.int64)
    # The first sentence boundary at least `max_num_tokens - 1` tokens after the start.
    stop = np.searchsorted(splits, splits[start] + max_num_tokens - 1, side="left")
    stop = np.minimum(stop, end)
    sentences = _ranges(start, stop)
    return SegmentPool(
        token_ids=documents.token_ids[_ranges(splits[start], splits[stop])].astype(np.int32),
        sentence_splits=_splits(splits[sentences + 1] - splits[sentences]),
        segment_splits=_splits(stop - start),
        document_ids=self.picks[mine].astype(np.int64))


def join_pools(parts):
  """Joins the segments of several shards (`PoolDraws.segments_of`), in shard order, into one."""
  def joined(arrays, dtype):
    return np.concatenate(arrays).astype(dtype) if arrays else np.zeros(0, dtype)
  return SegmentPool(
      token_ids=joined([p.token_ids for p in parts], np.int32),
      sentence_splits=_splits(joined([np.diff(p.sentence_splits) for p in parts], np.int64)),
      segment_splits=_splits(joined([np.diff(p.segment_splits) for p in parts], np.int64)),
      document_ids=joined([p.document_ids for p in parts], np.int64))


def _splits(lengths):
  """Row splits (`[0, l0, l0 + l1, ...]`, int64) of rows of the given lengths."""
  return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _ranges(lo, hi):
  """The integers of the ranges `[lo[k], hi[k])`, one range after another."""
  sizes = hi - lo
  ends = np.cumsum(sizes)
  return np.arange(ends[-1] if len(ends) else 0) + np.repeat(lo - (ends - sizes), sizes)
