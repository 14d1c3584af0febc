"""Turning one shard of the corpus into TFRecord files of pre-training examples.

A `ShardProcessor` runs in each process that works on shards, in two rounds. First it tokenizes
each shard's sentences in large batches with the in-graph WordPiece tokenizer
(`BertTokenizerLayer`) and saves the documents; the driver (`pipeline`) then draws the pool of
random next sentences from all of them (`next_sentences`). Then, for each shard (`BuildJob`), it
builds the instances (`instances`), serializes them as `tf.train.Example` protos with exactly the
original tool's features, draws a shuffle bucket for each (`shuffle.scatter_draws`) and writes
them, grouped by bucket, into one piece file. The driver appends the pieces to the buckets in shard
order and writes the buckets out in random order, so the result does not depend on the number of
workers.

The features, as in the original (`int64` lists unless noted):

* `input_ids`, `input_mask`, `segment_ids`: `[max_seq_length]`, zero-padded;
* `masked_lm_positions`, `masked_lm_ids`: `[max_predictions_per_seq]`, zero-padded;
* `masked_lm_weights`: `float32` `[max_predictions_per_seq]`, 1.0 on real predictions;
* `next_sentence_labels`: `[1]`, 1 when sentence B is a random next.
"""

import collections
import concurrent.futures
import dataclasses
import os
import threading

import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.preprocessing import tokenizer_layer
from official_bert.pretraining import corpus, next_sentences, shuffle
from official_bert.pretraining.instances import (
  FEATURE_NAMES,
  VocabInfo,
  iterate_passes,
  shuffled_order,
)
from official_bert.pretraining.stats import PretrainingStats

# Sentences tokenized at once; bounds the memory of the tokenizer's intermediate tensors.
_TOKENIZE_BATCH = 2048
# Jobs worked on at once by `ShardProcessor.process_in_order`.
_THREADS = 2


@dataclasses.dataclass(frozen=True)
class ShardResult:
  """What a worker hands back for a shard.

  Args:
    index: the shard's number.
    stats: the counts of the round: of the text read, or of the instances written.
    num_documents: after tokenizing, the shard's documents.
    num_sentences: after tokenizing, the shard's sentences.
    num_tokens: after tokenizing, the shard's WordPiece tokens.
    piece_path: after building, the piece file of the shard's records, grouped by bucket.
    bucket_bytes: after building, the bytes of each bucket's records in the piece.
    bucket_records: after building, the number of each bucket's records in the piece.
  """

  index: int
  stats: PretrainingStats
  num_documents: int = 0
  num_sentences: int = 0
  num_tokens: int = 0
  piece_path: str = ""
  bucket_bytes: np.ndarray = None
  bucket_records: np.ndarray = None


@dataclasses.dataclass(frozen=True)
class BuildJob:
  """The second round for a tokenized shard: build and write its instances.

  Args:
    index: the shard's number.
    first_document: the corpus-wide number of its first document.
    num_buckets: the number of shuffle buckets of the run.
  """

  index: int
  first_document: int
  num_buckets: int




def _instance_stats(instances):
  weights = instances.masked_lm_weights
  return PretrainingStats(
      instances=len(instances), tokens=int(instances.input_mask.sum()),
      predictions=int(weights.sum()), random_token_predictions=instances.num_random_tokens,
      kept_predictions=instances.num_kept_tokens,
      random_next=int(instances.next_sentence_labels.sum()),
      random_next_same_document=instances.num_same_document_next)


def serialize_instances(instances):
  """Serializes instances as `tf.train.Example` protos with the original features.

  The protos are built for all instances at once with `tf.io.encode_proto`, level by level
  (value lists, `Feature`, map entries, `Features`, `Example`), which is several times faster than
  building one `tf.train.Example` per instance in Python. The levels run as one graph, traced once
  per set of feature widths, so a batch costs one call rather than two dozen eager ops.

  Args:
    instances: `official_bert.pretraining.instances.Instances`.

  Returns:
    A numpy object array of serialized `tf.train.Example`s (`bytes`).
  """
  n = len(instances)
  if n == 0:
    return np.zeros([0], dtype=object)
  columns = [np.asarray(getattr(instances, name)).reshape(n, -1).astype(_DTYPES[name], copy=False)
             for name in FEATURE_NAMES]
  return _encoder(tuple(c.shape[1] for c in columns))(*columns).numpy()


_DTYPES = {name: np.float32 if name == "masked_lm_weights" else np.int64
           for name in FEATURE_NAMES}
# Compiled serializers by the widths of the features (one per run, in practice).
_ENCODERS = {}
_ENCODERS_LOCK = threading.Lock()


def _encoder(widths):
  """The serializer of features of these widths (`FEATURE_NAMES` order), traced once."""
  with _ENCODERS_LOCK:
    if widths not in _ENCODERS:
      signature = [tf.TensorSpec([None, w], _DTYPES[name])
                   for name, w in zip(FEATURE_NAMES, widths)]
      _ENCODERS[widths] = tf.function(
          _encode_examples, input_signature=signature, autograph=False).get_concrete_function()
    return _ENCODERS[widths]


def _feature_widths(options):
  """The widths of the features of instances built with `InstanceOptions` `options`."""
  widths = {"input_ids": options.max_seq_length, "input_mask": options.max_seq_length,
            "segment_ids": options.max_seq_length, "next_sentence_labels": 1}
  return tuple(widths.get(name, options.max_predictions_per_seq) for name in FEATURE_NAMES)


def _encode_examples(*columns):
  """`tf.train.Example` protos `[batch]` from the feature columns, in `FEATURE_NAMES` order."""
  batch = tf.shape(columns[0])[0]
  entries = []
  for name, values in zip(FEATURE_NAMES, columns):
    kind = "float_list" if values.dtype == tf.float32 else "int64_list"
    list_type = "tensorflow.FloatList" if kind == "float_list" else "tensorflow.Int64List"
    value_list = _encode(list_type, value=values)
    feature = _encode("tensorflow.Feature", **{kind: value_list})
    entries.append(_encode("tensorflow.Features.FeatureEntry", key=tf.fill([batch, 1], name),
                           value=feature))
  features = _encode("tensorflow.Features", feature=tf.concat(entries, axis=1))
  return _encode("tensorflow.Example", features=features)[:, 0]


def _encode(message_type, **fields):
  """Encodes one proto per row; every row has the same number of values for each field."""
  values = [tf.convert_to_tensor(v) for v in fields.values()]
  batch = tf.shape(values[0])[0]
  widths = tf.constant([[v.shape[1] for v in values]], dtype=tf.int32)
  sizes = tf.tile(widths, [batch, 1])
  return tf.reshape(tf.io.encode_proto(sizes, values, list(fields), message_type), [batch, 1])


class ShardProcessor:
  """Tokenizes shards, then builds, serializes and writes their instances, one shard at a time.

  Args:
    vocab_file: the WordPiece vocabulary.
    do_lower_case: lower-case and strip accents before WordPiece, as the original.
    options: `official_bert.pretraining.instances.InstanceOptions`.
    random_seed: the run's seed; shard `i` uses the stream `(random_seed, i)`.
    piece_dir: local folder for the saved documents, the pool and the piece files; None for a
      caller that only uses `prepare` and `build_records` (`beam_pipeline`).
  """

  def __init__(self, vocab_file, do_lower_case, options, random_seed, piece_dir=None):
    tokens = corpus.read_vocab_tokens(vocab_file)
    self._vocab = VocabInfo.from_tokens(tokens)
    self._tokenizer = tokenizer_layer.BertTokenizerLayer(vocab_file, do_lower_case)
    self._options = options
    self._random_seed = random_seed
    self._piece_dir = piece_dir
    self._pool = None
    self._pool_lock = threading.Lock()
    # Traced in the background while the first round tokenizes, not when it first serializes.
    threading.Thread(target=_encoder, args=(_feature_widths(options),), daemon=True).start()

  def tokenize(self, sentences):
    """Returns the WordPiece ids of `sentences` as flat int32 ids and int64 row splits."""
    return self._tokenizer.tokenize_flat_numpy(sentences, batch_size=_TOKENIZE_BATCH)

  def process(self, job):
    """Tokenizes a `corpus.Shard` or builds a `BuildJob`; returns its `ShardResult`."""
    if isinstance(job, BuildJob):
      return self._build(job)
    return self._save(self.prepare(job))

  def process_in_order(self, jobs):
    """Yields the `ShardResult` of each job in order, working on two jobs at once in threads.

    Much of the work (the tokenizer's and the serializer's TensorFlow ops, numpy on whole arrays)
    runs without holding the GIL, so a second thread keeps a second core busy.
    """
    with concurrent.futures.ThreadPoolExecutor(_THREADS) as threads:
      pending = collections.deque()
      for job in jobs:
        pending.append(threads.submit(self.process, job))
        if len(pending) > _THREADS:
          yield pending.popleft().result()
      while pending:
        yield pending.popleft().result()

  def prepare(self, shard):
    """Decodes and tokenizes a `corpus.Shard`.

    Returns:
      `(index, documents, stats)`: the shard's number, its `Documents` and the counts of its text.
    """
    text = corpus.decode_shard(shard)
    token_ids, row_splits = self.tokenize(text.sentences)
    documents, num_empty = corpus.documents_from_tokens(text, token_ids, row_splits)
    stats = PretrainingStats(
        input_bytes=shard.num_bytes, lines=text.num_lines, blank_lines=text.num_blank_lines,
        undecodable_lines=text.num_undecodable_lines,
        undecodable_bytes=text.num_undecodable_bytes, lines_without_tokens=num_empty,
        cut_documents=text.num_cut_documents, documents=documents.num_documents,
        undecodable=text.undecodable)
    return shard.index, documents, stats

  def _save(self, prepared):
    """Saves a prepared shard's documents for the second round."""
    index, documents, stats = prepared
    next_sentences.save_documents(next_sentences.documents_path(self._piece_dir, index), documents)
    return ShardResult(index, stats, num_documents=documents.num_documents,
                       num_sentences=len(documents.sentence_splits) - 1,
                       num_tokens=len(documents.token_ids))

  def use_pool(self, pool):
    """Takes the `next_sentences.SegmentPool` as it is, rather than loading it from the file."""
    with self._pool_lock:
      self._pool = pool

  def _build(self, job):
    """Builds and serializes the instances of a tokenized shard, and writes them by bucket."""
    with self._pool_lock:
      if self._pool is None:
        self._pool = next_sentences.SegmentPool.load(next_sentences.pool_path(self._piece_dir))
    path = next_sentences.documents_path(self._piece_dir, job.index)
    documents = next_sentences.load_documents(path)
    tf.io.gfile.remove(path)
    records, stats = self.build_records(job.index, documents, job.first_document, self._pool)
    draws = shuffle.scatter_draws(self._random_seed, job.index, len(records), job.num_buckets)
    piece = os.path.join(self._piece_dir, f"shard-{job.index:07d}.tfrecord")
    try:
      bucket_bytes = shuffle.write_by_bucket(piece, records, draws, job.num_buckets)
    except (OSError, tf.errors.OpError) as error:
      file_io.raise_if_disk_full(error, "writing the records of a shard")
      raise
    return ShardResult(job.index, stats, piece_path=piece, bucket_bytes=bucket_bytes,
                       bucket_records=np.bincount(draws, minlength=job.num_buckets))

  def build_records(self, index, documents, first_document, pool):
    """Builds and serializes the instances of a tokenized shard, in a random order.

    The local path and the Beam pipeline both shuffle these records again with those of all
    other shards (`shuffle`, `beam_pipeline`).

    Args:
      index: the shard's number, which picks its random stream.
      documents: its `Documents`.
      first_document: the corpus-wide number of its first document.
      pool: the `next_sentences.SegmentPool` of the whole corpus.

    Returns:
      `(records, stats)`: the serialized `tf.train.Example`s (an object array of `bytes`) and the
      counts of the instances.
    """
    seeds = np.random.SeedSequence(self._random_seed, spawn_key=(index,))
    stats = PretrainingStats()
    records = []
    # Serializing batch by batch keeps the arrays of one batch in memory at a time.
    for instances in iterate_passes(documents, self._options, self._vocab, seeds, pool,
                                    first_document):
      stats = stats + _instance_stats(instances)
      records.append(serialize_instances(instances))
    records = np.concatenate(records) if records else np.zeros([0], dtype=object)
    return records[shuffled_order(seeds, len(records))], stats
