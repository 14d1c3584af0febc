"""The streaming, multi-process driver behind `create_pretraining_data.py`.

The corpus is read as a stream of shards (`corpus`), in two rounds. First worker processes
tokenize each shard and save its documents (`writer`); this process draws from all of them the
pool of random next sentences (`next_sentences`). Then the workers turn each shard into a piece
file of records grouped by shuffle bucket, which this process appends to the buckets in shard
order (`shuffle`). Last, this process reads the buckets one at a time, puts each in random order
and deals its records round-robin to the outputs, which it renames when they are complete.

So every output file is a uniformly random sample of all the instances, in random order, as the
original tool's (which shuffles all of them in memory): `run_pretraining.py` may read it through a
small shuffle buffer. Memory is bounded by a few shards per worker, the pool and one bucket,
whatever the size of the corpus (the saved documents take about the size of the text on disk, the
buckets about the size of the output), and the output bytes depend on the seed and the shard size
only, not on the number of workers.

This process works on shards too; see `workers` for how the work is shared.

Deviations from the original tool, all forced by streaming:

* a random next sentence comes from a pool of at most `next_sentences.MAX_POOL_SEGMENTS` segments
  drawn from the whole corpus by the original's rule, so a segment may serve more than once;
* the end of an input file ends a document, and a document longer than `2 * shard_bytes` is cut
  into several (the cuts are counted in the summary).

Until the outputs are complete, they are written beside themselves under names that carry the
output's name, the host and the process id (`out.tfrecord.incomplete-<host>-<pid>`, and the folder
of pieces and buckets `.out.tfrecord.pieces-<host>-<pid>`). A run that stops on an error or a
signal removes them; one that was killed cannot, so the next run for the same output removes those
of dead processes on this host.
"""

import os
import shutil
import tempfile
import time

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.common import debris, file_io
from official_bert.pretraining import corpus, next_sentences, shuffle, workers, writer
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.stats import MAX_LISTED_ERRORS, PretrainingStats

DEFAULT_SHARD_BYTES = 1 << 20
# A worker process costs seconds of CPU to start (importing TensorFlow, building the tokenizer),
# about the time a running process takes for this much text (times dupe_factor): smaller inputs
# are not worth another worker.
BYTES_PER_WORKER = 32 << 20


def create_pretraining_data(input_files, output_files, vocab_file, *, do_lower_case=True,
                            options=InstanceOptions(), random_seed=12345,
                            num_workers=None, gzip=False, shard_bytes=DEFAULT_SHARD_BYTES,
                            bucket_bytes=shuffle.DEFAULT_BUCKET_BYTES, progress_interval_s=10.0):
  """Writes BERT pre-training TFRecords from text files, as the original tool, only faster.

  Args:
    input_files: comma-separated files or glob patterns (a string or a list of them); one sentence
      per line, a blank line between documents.
    output_files: comma-separated output paths (a string or a list); the instances, in one
      random order, go to them round-robin. Every path, here and above, may be local or any
      `tf.io.gfile` URL (`gs://`); the pieces and shuffle buckets stay on this machine (beside a
      local output, else in the system's temporary folder: room for about the output's size),
      and each output appears whole or not at all.
    vocab_file: the WordPiece vocabulary.
    do_lower_case: lower-case the text, as for an uncased model.
    options: `InstanceOptions`.
    random_seed: the same seed (and `shard_bytes`) gives byte-identical files.
    num_workers: processes working on shards, this one included; 1 works in this process only.
      Default: the number of usable CPU cores, but one per `BYTES_PER_WORKER` of text times
      `dupe_factor` only, as each further process first spends seconds importing TensorFlow.
    gzip: write GZIP-compressed TFRecords.
    shard_bytes: text per shard; memory grows with it.
    bucket_bytes: records per shuffle bucket, about; this process holds one bucket at a time.
    progress_interval_s: seconds between progress lines.

  Returns:
    `PretrainingStats`, the counts over the whole corpus.

  Raises:
    FileNotFoundError: an input pattern matches nothing, or the vocabulary is missing.
    ValueError: the vocabulary lacks special tokens, or the input holds no text.

  Example, over a folder of text files:

      stats = create_pretraining_data(
          "corpus/*.txt", "out/train.tfrecord", "vocab.txt",
          options=InstanceOptions(dupe_factor=5))
  """
  start = time.monotonic()
  if shard_bytes < 1:
    raise ValueError(f"shard_bytes must be positive, got {shard_bytes}")
  if bucket_bytes < 1:
    raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
  if num_workers is not None and num_workers < 1:
    raise ValueError(f"num_workers must be at least 1, got {num_workers}")
  files = file_io.expand_globs(input_files, what="input file")
  corpus.read_vocab_tokens(vocab_file)
  outputs = output_paths(output_files)
  if num_workers is None:
    num_workers = _auto_num_workers(files, options.dupe_factor)
  logging.info("Creating pre-training data from %d files into %d files with %d workers.",
               len(files), len(outputs), num_workers)
  for path in outputs:
    if os.path.dirname(path):
      tf.io.gfile.makedirs(os.path.dirname(path))
  remove_debris(outputs)
  piece_dir = work_folder(outputs[0])
  partial = [temporary_path(path) for path in outputs]
  try:
    tf.io.gfile.makedirs(piece_dir)
    # The outputs are written last, but their partial files show from the start that a run is
    # writing them (and are what a killed run leaves for the next one to remove).
    for temporary in partial:
      with tf.io.gfile.GFile(temporary, "wb") as f:
        f.write(b"")  # a GFile makes its file on the first write only
    stats = _write_all(files, partial, piece_dir, num_workers, shard_bytes, progress_interval_s,
                       (vocab_file, do_lower_case, options, random_seed, piece_dir), start,
                       gzip=gzip, bucket_bytes=bucket_bytes)
    if stats.instances == 0:
      named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
      raise ValueError(
          f"no pre-training instances: the input ({named}) holds no text: {stats.lines} lines, "
          f"{stats.blank_lines} blank, {stats.undecodable_bytes} bytes not UTF-8, "
          f"{stats.lines_without_tokens} without WordPiece tokens")
    for temporary, path in zip(partial, outputs):
      tf.io.gfile.rename(temporary, path, overwrite=True)
  except (OSError, tf.errors.OpError) as error:
    # The pieces and buckets take about the output's size beside it, until the end.
    file_io.raise_if_disk_full(error, "creating the pre-training data, whose work files take "
                               "about the output's size beside it")
    raise
  finally:
    shutil.rmtree(piece_dir, ignore_errors=True)
    for temporary in partial:
      if tf.io.gfile.exists(temporary):
        tf.io.gfile.remove(temporary)
  log_summary(stats, outputs, time.monotonic() - start)
  return stats


def _write_all(files, partial, piece_dir, num_workers, shard_bytes, progress_interval_s,
               processor_args, start, *, gzip, bucket_bytes):
  """Tokenizes the shards, draws the pool, builds the shards into buckets, writes the buckets."""
  _, _, options, random_seed = processor_args[:4]
  stats = PretrainingStats()
  listed = 0
  last_progress = time.monotonic()
  documents_per_shard, num_sentences, num_tokens = [], 0, 0
  buckets = None
  try:
    with workers.ShardRunner(num_workers, processor_args) as runner:
      for result in runner.run_in_order(corpus.read_shards(files, shard_bytes)):
        documents_per_shard.append(result.num_documents)
        num_sentences += result.num_sentences
        num_tokens += result.num_tokens
        stats = stats + result.stats
        for error in result.stats.undecodable:
          if listed < MAX_LISTED_ERRORS:
            logging.warning("%s (as the original did).", error)
            listed += 1
        if time.monotonic() - last_progress >= progress_interval_s:
          last_progress = time.monotonic()
          _log_progress(stats, last_progress - start, "tokenized")
      pool = next_sentences.build_pool(
          piece_dir, documents_per_shard, next_sentences.pool_size(num_sentences),
          options.max_seq_length - 3, random_seed)
      if runner.num_worker_processes:
        # The workers load it from the file, and so does this process when it builds a shard.
        pool.save(next_sentences.pool_path(piece_dir))
      else:
        runner.processor_here().use_pool(pool)
      logging.info("Drew %d random next sentence segments from %d documents.", len(pool),
                   stats.documents)
      del pool
      num_buckets = shuffle.num_buckets(shuffle.estimated_record_bytes(
          options, stats.documents, num_sentences, num_tokens), bucket_bytes)
      buckets = shuffle.Buckets(os.path.join(piece_dir, "buckets"), num_buckets)
      first_documents = np.concatenate([[0], np.cumsum(documents_per_shard)]).tolist()
      jobs = (writer.BuildJob(index, first_documents[index], num_buckets)
              for index in range(len(documents_per_shard)))
      for result in runner.run_in_order(jobs):
        buckets.add(result.piece_path, result.bucket_bytes, result.bucket_records)
        stats = stats + result.stats
        if time.monotonic() - last_progress >= progress_interval_s:
          last_progress = time.monotonic()
          _log_progress(stats, last_progress - start, "built")
      logging.info("Processed %d shards twice (tokenizing, then building): %d times in this "
                   "process and %d in %d worker processes.", len(documents_per_shard),
                   runner.shards_here, runner.shards_in_workers, num_workers - 1)
    shuffle.write_round_robin(buckets, partial, random_seed, gzip, progress_interval_s)
  finally:
    if buckets is not None:
      buckets.close()
  return stats


def output_paths(output_files):
  """Splits the comma-separated output list; rejects an empty list and repeats."""
  if isinstance(output_files, str):
    output_files = [output_files]
  paths = [p.strip() for group in output_files for p in group.split(",") if p.strip()]
  if not paths:
    raise ValueError("no output file given")
  if len(set(map(_file_key, paths))) != len(paths):
    raise ValueError(f"output files repeat: {paths}")
  return paths


def _file_key(path):
  """The same string for every spelling of a local file (relative, absolute, `file://`)."""
  local = file_io.local_path(path)
  return path if local is None else os.path.abspath(local)


def temporary_path(path):
  """The name under which `path` is written until it is complete."""
  return f"{path}.incomplete-{debris.writer_id()}"


def _piece_folder(path):
  """Where the piece files of the output `path` go: they stay on this machine, beside a local
  output (the same disk, which has room for it), else in the system's temporary folder."""
  local = file_io.local_path(path)
  return os.path.dirname(os.path.abspath(local)) if local is not None else tempfile.gettempdir()


def work_folder(path):
  """The local folder of this run's work files (pieces, buckets) for the output `path`."""
  return os.path.join(_piece_folder(path),
                      f".{os.path.basename(path)}.pieces-{debris.writer_id()}")


def remove_debris(outputs):
  """Removes the partial outputs and piece folders that killed runs left beside `outputs`.

  Only those of processes of this host that no longer run are removed: a process of another host
  (on a shared file system) may still be writing.
  """
  for path in outputs:
    name = os.path.basename(path)
    places = ((os.path.dirname(path) or ".", f"{name}.incomplete-"),
              (_piece_folder(path), f".{name}.pieces-"))
    for folder, prefix in places:
      for entry in tf.io.gfile.listdir(folder):
        entry = entry.rstrip("/")
        if entry.startswith(prefix):
          debris.remove_if_dead(os.path.join(folder, entry), entry[len(prefix):], path)


def _auto_num_workers(files, dupe_factor):
  """All usable cores, but no more processes than the amount of work pays for."""
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  work = sum(tf.io.gfile.stat(f).length for f in files) * dupe_factor
  return max(1, min(cores or 1, 1 + work // BYTES_PER_WORKER))


def _log_progress(stats, elapsed, stage):
  logging.info("%s: %d documents, %d instances, %.1f MB read, %.1f s", stage, stats.documents,
               stats.instances, stats.input_bytes / 1e6, elapsed)


def log_summary(stats, outputs, elapsed):
  """Logs the end-of-run summary: what was written where, how fast, and `stats.summary()`."""
  logging.info("Wrote %d instances to %s in %.1f s (%.2f MB/s of text).", stats.instances,
               ", ".join(outputs), elapsed, stats.input_bytes / 1e6 / max(elapsed, 1e-9))
  for line in stats.summary():
    logging.info("%s", line)
