"""Shuffles TFRecord files into new ones, in one uniformly random order, in bounded memory.

  python shuffle_records.py --input_file='old/train-*.tfrecord' \
      --output_file=new/train-0.tfrecord,new/train-1.tfrecord

For pre-training records written in another order than `create_pretraining_data.py` writes them
now (for example by an earlier version of this package, document by document), which makes
`run_pretraining.py` learn slower. The records are copied byte for byte; each output holds a
uniformly random sample of them, in random order. The work files take about the size of the
records, beside the first output when it is local, else in the system's temporary folder.
"""

from absl import flags

from official_bert.cli.launch import launch
from official_bert.pretraining import shuffle
from official_bert.pretraining.shuffle_records import shuffle_records

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("input_file", None,
                      "Input TFRecord file(s), plain or GZIP: comma-separated files or globs.")
  flags.DEFINE_string("output_file", None,
                      "Output TFRecord file(s), comma-separated; the records go to them "
                      "round-robin.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed; the same seed gives the same files.")
  flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecord files.")
  flags.DEFINE_float("bucket_size_mb", shuffle.DEFAULT_BUCKET_BYTES / 2**20,
                     "MiB of records per bucket; the tool holds one bucket in memory at a time.")


def main():
  if FLAGS.bucket_size_mb <= 0:
    raise ValueError(f"--bucket_size_mb must be positive, got {FLAGS.bucket_size_mb}")
  count = shuffle_records(FLAGS.input_file, FLAGS.output_file, random_seed=FLAGS.random_seed,
                          gzip=FLAGS.gzip, bucket_bytes=max(1, int(FLAGS.bucket_size_mb * 2**20)))
  print(f"Wrote {count} records to {FLAGS.output_file} in random order.")


def run():
  """The `bert-shuffle-records` command (and `python shuffle_records.py`)."""
  define_flags()
  launch(main, ["input_file", "output_file"], inputs=["input_file"], outputs=["output_file"])


if __name__ == "__main__":
  run()
