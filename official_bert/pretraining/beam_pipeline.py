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
   (`writer.ShardProcessor.build_records`);
5. `beam.io.WriteToTFRecord` writes them to `<output>-SSSSS-of-NNNNN` files.

A worker holds a few shards (the text of one, its documents, its instances) and the pool, whatever
the size of the corpus; what crosses between the steps is kept by the runner (Dataflow's shuffle,
or the DirectRunner's own process). Only the list of shards (a byte range and three counts per
shard, a few hundred bytes per `shard_bytes` of text) is gathered in one place, to number them.

For the same input, seed and `shard_bytes`, the pipeline writes the same SET of records as the
local path. Their order differs: each shard's records come in the local order, but the runner
decides which output file they go to (with `num_shards=0`, one file per bundle of work; with a
fixed number, files filled in no set order), where the local path deals every shard's records
round-robin to its outputs in shard order.

The counts of the run (`PretrainingStats`) are Beam counters, summed over the workers when the
pipeline is done; lines with bytes that are not UTF-8 are logged by the worker that reads them.
"""

import dataclasses
import time

from absl import logging
import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState
import tensorflow as tf

from official_bert.common import file_io
from official_bert.pretraining import corpus, next_sentences, writer
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import DEFAULT_SHARD_BYTES, log_summary
from official_bert.pretraining.stats import MAX_LISTED_ERRORS, PretrainingStats

# The namespace of the pipeline's counters, one per numeric field of `PretrainingStats`.
METRICS_NAMESPACE = "official_bert.pretraining"
_COUNTED = tuple(f.name for f in dataclasses.fields(PretrainingStats) if f.name != "undecodable")


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
  """`(index, documents)` -> the shard's serialized instances; counts them."""

  def process(self, shard, draws, pool):
    index, documents = shard
    records, stats = self._processor.build_records(
        index, documents, int(draws.first_documents[index]), pool)
    _count(stats)
    yield from records


def _draw_pool(counts, random_seed):
  """`[(index, documents, sentences)]` of all shards -> the `next_sentences.PoolDraws`."""
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


def build_pipeline(root, files, output_prefix, vocab_file, *, do_lower_case=True,
                   options=InstanceOptions(), random_seed=12345, gzip=False,
                   shard_bytes=DEFAULT_SHARD_BYTES, num_shards=0):
  """Adds the transforms that write the pre-training records to the pipeline `root`.

  Args:
    root: a `beam.Pipeline`.
    files: the input files (globs already expanded).
    output_prefix: the output files are `<output_prefix>-SSSSS-of-NNNNN`.
    vocab_file, do_lower_case, options, random_seed, gzip, shard_bytes: as for
      `create_pretraining_data_beam`.
    num_shards: output files; 0 lets the runner choose.

  Returns:
    The `PCollection` of the written file names.
  """
  max_num_tokens = options.max_seq_length - 3
  processor_args = (vocab_file, do_lower_case, options, random_seed)
  shards = (
      root
      | "Files" >> beam.Create(list(enumerate(files)))
      | "SpreadFiles" >> beam.Reshuffle()
      | "ScanFiles" >> beam.FlatMap(lambda file: scan_file(*file, shard_bytes))
      | "AllSpans" >> beam.combiners.ToList()
      | "GroupShards" >> beam.FlatMap(group_shards, shard_bytes=shard_bytes)
      | "SpreadShards" >> beam.Reshuffle())
  documents = shards | "Tokenize" >> beam.ParDo(_Tokenize(*processor_args))
  draws = (
      documents
      | "CountShard" >> beam.MapTuple(
          lambda index, docs: (index, docs.num_documents, len(docs.sentence_splits) - 1))
      | "AllCounts" >> beam.combiners.ToList()
      | "DrawPool" >> beam.Map(_draw_pool, random_seed=random_seed))
  pool = (
      documents
      | "CutSegments" >> beam.FlatMap(_cut_segments, draws=beam.pvalue.AsSingleton(draws),
                                      max_num_tokens=max_num_tokens)
      | "AllSegments" >> beam.combiners.ToList()
      | "JoinPool" >> beam.Map(_join_pool))
  records = documents | "Build" >> beam.ParDo(
      _Build(*processor_args), draws=beam.pvalue.AsSingleton(draws),
      pool=beam.pvalue.AsSingleton(pool))
  return records | "Write" >> beam.io.WriteToTFRecord(
      output_prefix, num_shards=num_shards,
      compression_type=CompressionTypes.GZIP if gzip else CompressionTypes.UNCOMPRESSED)


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
                                 num_shards=0):
  """Writes the local path's pre-training records with an Apache Beam pipeline, and waits for it.

  Args:
    input_files: comma-separated files or glob patterns (a string or a list of them); one sentence
      per line, a blank line between documents. Any `tf.io.gfile` path (`gs://`); the workers read
      them too.
    output_prefix: the outputs are `<output_prefix>-SSSSS-of-NNNNN` (any path Beam can write).
    vocab_file: the WordPiece vocabulary (read by every worker).
    beam_args: Beam's pipeline options as on its command line, e.g.
      `["--runner=DirectRunner", "--direct_num_workers=2"]`.
    do_lower_case: lower-case the text, as for an uncased model.
    options: `InstanceOptions`.
    random_seed: with `shard_bytes`, decides the records, as for `create_pretraining_data`.
    gzip: write GZIP-compressed TFRecords.
    shard_bytes: text per shard; a worker's memory grows with it.
    num_shards: output files; 0 lets the runner choose.

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
    raise ValueError(f"num_shards must be 0 (the runner chooses) or more, got {num_shards}")
  if "," in output_prefix:
    raise ValueError(f"with a Beam runner the output is one path prefix, got {output_prefix!r}")
  files = file_io.expand_globs(input_files, what="input file")
  corpus.read_vocab_tokens(vocab_file)
  logging.info("Creating pre-training data from %d files into %s-*-of-* with Apache Beam (%s).",
               len(files), output_prefix, " ".join(beam_args))
  pipeline_options = PipelineOptions(beam_args)
  root = beam.Pipeline(runner=_direct_runner(pipeline_options), options=pipeline_options)
  build_pipeline(root, files, output_prefix, vocab_file, do_lower_case=do_lower_case,
                 options=options, random_seed=random_seed, gzip=gzip, shard_bytes=shard_bytes,
                 num_shards=num_shards)
  result = root.run()
  state = result.wait_until_finish()
  if state != PipelineState.DONE:
    raise RuntimeError(f"the Beam pipeline ended in state {state}")
  stats = stats_of(result)
  if stats.instances == 0:
    # The runner still wrote (empty) files; none should look like a result.
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
