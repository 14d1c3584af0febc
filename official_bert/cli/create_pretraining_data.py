"""Creates BERT pre-training TFRecords (masked LM and next sentence) from plain text.

The flags, their defaults and the output features are those of the original
`create_pretraining_data.py`; the output feeds its `run_pretraining.py` and ours unchanged. The
input has one sentence per line and a blank line between documents.

    python create_pretraining_data.py --input_file='corpus/*.txt' \
        --output_file=/tmp/pretrain.tfrecord --vocab_file=vocab.txt --dupe_factor=5

Added flags: `--num_workers` (processes; default all cores, fewer for a small corpus), `--gzip`,
`--shard_size_mb` (the corpus is processed in shards of this much text, in bounded memory; random
next sentences still come from the whole corpus, through a pool of segments drawn from it).

With `--runner` (`DirectRunner`, `DataflowRunner`, `FlinkRunner`, `SparkRunner`, `PortableRunner`)
an Apache Beam pipeline writes the same set of records to `<output_file>-SSSSS-of-NNNNN`, and every
flag this tool does not know goes to Beam's pipeline options as Beam spells it (needs
`pip install -e ".[beam]"`):

    python create_pretraining_data.py --input_file='corpus/*.txt' \
        --output_file=/tmp/pretrain/train.tfrecord --vocab_file=vocab.txt \
        --runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing

SIGINT (Ctrl-C) and SIGTERM stop the run within seconds: the workers are terminated, the partial
outputs removed, and the exit status is 128 + the signal number.
"""

import difflib
import os
import signal
import sys

from absl import flags

from official_bert import pretraining
from official_bert.cli.launch import launch
from official_bert.common.errors import UserError

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("input_file", None,
                      "Input text file(s): a comma-separated list of files or glob patterns.")
  flags.DEFINE_string("output_file", None,
                      "Output TFRecord file(s), comma-separated; instances go to them round-robin.")
  flags.DEFINE_string("vocab_file", None, "The vocabulary file the BERT model was trained on.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. True for uncased models.")
  flags.DEFINE_bool("do_whole_word_mask", False,
                    "Whether to mask whole words instead of single WordPieces.")
  flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum number of masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
  flags.DEFINE_integer("dupe_factor", 10,
                       "Number of times to duplicate the input data (with different masks).")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", 0.1,
                     "Probability of creating sequences which are shorter than the maximum length.")
  flags.DEFINE_integer(
      "num_workers", None,
      "Processes working on shards, this one included. Default: all usable CPU cores, but one "
      "per 32 MiB of text times dupe_factor only (a process takes seconds to start).")
  flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecord files.")
  flags.DEFINE_string(
      "runner", None,
      "Write the records with an Apache Beam pipeline on this runner (DirectRunner, "
      "DataflowRunner, FlinkRunner, SparkRunner, PortableRunner) instead of this machine's "
      "processes; the flags this tool does not know go to Beam's pipeline options. Needs "
      "pip install -e \".[beam]\".")
  flags.DEFINE_integer("num_output_shards", 0,
                       "With --runner: the number of output files; 0 chooses one per 128 MiB of "
                       "input text times --dupe_factor.")
  flags.DEFINE_float("shard_size_mb", pretraining.DEFAULT_SHARD_BYTES / 2**20,
                     "MiB of text per shard; memory grows with it. Random next sentences come "
                     "from the whole corpus whatever the shard size.")


class Stopped(BaseException):
  """A stop signal (SIGINT, SIGTERM), raised where the run is so that its clean-up runs.

  It is no `Exception`, as `KeyboardInterrupt` is none, so that no error handler on the way takes
  it for a failure of its own.
  """

  def __init__(self, signum):
    super().__init__(signal.Signals(signum).name)
    self.signum = signum


def _raise_stopped(signum, frame):
  del frame
  raise Stopped(signum)


def main(beam_args=None):
  previous = {signum: signal.signal(signum, _raise_stopped)
              for signum in (signal.SIGINT, signal.SIGTERM)}
  try:
    _create(beam_args)
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)


def _create(beam_args):
  options = pretraining.InstanceOptions(
      max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
      do_whole_word_mask=FLAGS.do_whole_word_mask, dupe_factor=FLAGS.dupe_factor)
  if FLAGS.runner:
    # Beam spells Dataflow's worker count `--num_workers` too; absl took it, so it is passed on.
    workers = [] if FLAGS.num_workers is None else [f"--num_workers={FLAGS.num_workers}"]
    _check_beam_args(beam_args or [])
    _beam_pipeline().create_pretraining_data_beam(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
        [f"--runner={FLAGS.runner}", *workers, *(beam_args or [])],
        do_lower_case=FLAGS.do_lower_case, options=options, random_seed=FLAGS.random_seed,
        gzip=FLAGS.gzip, shard_bytes=max(1, int(FLAGS.shard_size_mb * 2**20)),
        num_shards=FLAGS.num_output_shards)
    return
  pretraining.create_pretraining_data(
      FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
      options=options, random_seed=FLAGS.random_seed, num_workers=FLAGS.num_workers,
      gzip=FLAGS.gzip, shard_bytes=max(1, int(FLAGS.shard_size_mb * 2**20)))


def _beam_pipeline():
  """The Beam pipeline module; a clear error when Apache Beam is not installed."""
  try:
    from official_bert.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
  except ModuleNotFoundError as error:
    if error.name != "apache_beam" and not (error.name or "").startswith("apache_beam."):
      raise
    raise UserError(f"--runner={FLAGS.runner} needs Apache Beam, which is not installed: "
                    'pip install -e ".[beam]" (or pip install "official_bert[beam]")') from None
  return beam_pipeline


def _check_beam_args(beam_args):
  """Refuses, before any work, an argument that is neither this tool's flag nor Beam's option:
  Beam would only log that it discards it, and the records would be written without it."""
  known, unknown = _beam_pipeline().option_names(beam_args)
  if not unknown:
    return
  hints = []
  for name in unknown:
    close = difflib.get_close_matches(name, [*FLAGS, *known], n=1)
    hints.append(f"--{name}" + (f" (did you mean --{close[0]}?)" if close else ""))
  raise UserError(f"unknown flag(s) {', '.join(hints)}: neither this tool's (see --help) nor one "
                  "of Apache Beam's pipeline options")


def _asks_for_runner(argv):
  return any(arg.split("=", 1)[0] == "--runner" for arg in argv[1:])


def run():
  """The `bert-create-pretraining-data` command (and `python create_pretraining_data.py`)."""
  define_flags()
  try:
    launch(main, ["input_file", "output_file", "vocab_file"], inputs=["input_file", "vocab_file"],
           outputs=["output_file"], passes_on=_asks_for_runner)
  except Stopped as stop:
    print(f"create_pretraining_data: stopped by {stop}; the workers were terminated and the "
          "partial outputs removed.", file=sys.stderr)
    sys.stderr.flush()
    os._exit(128 + stop.signum)  # pylint: disable=protected-access
  except SystemExit as done:
    if done.code not in (None, 0):
      raise
    # The outputs are complete and closed. Python's teardown of TensorFlow and Keras is slow
    # beside a small corpus's whole run, and frees nothing the system would not, so the process
    # ends here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access


if __name__ == "__main__":
  run()
