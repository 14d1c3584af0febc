"""Shuffling existing TFRecord files into new ones: one random order, in bounded memory.

`create_pretraining_data` writes its records in one uniformly random order. Files written in
another order (by an earlier version of this package, which shuffled within shards of the corpus
only, or by any other tool) can be shuffled into new files with `shuffle_records` (the command
`bert-shuffle-records`), through the same two-pass bucket shuffle (`shuffle`). The records are
copied byte for byte; only their order and their files change.
"""

import os
import shutil
import time

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.common import file_io, tfrecord_errors
from official_bert.common.errors import UserError
from official_bert.pretraining import pipeline, reader, shuffle

# Records read and scattered at once.
_SCATTER_BATCH = 1 << 14
# A GZIP TFRecord file of pre-training records holds about this many times its size.
_GZIP_RATIO = 4


def shuffle_records(input_files, output_files, *, random_seed=12345, gzip=False,
                    bucket_bytes=shuffle.DEFAULT_BUCKET_BYTES, progress_interval_s=10.0):
  """Writes all the records of `input_files` to `output_files` in one uniformly random order.

  Args:
    input_files: comma-separated TFRecord files or glob patterns (a string or a list of them),
      plain or GZIP-compressed (told apart by their first bytes).
    output_files: comma-separated output paths (a string or a list); the records go to them
      round-robin, so each is a uniformly random sample of all, in random order. Any
      `tf.io.gfile` path (`gs://`); the buckets stay on this machine (beside the first output
      when it is local, else in the system's temporary folder: room for about the records' size),
      and each output appears whole or not at all.
    random_seed: the same seed and inputs give the same bytes.
    gzip: write GZIP-compressed TFRecords.
    bucket_bytes: records per bucket, about; this process holds one bucket at a time.
    progress_interval_s: seconds between progress lines.

  Returns:
    The number of records written.

  Raises:
    FileNotFoundError: an input pattern matches nothing.
    UserError: an input is damaged or holds no record, or the disk is full.

  Example:

      shuffle_records("old/train-*.tfrecord", "new/train-0.tfrecord,new/train-1.tfrecord")
  """
  start = time.monotonic()
  files = file_io.expand_globs(input_files, what="input file")
  outputs = pipeline.output_paths(output_files)
  compressions = [reader.compression_type(path) for path in files]
  estimate = sum(tf.io.gfile.stat(path).length * (_GZIP_RATIO if kind else 1)
                 for path, kind in zip(files, compressions))
  num_buckets = shuffle.num_buckets(estimate, bucket_bytes)
  logging.info("Shuffling the records of %d files into %d files through %d buckets.",
               len(files), len(outputs), num_buckets)
  for path in outputs:
    if os.path.dirname(path):
      tf.io.gfile.makedirs(os.path.dirname(path))
  pipeline.remove_debris(outputs)
  folder = pipeline.work_folder(outputs[0])
  partial = [pipeline.temporary_path(path) for path in outputs]
  try:
    with shuffle.Buckets(os.path.join(folder, "buckets"), num_buckets) as buckets:
      _scatter(files, compressions, buckets, folder, random_seed, progress_interval_s, start)
      total = int(buckets.records.sum())
      if total == 0:
        raise UserError(f"no records in {', '.join(files)}: nothing to shuffle")
      shuffle.write_round_robin(buckets, partial, random_seed, gzip, progress_interval_s)
    for temporary, path in zip(partial, outputs):
      tf.io.gfile.rename(temporary, path, overwrite=True)
  except (OSError, tf.errors.OpError) as error:
    if isinstance(error, tf.errors.DataLossError):
      raise UserError(str(error.message)) from None
    file_io.raise_if_disk_full(error, "shuffling the records, whose buckets take about their "
                               "size beside the first output")
    raise
  finally:
    shutil.rmtree(folder, ignore_errors=True)
    for temporary in partial:
      if tf.io.gfile.exists(temporary):
        tf.io.gfile.remove(temporary)
  logging.info("Wrote %d records to %s in %.1f s.", total, ", ".join(outputs),
               time.monotonic() - start)
  return total


def _scatter(files, compressions, buckets, folder, random_seed, progress_interval_s, start):
  """Reads every input, batch by batch, and adds each batch's records to their buckets."""
  last_progress = time.monotonic()
  batch_number = 0
  for path, kind in zip(files, compressions):
    # A damaged file is named in the error (`naming_damaged_tfrecords`), before any output exists.
    with tfrecord_errors.naming_damaged_tfrecords():
      tfrecord_errors.note_tfrecord_files([path], [kind])
      for batch in tf.data.TFRecordDataset(path, compression_type=kind).batch(_SCATTER_BATCH):
        records = batch.numpy()
        draws = shuffle.scatter_draws(random_seed, batch_number, len(records), buckets.count)
        piece = os.path.join(folder, f"batch-{batch_number:07d}.tfrecord")
        sizes = shuffle.write_by_bucket(piece, records, draws, buckets.count)
        buckets.add(piece, sizes, np.bincount(draws, minlength=buckets.count))
        batch_number += 1
        if time.monotonic() - last_progress >= progress_interval_s:
          last_progress = time.monotonic()
          logging.info("scattered: %d records, %.1f s", buckets.records.sum(),
                       last_progress - start)
