"""Records in one uniformly random order, in bounded memory: a two-pass bucket shuffle.

The original `create_pretraining_data.py` holds every instance in memory and shuffles them all
before writing, and its `run_pretraining.py` relies on that: it reads through a shuffle buffer of
only 100 records. Training on records in corpus order instead sees one stretch of the corpus at a
time, and learns measurably slower. A corpus larger than memory is shuffled here in two passes:

1. scatter: each record goes to one of `num_buckets` local bucket files, drawn uniformly and
   independently of every other record;
2. gather: each bucket, small enough for memory, is read, put in a uniformly random order and
   written out, one bucket after another.

The result is a uniformly random permutation of all the records, whatever order they came in:
both which records share a bucket and their order within it are uniform. Dealt round-robin to
several output files, each file holds a uniformly random sample of the records, in random order.
Every draw comes from a stream of the run's seed, so the same seed gives the same bytes.

Bucket files are plain TFRecord files (no compression) that `tf.io.TFRecordWriter` wrote; their
records are copied byte for byte, frame and checksums included, as TFRecord files concatenate.
"""

import os
import resource
import shutil
import struct
import time
import zlib

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.common import file_io

# Bytes of records per bucket: a gather holds one bucket in memory, about twice this.
DEFAULT_BUCKET_BYTES = 64 << 20
# A TFRecord frames its data with an 8-byte length, the length's 4-byte CRC and the data's 4-byte
# CRC.
FRAME_BYTES = 16
# The scatter of source `i` draws from `SeedSequence([seed, _SCATTER_STREAM], spawn_key=(i,))`,
# the gather of bucket `k` from `[seed, _GATHER_STREAM]`; neither meets the instances' streams.
_SCATTER_STREAM = 0x62736374
_GATHER_STREAM = 0x62676872
# File handles kept for the bucket files: the rest of the process keeps the others.
_RESERVED_HANDLES = 64
_COPY_BYTES = 1 << 20
# Framed records joined into one write.
_WRITE_RECORDS = 4096


def num_buckets(estimated_bytes, bucket_bytes=DEFAULT_BUCKET_BYTES):
  """How many buckets keep each at about `bucket_bytes` for `estimated_bytes` of records."""
  if bucket_bytes < 1:
    raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
  return max(1, -(-int(estimated_bytes) // int(bucket_bytes)))


def estimated_record_bytes(options, num_documents, num_sentences, num_tokens):
  """About the bytes of all the records of a text, frames included, on the high side.

  A pass over the documents makes instances of at most `max_seq_length - 3` tokens of text, many
  shorter (short sequences, the ends of documents, a random next that leaves sentences to the next
  chunk): half that is taken here as their mean. A pass never makes more instances than sentences
  (an instance takes at least one). A record takes at most 3 bytes per input id (its varint), 1 per
  mask and segment id, 9 per prediction, and a few hundred of feature names and framing.

  Args:
    options: the `InstanceOptions`.
    num_documents: of the whole text.
    num_sentences: of the whole text.
    num_tokens: WordPiece tokens of the whole text.
  """
  per_pass = min(num_sentences,
                 2 * num_tokens / max(options.max_seq_length - 3, 1) + num_documents)
  record = 5 * options.max_seq_length + 9 * options.max_predictions_per_seq + 256
  return options.dupe_factor * per_pass * record


def scatter_draws(random_seed, source, count, buckets):
  """The bucket of each of the `count` records of source number `source` (a shard, a batch).

  Args:
    random_seed: the run's seed.
    source: the number of the group of records; each group has its own stream.
    count: how many records the group has.
    buckets: the number of buckets.

  Returns:
    int64 `[count]`, uniform in `[0, buckets)`.
  """
  seeds = np.random.SeedSequence([random_seed, _SCATTER_STREAM], spawn_key=(source,))
  return np.random.default_rng(seeds).integers(buckets, size=count)


def gather_order(random_seed, bucket, count):
  """The random order of the `count` records of bucket number `bucket`."""
  seeds = np.random.SeedSequence([random_seed, _GATHER_STREAM], spawn_key=(bucket,))
  return np.random.default_rng(seeds).permutation(count)


def write_by_bucket(path, records, draws, buckets):
  """Writes `records` to one local TFRecord file grouped by bucket, for `Buckets.add`.

  Args:
    path: the file to write.
    records: serialized records (a sequence of `bytes`).
    draws: the bucket of each record (`scatter_draws`).
    buckets: the number of buckets.

  Returns:
    int64 `[buckets]`: the bytes of each bucket's records in the file, one after another.
  """
  draws = np.asarray(draws, dtype=np.int64)
  with tf.io.TFRecordWriter(path) as writer:
    for i in np.argsort(draws, kind="stable"):
      writer.write(records[i])
  sizes = np.fromiter((len(r) for r in records), np.int64, len(records)) + FRAME_BYTES
  return np.bincount(draws, weights=sizes, minlength=buckets).astype(np.int64)


def write_round_robin(buckets, paths, random_seed, gzip=False, progress_interval_s=10.0):
  """Writes every bucket's records, in random order, round-robin to the TFRecord files `paths`.

  The framed records are copied as they are; with `gzip`, each file is one GZIP stream of them,
  as `tf.io.TFRecordWriter` writes it.

  Args:
    buckets: the `Buckets`, after the scatter.
    paths: the files to write (any `tf.io.gfile` path).
    random_seed: the run's seed.
    gzip: write GZIP-compressed TFRecords.
    progress_interval_s: seconds between progress lines.
  """
  total, written = int(buckets.records.sum()), 0
  last_progress = time.monotonic()
  logging.info("Writing %d records from %d shuffle buckets.", total, buckets.count)
  outputs = []
  try:
    outputs.extend(_Output(path, gzip) for path in paths)
    for records in buckets.gather(random_seed):
      for j, output in enumerate(outputs):
        output.write(records[(j - written) % len(outputs)::len(outputs)])
      written += len(records)
      if time.monotonic() - last_progress >= progress_interval_s:
        last_progress = time.monotonic()
        logging.info("written: %d of %d records", written, total)
    for output in outputs:
      output.finish()
  finally:
    for output in outputs:
      output.close()


class _Output:
  """A TFRecord file written from framed records, plain or as one GZIP stream."""

  def __init__(self, path, gzip):
    self._file = tf.io.gfile.GFile(path, "wb")
    # wbits 31: the gzip format (a header, DEFLATE, a CRC-32 trailer), TensorFlow's GZIP option.
    self._compressor = zlib.compressobj(6, zlib.DEFLATED, 31) if gzip else None

  def write(self, framed_records):
    for start in range(0, len(framed_records), _WRITE_RECORDS):
      data = b"".join(framed_records[start:start + _WRITE_RECORDS])
      self._file.write(self._compressor.compress(data) if self._compressor else data)

  def finish(self):
    if self._compressor:
      self._file.write(self._compressor.flush())

  def close(self):
    self._file.close()


class Buckets:
  """The bucket files of one shuffle, in a local folder of their own.

  Args:
    folder: a local folder, created here; `close` removes it with everything in it.
    count: the number of buckets.

  Use `add` during the scatter, then `gather`; as a context manager, leaving removes the folder.
  """

  def __init__(self, folder, count):
    self.folder = folder
    self.count = count
    self.records = np.zeros([count], dtype=np.int64)
    self._open = {}
    os.makedirs(folder, exist_ok=True)
    self._max_open = _raise_handle_limit(count + _RESERVED_HANDLES) - _RESERVED_HANDLES

  def path(self, bucket):
    return os.path.join(self.folder, f"bucket-{bucket:06d}.tfrecord")

  def add(self, path, bucket_bytes, bucket_records=None):
    """Appends the records of a file that `write_by_bucket` wrote to their buckets.

    Args:
      path: the file; it is removed afterwards.
      bucket_bytes: what `write_by_bucket` returned for it.
      bucket_records: the number of records of each bucket in it, for `records`.
    """
    with open(path, "rb") as source:
      for bucket in np.flatnonzero(bucket_bytes):
        try:
          _copy(source, self._handle(int(bucket)), int(bucket_bytes[bucket]), path)
        except OSError as error:
          file_io.raise_if_disk_full(error, "writing the shuffle's buckets", self.path(bucket))
          raise
    if bucket_records is not None:
      self.records += bucket_records
    os.remove(path)

  def gather(self, random_seed):
    """Yields each bucket's framed records in random order, bucket by bucket.

    A framed record is its bytes in a TFRecord file, frame and checksums included: TFRecord files
    concatenate byte for byte. Each bucket file is removed once it is read.

    Yields:
      A list of `bytes` per bucket.
    """
    self._close_handles()
    for bucket in range(self.count):
      path = self.path(bucket)
      if not os.path.exists(path):
        continue
      with open(path, "rb") as f:
        data = f.read()
      os.remove(path)
      starts = _frame_starts(data, path)
      order = gather_order(random_seed, bucket, len(starts) - 1)
      yield [data[a:b] for a, b in zip(starts[order].tolist(), starts[order + 1].tolist())]

  def close(self):
    self._close_handles()
    shutil.rmtree(self.folder, ignore_errors=True)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()

  def _handle(self, bucket):
    handle = self._open.get(bucket)
    if handle is None:
      if len(self._open) >= self._max_open:
        self._close_handles()
      handle = self._open[bucket] = open(self.path(bucket), "ab")  # noqa: SIM115
    return handle

  def _close_handles(self):
    handles, self._open = self._open, {}
    failed = None
    for bucket, handle in handles.items():
      try:
        handle.close()
      except OSError as error:
        failed = failed or (bucket, error)
    if failed:
      file_io.raise_if_disk_full(failed[1], "writing the shuffle's buckets", self.path(failed[0]))
      raise failed[1]


def _frame_starts(data, path):
  """The offsets at which the framed records of `data`, a TFRecord file's bytes, start, and its
  length: int64 `[records + 1]`."""
  starts, offset, end = [], 0, len(data)
  while offset < end:
    starts.append(offset)
    offset += struct.unpack_from("<Q", data, offset)[0] + FRAME_BYTES
  if offset != end:
    raise RuntimeError(f"{path}: the last record runs {offset - end} bytes past the end")
  return np.array(starts + [end], dtype=np.int64)


def _copy(source, target, length, path):
  while length:
    block = source.read(min(length, _COPY_BYTES))
    if not block:
      raise RuntimeError(f"{path}: ended {length} bytes early")
    target.write(block)
    length -= len(block)


def _raise_handle_limit(wanted):
  """Raises the soft limit of open files towards `wanted`; returns the limit in force."""
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  if soft != resource.RLIM_INFINITY and soft < wanted:
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
      resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
      soft = target
    except (ValueError, OSError):
      pass
  return wanted if soft == resource.RLIM_INFINITY else max(soft, _RESERVED_HANDLES + 8)
