"""The records of `create_pretraining_data`, written by an Apache Beam pipeline on any runner.

The local driver (`pipeline`) needs one machine. This pipeline runs the same steps as Beam
transforms, so that Dataflow, Flink or Spark (or the DirectRunner) share the work out:

1. every input file is scanned for its pieces (`corpus.read_pieces`), of which only the byte
   ranges travel; the ranges of all files are grouped into shards by the local rule
   (`corpus.group_pieces`), so the shards, their numbers and thus their random streams are the
   local path's;
2. each shard is read and tokenized (`writer.ShardProcessor.prepare`);
3. the number of documents and sentences of every shard fixes the draws of the next-sentence
   pool (`next_sentences.PoolDraws`, a side input); each shard cuts its drawn segments, and the
   parts are joined in shard order into the pool of the whole corpus (another side input, of at
   most `next_sentences.MAX_POOL_SEGMENTS` segments);
4. each shard builds, masks and serializes its instances with the pool
   (`writer.ShardProcessor.build_records`), and gives each record a random order key;
5. the records are shuffled across the whole corpus in two passes (below) and written to
   `<output_prefix>-SSSSS-of-NNNNN`.

Every output file is a uniformly random sample of all the instances, in uniformly random order, as
the original tool's (which shuffles them all in memory), so `run_pretraining.py` may read it
through a small shuffle buffer. The shuffle keeps memory bounded whatever the size of the corpus:

* the order key of a record is a uniform 63-bit integer from the stream
  `SeedSequence([random_seed, _ORDER_STREAM], spawn_key=(shard,))`, one draw per record in the
  shard's order, so it is the same on every runner and every rerun;
* the keys are cut into `num_files` equal ranges, one per output file, and each of those into
  `buckets_per_file` equal ranges, the buckets (`OutputLayout`): a record's file and bucket are
  drawn uniformly and independently of all other records';
* the records are grouped by (file, bucket); each bucket is sorted by key (a uniformly random
  order) and written as a piece in a temporary folder beside the outputs
  (`.<name>.shuffle.tmp-<host>-<pid>-<hex>`, any `tf.io.gfile` path);
* each output file is its buckets' pieces one after another in bucket order, copied in chunks,
  written in that folder and renamed to its name when complete, so no half-written file has an
  output's name; the folder is removed when all files are written (and by the driver when the
  pipeline fails or is stopped).

A file thus holds its records in key order, and the files together in order are the whole output
in key order, however many buckets there are. A file's number of records varies with the draws,
by about its square root.

The number of buckets keeps each at most about `bucket_bytes` (64 MiB by default), the one thing a
worker holds in memory to sort it: the bytes of all the records are estimated from the number of
documents, sentences and tokens of the text and `dupe_factor` as on the local path
(`shuffle.estimated_record_bytes`, on the high side: 1.5 to 2 times the bytes written on WikiText
and Gutenberg books, so buckets of a half to two thirds of `bucket_bytes`). With `num_shards=0`,
the number of files is one per `TEXT_BYTES_PER_OUTPUT` (128 MiB) of input text times
`dupe_factor`, rounded up.

A worker holds a few shards (the text of one, its documents, its instances), the pool or a bucket,
whatever the size of the corpus; what crosses between the steps is kept by the runner (Dataflow's
shuffle, or the DirectRunner's own process). Only the list of shards (a byte range and a few
counts per shard, a few hundred bytes per `shard_bytes` of text) and the list of pieces (a name
per bucket) are gathered in one place.

For the same input, seed and `shard_bytes`, the pipeline writes the same SET of records as the
local path (in another order); with the same `num_shards` too, the same bytes in every file,
whatever the runner, its workers or `bucket_bytes`.

The counts of the run (`PretrainingStats`) are Beam counters, summed over the workers when the
pipeline is done; lines with bytes that are not UTF-8 are logged by the worker that reads them.
"""

import dataclasses
import os
import time

from absl import logging
import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState
import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.pretraining import corpus, next_sentences, shuffle, writer
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import DEFAULT_SHARD_BYTES, log_summary
from official_bert.pretraining.stats import MAX_LISTED_ERRORS, PretrainingStats

# The namespace of the pipeline's counters, one per numeric field of `PretrainingStats`.
METRICS_NAMESPACE = "official_bert.pretraining"
_COUNTED = tuple(f.name for f in dataclasses.fields(PretrainingStats) if f.name != "undecodable")
# Bytes of records per shuffle bucket, about: a worker holds one bucket in memory to sort it.
DEFAULT_BUCKET_BYTES = shuffle.DEFAULT_BUCKET_BYTES
# With `num_shards=0`: one output file per this much input text times `dupe_factor`. Records take
# 1.5 to 2 times the bytes of their text at `max_seq_length=128` (more with longer sequences, for
# their padding), so files hold 200 to 250 MiB: few enough to list and open, many enough for the
# reader to interleave and for the workers to write side by side.
TEXT_BYTES_PER_OUTPUT = 128 << 20
# The order keys of shard `i` come from `SeedSequence([random_seed, _ORDER_STREAM],
# spawn_key=(i,))`; the instances of shard `i` use `SeedSequence(random_seed, spawn_key=(i, ...))`
# and the pool `[random_seed, next_sentences._POOL_STREAM]`, so the streams never meet.
_ORDER_STREAM = 0x626F7264
# Order keys are uniform in [0, 2**_KEY_BITS): 63 bits, so that they are int64 for Beam's coders.
_KEY_BITS = 63
# Chunks in which the pieces are copied into an output file (uncompressed), and records in which
# they are read (GZIP): what a worker holds of them at a time.
_COPY_BYTES = 16 << 20
_COPY_RECORDS = 4096


@dataclasses.dataclass(frozen=True)
class PieceSpan:
  """Where a `corpus.TextPiece` lies in its file: what travels instead of its text.

  Args:
    file_index: the file's place among the inputs.
    piece_index: the piece's place in its file.
    path: the file.
    offset: the piece's first byte.
    length: its bytes.
    first_line: 1-based line number of its first line.
    ends_document: as `corpus.TextPiece.ends_document`.
  """

  file_index: int
  piece_index: int
  path: str
  offset: int
  length: int
  first_line: int
  ends_document: bool

  def read(self):
    """Reads the piece again: the `corpus.TextPiece` it stands for."""
    with tf.io.gfile.GFile(self.path, "rb") as f:
      f.seek(self.offset)
      data = f.read(self.length)
    if len(data) != self.length:
      raise ValueError(f"{self.path}: changed while the pipeline ran (expected {self.length} "
                       f"bytes at offset {self.offset}, read {len(data)})")
    return corpus.TextPiece(self.path, self.first_line, data, self.ends_document)


def scan_file(file_index, path, shard_bytes):
  """Yields the `PieceSpan`s of one input file, reading it once, one piece at a time.

  Args:
    file_index: the file's place among the inputs.
    path: the file.
    shard_bytes: target size of a shard in bytes.
  """
  offset = 0
  for piece_index, piece in enumerate(corpus.read_pieces(path, shard_bytes)):
    yield PieceSpan(file_index, piece_index, path, offset, len(piece.data), piece.first_line,
                    piece.ends_document)
    offset += len(piece.data)


def group_shards(spans, shard_bytes):
  """Yields `(index, spans)` for each shard: the pieces of all files, grouped as the local path.

  Args:
    spans: the `PieceSpan`s of all files, in any order.
    shard_bytes: target size of a shard in bytes.
  """
  ordered = sorted(spans, key=lambda s: (s.file_index, s.piece_index))
  for index, group in enumerate(corpus.group_pieces(ordered, shard_bytes, lambda s: s.length)):
    yield index, tuple(group)


def _count(stats):
  """Adds `stats` to the pipeline's counters."""
  for name in _COUNTED:
    value = getattr(stats, name)
    if value:
      beam.metrics.Metrics.counter(METRICS_NAMESPACE, name).inc(value)


def stats_of(result):
  """The `PretrainingStats` of a finished pipeline, from its counters.

  Args:
    result: the `PipelineResult`.
  """
  totals = dict.fromkeys(_COUNTED, 0)
  query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
  for counter in query["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    totals[counter.key.metric.name] += value or 0
  return PretrainingStats(**totals)


class _ShardDoFn(beam.DoFn):
  """A DoFn with a `writer.ShardProcessor` (vocabulary and tokenizer), built once per worker."""

  def __init__(self, vocab_file, do_lower_case, options, random_seed):
    self._args = (vocab_file, do_lower_case, options, random_seed)
    self._processor = None

  def setup(self):
    self._processor = writer.ShardProcessor(*self._args)


class _Tokenize(_ShardDoFn):
  """`(index, spans)` -> `(index, documents)`; counts the text read."""

  def process(self, shard):
    index, spans = shard
    _, documents, stats = self._processor.prepare(
        corpus.Shard(index, tuple(span.read() for span in spans)))
    for error in stats.undecodable[:MAX_LISTED_ERRORS]:
      logging.warning("%s (as the original did).", error)
    _count(stats)
    yield index, documents


class _Build(_ShardDoFn):
  """`(index, documents)` -> `((file, bucket), (key, record))` per instance; counts them."""

  def process(self, shard, draws, pool, layout):
    index, documents = shard
    records, stats = self._processor.build_records(
        index, documents, int(draws.first_documents[index]), pool)
    _count(stats)
    keys = order_keys(self._args[3], index, len(records))
    for key, record in zip(keys, records):
      yield layout.place(key), (key, record)


def _draw_pool(counts, random_seed):
  """`[(index, documents, sentences, tokens)]` of all shards -> the `next_sentences.PoolDraws`."""
  counts = sorted(counts)
  if [c[0] for c in counts] != list(range(len(counts))):
    raise RuntimeError(f"shard counts are missing or repeat: {[c[0] for c in counts]}")
  size = next_sentences.pool_size(sum(c[2] for c in counts))
  return next_sentences.PoolDraws.draw([c[1] for c in counts], size, random_seed)


def _cut_segments(shard, draws, max_num_tokens):
  """Yields `(index, part of the pool)` for a shard that holds drawn documents."""
  index, documents = shard
  if index in draws.shards():
    yield index, draws.segments_of(index, documents, max_num_tokens)


def _join_pool(parts):
  return next_sentences.join_pools([part for _, part in sorted(parts, key=lambda p: p[0])])


@dataclasses.dataclass(frozen=True)
class OutputLayout:
  """The output files and their shuffle buckets: where a record goes, by its order key.

  The keys, uniform in `[0, 2**63)`, are cut into `num_files` equal ranges, one per file, and each
  of those into `buckets_per_file` equal ranges, one per bucket. A file is its buckets in order,
  each sorted by key, so it holds its records in key order.

  Args:
    num_files: the output files.
    buckets_per_file: the buckets of each file.
  """

  num_files: int
  buckets_per_file: int

  @classmethod
  def choose(cls, counts, text_bytes, options, num_shards, bucket_bytes, text_bytes_per_output):
    """The layout of a run, from the counts of its text.

    Args:
      counts: `(index, documents, sentences, tokens)` of every shard.
      text_bytes: the bytes of all the input files.
      options: the `InstanceOptions`.
      num_shards: the output files; 0 chooses one per `text_bytes_per_output` of text times
        `dupe_factor`, rounded up.
      bucket_bytes: the records per bucket, about.
      text_bytes_per_output: as above.
    """
    num_files = num_shards or max(
        1, -(-text_bytes * options.dupe_factor // text_bytes_per_output))
    estimate = shuffle.estimated_record_bytes(
        options, *(sum(c[i] for c in counts) for i in (1, 2, 3)))
    buckets = max(1, int(np.ceil(estimate / (num_files * bucket_bytes))))
    logging.info("Shuffling at most about %.1f MiB of records into %d files of %d buckets each.",
                 estimate / 2**20, num_files, buckets)
    return cls(num_files, buckets)

  def place(self, key):
    """`(file, bucket)` of the record with order key `key`."""
    file, rest = divmod(key * self.num_files, 1 << _KEY_BITS)
    return file, (rest * self.buckets_per_file) >> _KEY_BITS

  def output_path(self, output_prefix, file):
    return f"{output_prefix}-{file:05d}-of-{self.num_files:05d}"


def order_keys(random_seed, shard_index, count):
  """The order keys of a shard's `count` records, in their order: uniform in `[0, 2**63)`.

  Args:
    random_seed: the run's seed.
    shard_index: the shard's number, which picks the stream.
    count: how many records the shard has.

  Returns:
    A list of `count` Python ints.
  """
  seeds = np.random.SeedSequence([random_seed, _ORDER_STREAM], spawn_key=(shard_index,))
  return np.random.default_rng(seeds).integers(1 << _KEY_BITS, size=count, dtype=np.int64).tolist()


def write_bucket(bucket, temp_dir):
  """Sorts a bucket's records by key and writes them as a piece; returns `(file, (bucket, path))`.

  Args:
    bucket: `((file, bucket), [(key, record), ...])`, from the GroupByKey.
    temp_dir: the folder of the pieces.
  """
  (file, index), keyed = bucket
  # Equal keys (a chance of 2**-63 per pair) fall back on the record, so the order stays fixed.
  keyed = sorted(keyed)
  path = _piece_path(temp_dir, file, index)
  tf.io.gfile.makedirs(temp_dir)
  # A retried or duplicated bundle writes the same piece: each writes under a name of its own and
  # renames it, so a reader never sees a half-written one.
  with file_io.atomic_path(path) as temporary, tf.io.TFRecordWriter(temporary) as records:
    for _, record in keyed:
      records.write(record)
  return file, (index, path)


def write_output(file, pieces, layout, output_prefix, temp_dir, gzip):
  """Writes output file number `file`: its pieces one after another, in bucket order.

  The file is written in `temp_dir` and renamed to its name when complete.

  Args:
    file: the file's number.
    pieces: `{file: [(bucket, piece path), ...]}` for the buckets that hold records (a Beam
      multimap side input: `[]` for a file without any).
    layout: the `OutputLayout`.
    output_prefix: the outputs are `<output_prefix>-SSSSS-of-NNNNN`.
    temp_dir: the folder of the pieces.
    gzip: write a GZIP-compressed TFRecord file.

  Returns:
    The output path.
  """
  path = layout.output_path(output_prefix, file)
  ordered = [piece for _, piece in sorted(pieces[file])]
  temporary = file_io.temporary_name(os.path.join(temp_dir, f"output-{file:05d}.tfrecord"))
  tf.io.gfile.makedirs(temp_dir)
  try:
    if gzip or not ordered:
      # Compressed, the records are read and written again; without any, the writer still makes
      # the (empty) file, which a `GFile` never written to does not.
      options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
      with tf.io.TFRecordWriter(temporary, options) as records:
        for piece in ordered:
          for batch in tf.data.TFRecordDataset(piece).batch(_COPY_RECORDS):
            for record in batch.numpy():
              records.write(record)
    else:
      # Uncompressed TFRecord files concatenate byte for byte, frames and checksums included.
      with tf.io.gfile.GFile(temporary, "wb") as out:
        for piece in ordered:
          with tf.io.gfile.GFile(piece, "rb") as source:
            while chunk := source.read(_COPY_BYTES):
              out.write(chunk)
    tf.io.gfile.rename(temporary, path, overwrite=True)
  finally:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)
  return path


def remove_temp_dir(paths, temp_dir):
  """Removes the folder of the pieces once every output is written; returns the outputs, sorted."""
  if tf.io.gfile.exists(temp_dir):
    tf.io.gfile.rmtree(temp_dir)
  return sorted(paths)


def _piece_path(temp_dir, file, bucket):
  return os.path.join(temp_dir, f"piece-{file:05d}-{bucket:06d}.tfrecord")


def temp_dir_for(output_prefix):
  """A folder for the pieces of one run, beside the outputs, that no other run picks."""
  folder, name = os.path.split(output_prefix)
  return file_io.temporary_name(os.path.join(folder, f".{name}.shuffle"))


def build_pipeline(root, files, output_prefix, vocab_file, *, do_lower_case=True,
                   options=InstanceOptions(), random_seed=12345, gzip=False,
                   shard_bytes=DEFAULT_SHARD_BYTES, num_shards=0,
                   bucket_bytes=DEFAULT_BUCKET_BYTES, temp_dir=None):
  """Adds the transforms that write the pre-training records to the pipeline `root`.

  Args:
    root: a `beam.Pipeline`.
    files: the input files (globs already expanded).
    output_prefix: the output files are `<output_prefix>-SSSSS-of-NNNNN`.
    vocab_file, do_lower_case, options, random_seed, gzip, shard_bytes, num_shards, bucket_bytes:
      as for `create_pretraining_data_beam`.
    temp_dir: the folder of the shuffle's pieces, removed at the end; default: `temp_dir_for`
      the output prefix.

  Returns:
    The `PCollection` of the written file names.
  """
  max_num_tokens = options.max_seq_length - 3
  processor_args = (vocab_file, do_lower_case, options, random_seed)
  temp_dir = temp_dir or temp_dir_for(output_prefix)
  spans = (
      root
      | "Files" >> beam.Create(list(enumerate(files)))
      | "SpreadFiles" >> beam.Reshuffle()
      | "ScanFiles" >> beam.FlatMap(lambda file: scan_file(*file, shard_bytes))
      | "AllSpans" >> beam.combiners.ToList())
  shards = (
      spans
      | "GroupShards" >> beam.FlatMap(group_shards, shard_bytes=shard_bytes)
      | "SpreadShards" >> beam.Reshuffle())
  text_bytes = spans | "TextBytes" >> beam.Map(lambda all_spans: sum(s.length for s in all_spans))
  documents = shards | "Tokenize" >> beam.ParDo(_Tokenize(*processor_args))
  counts = (
      documents
      | "CountShard" >> beam.MapTuple(
          lambda index, docs: (index, docs.num_documents, len(docs.sentence_splits) - 1,
                               len(docs.token_ids)))
      | "AllCounts" >> beam.combiners.ToList())
  draws = counts | "DrawPool" >> beam.Map(_draw_pool, random_seed=random_seed)
  # The module's constant is read here, when the pipeline is built, and travels with it.
  layout = counts | "Layout" >> beam.Map(
      OutputLayout.choose, text_bytes=beam.pvalue.AsSingleton(text_bytes), options=options,
      num_shards=num_shards, bucket_bytes=bucket_bytes,
      text_bytes_per_output=TEXT_BYTES_PER_OUTPUT)
  pool = (
      documents
      | "CutSegments" >> beam.FlatMap(_cut_segments, draws=beam.pvalue.AsSingleton(draws),
                                      max_num_tokens=max_num_tokens)
      | "AllSegments" >> beam.combiners.ToList()
      | "JoinPool" >> beam.Map(_join_pool))
  pieces = (
      documents
      | "Build" >> beam.ParDo(
          _Build(*processor_args), draws=beam.pvalue.AsSingleton(draws),
          pool=beam.pvalue.AsSingleton(pool), layout=beam.pvalue.AsSingleton(layout))
      | "GroupBuckets" >> beam.GroupByKey()
      | "WriteBuckets" >> beam.Map(write_bucket, temp_dir=temp_dir))
  return (
      layout
      | "FileNumbers" >> beam.FlatMap(lambda chosen: range(chosen.num_files))
      | "SpreadOutputs" >> beam.Reshuffle()
      | "WriteFiles" >> beam.Map(
          write_output, pieces=beam.pvalue.AsMultiMap(pieces),
          layout=beam.pvalue.AsSingleton(layout), output_prefix=output_prefix,
          temp_dir=temp_dir, gzip=gzip)
      | "AllFiles" >> beam.combiners.ToList()
      | "RemovePieces" >> beam.FlatMap(remove_temp_dir, temp_dir=temp_dir))


def option_names(beam_args):
  """`(known, unknown)`: the names of all of Beam's pipeline options, and those of `beam_args`
  that none of its `PipelineOptions` classes defines (Beam itself only logs and drops these)."""
  known = PipelineOptions(beam_args).get_all_options()
  given = PipelineOptions(beam_args).get_all_options(retain_unknown_options=True)
  return sorted(known), sorted(set(given) - set(known))


def _direct_runner(pipeline_options):
  """The runner that `--direct_running_mode` configures, when it is given; else None (Beam's).

  The DirectRunner prefers Beam's Prism runner when it can fetch it, and Prism ignores
  `--direct_num_workers` and `--direct_running_mode`; a user who sets those asks for the
  FnApiRunner's worker threads or processes, so they get it.
  """
  runner = pipeline_options.view_as(StandardOptions).runner
  mode = pipeline_options.view_as(DirectOptions).direct_running_mode
  if runner in (None, "DirectRunner") and mode != "in_memory":
    from apache_beam.runners.portability.fn_api_runner import (  # pylint: disable=g-import-not-at-top
      fn_runner,
    )
    return fn_runner.FnApiRunner()
  return None


def create_pretraining_data_beam(input_files, output_prefix, vocab_file, beam_args, *,
                                 do_lower_case=True, options=InstanceOptions(),
                                 random_seed=12345, gzip=False, shard_bytes=DEFAULT_SHARD_BYTES,
                                 num_shards=0, bucket_bytes=DEFAULT_BUCKET_BYTES):
  """Writes the local path's pre-training records with an Apache Beam pipeline, and waits for it.

  Args:
    input_files: comma-separated files or glob patterns (a string or a list of them); one sentence
      per line, a blank line between documents. Any `tf.io.gfile` path (`gs://`); the workers read
      them too.
    output_prefix: the outputs are `<output_prefix>-SSSSS-of-NNNNN`, each a uniformly random
      sample of the instances in random order (any `tf.io.gfile` path the workers can write; the
      shuffle's pieces go to a temporary folder beside them, about the size of the output).
    vocab_file: the WordPiece vocabulary (read by every worker).
    beam_args: Beam's pipeline options as on its command line, e.g.
      `["--runner=DirectRunner", "--direct_num_workers=2"]`.
    do_lower_case: lower-case the text, as for an uncased model.
    options: `InstanceOptions`.
    random_seed: with `shard_bytes`, decides the records, as for `create_pretraining_data`, and
      their order; with `num_shards` too, the same seed gives the same bytes in every file.
    gzip: write GZIP-compressed TFRecords.
    shard_bytes: text per shard; a worker's memory grows with it.
    num_shards: output files; 0 chooses one per `TEXT_BYTES_PER_OUTPUT` (128 MiB) of input text
      times `dupe_factor`, rounded up.
    bucket_bytes: records per shuffle bucket, about; a worker holds a bucket in memory.

  Returns:
    `PretrainingStats`, the counts over the whole corpus.

  Raises:
    FileNotFoundError: an input pattern matches nothing, or the vocabulary is missing.
    ValueError: the vocabulary lacks special tokens, or the input holds no text.
    RuntimeError: the pipeline did not finish.

  Example, on the DirectRunner with two worker processes:

      stats = create_pretraining_data_beam(
          "corpus/*.txt", "out/train.tfrecord", "vocab.txt",
          ["--runner=DirectRunner", "--direct_num_workers=2",
           "--direct_running_mode=multi_processing"])
  """
  start = time.monotonic()
  if shard_bytes < 1:
    raise ValueError(f"shard_bytes must be positive, got {shard_bytes}")
  if num_shards < 0:
    raise ValueError(f"num_shards must be 0 (chosen from the input size) or more, got {num_shards}")
  if bucket_bytes < 1:
    raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
  if "," in output_prefix:
    raise ValueError(f"with a Beam runner the output is one path prefix, got {output_prefix!r}")
  files = file_io.expand_globs(input_files, what="input file")
  corpus.read_vocab_tokens(vocab_file)
  logging.info("Creating pre-training data from %d files into %s-*-of-* with Apache Beam (%s).",
               len(files), output_prefix, " ".join(beam_args))
  pipeline_options = PipelineOptions(beam_args)
  root = beam.Pipeline(runner=_direct_runner(pipeline_options), options=pipeline_options)
  temp_dir = temp_dir_for(output_prefix)
  build_pipeline(root, files, output_prefix, vocab_file, do_lower_case=do_lower_case,
                 options=options, random_seed=random_seed, gzip=gzip, shard_bytes=shard_bytes,
                 num_shards=num_shards, bucket_bytes=bucket_bytes, temp_dir=temp_dir)
  result = None
  try:
    result = root.run()
    state = result.wait_until_finish()
  finally:
    # The pipeline removes the pieces when it succeeds; after a failure or a stop (Ctrl-C) this
    # process does, unless a remote job still runs and needs them.
    if _still_runs(result):
      logging.warning("The Beam job still runs; its pieces in %s stay until it ends.", temp_dir)
    else:
      _remove_quietly(temp_dir)
  if state != PipelineState.DONE:
    raise RuntimeError(f"the Beam pipeline ended in state {state}")
  stats = stats_of(result)
  if stats.instances == 0:
    # The pipeline still wrote (empty) files; none should look like a result.
    compression = "GZIP" if gzip else ""
    for path in tf.io.gfile.glob(f"{output_prefix}-*-of-*"):
      if not any(True for _ in tf.data.TFRecordDataset(path, compression_type=compression)):
        tf.io.gfile.remove(path)
    named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    raise ValueError(
        f"no pre-training instances: the input ({named}) holds no text: {stats.lines} lines, "
        f"{stats.blank_lines} blank, {stats.undecodable_bytes} bytes not UTF-8, "
        f"{stats.lines_without_tokens} without WordPiece tokens")
  log_summary(stats, [f"{output_prefix}-*-of-*"], time.monotonic() - start)
  return stats


def _still_runs(result):
  """Whether the job of `result` (None: none started) has not ended."""
  if result is None:
    return False
  try:
    return not PipelineState.is_terminal(result.state)
  except Exception:  # a remote runner that cannot be asked: take it as ended
    return False


def _remove_quietly(folder):
  """Removes `folder` if it exists; a failure to is logged, not raised over the run's own error."""
  try:
    if tf.io.gfile.exists(folder):
      tf.io.gfile.rmtree(folder)
  except (OSError, tf.errors.OpError) as error:
    logging.warning("Could not remove the shuffle's pieces in %s: %s", folder, error)
