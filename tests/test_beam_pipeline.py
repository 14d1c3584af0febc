"""The Apache Beam path of pre-training data: the local path's records, on Beam's runners."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import feature_spec

from testing import REPOSITORY, SPECIAL_TOKENS, write_vocab

# Each book, and the short documents, use words of their own: a token tells its source.
SOURCES = ["alpha", "bravo", "short"]
WORDS = {source: [f"{source}{i}" for i in range(10)] for source in SOURCES}
OPTIONS = InstanceOptions(max_seq_length=48, dupe_factor=2)
# One worker thread in this process: Beam's FnApiRunner, quick to start.
IN_PROCESS = ["--runner=DirectRunner", "--direct_running_mode=multi_threading",
              "--direct_num_workers=1"]


def beam_pipeline():
  pytest.importorskip("apache_beam", reason='needs the Beam extra: pip install -e ".[beam]"')
  from official_bert.pretraining import beam_pipeline as module
  return module


@pytest.fixture(scope="module")
def books(tmp_path_factory):
  """Two books (one document each, no blank lines) and a file of short documents.

  Returns the files, the vocabulary and the shard size that makes each book a shard of its own.
  """
  folder = tmp_path_factory.mktemp("books")
  rng = np.random.default_rng(0)
  def line(source):
    return " ".join(rng.choice(WORDS[source], rng.integers(4, 12)))
  files = []
  for source in SOURCES[:2]:
    path = folder / f"{source}.txt"
    path.write_text("\n".join(line(source) for _ in range(60)) + "\n")
    files.append(str(path))
  path = folder / "short.txt"
  path.write_text("\n\n".join("\n".join(line("short") for _ in range(rng.integers(1, 4)))
                              for _ in range(80)) + "\n")
  files.append(str(path))
  vocab = folder / "vocab.txt"
  write_vocab(vocab, SPECIAL_TOKENS + [w for s in SOURCES for w in WORDS[s]])
  return files, str(vocab), min(os.path.getsize(f) for f in files[:2])


def records_of(pattern, compression=""):
  """The records of all files matching `pattern`, sorted: their set, whatever their order."""
  files = sorted(tf.io.gfile.glob(pattern))
  return sorted(r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=compression))


def run_both(books, tmp_path, beam_args, gzip=False, **kwargs):
  """Runs the local path and the Beam path on the books; returns their records and stats."""
  files, vocab, shard_bytes = books
  local = str(tmp_path / "local.tfrecord")
  local_stats = create_pretraining_data(files, local, vocab, options=OPTIONS, num_workers=1,
                                        shard_bytes=shard_bytes, gzip=gzip)
  beam_stats = beam_pipeline().create_pretraining_data_beam(
      files, str(tmp_path / "beam" / "train.tfrecord"), vocab, beam_args, options=OPTIONS,
      shard_bytes=shard_bytes, gzip=gzip, **kwargs)
  compression = "GZIP" if gzip else ""
  return (records_of(local, compression), local_stats,
          records_of(str(tmp_path / "beam" / "train.tfrecord-*-of-*"), compression), beam_stats)


def source_of(token_ids):
  return {SOURCES[(i - len(SPECIAL_TOKENS)) // 10] for i in token_ids.tolist()}


def test_records_and_stats_equal_the_local_path(books, tmp_path):
  local, local_stats, records, stats = run_both(books, tmp_path, IN_PROCESS, num_shards=3)
  assert len(local) == local_stats.instances > 100
  assert records == local
  assert stats == local_stats
  assert len(tf.io.gfile.glob(str(tmp_path / "beam" / "train.tfrecord-*-of-00003"))) == 3


def test_random_next_sentences_come_from_the_whole_corpus(books, tmp_path):
  """Each book is a shard of its own: its random next sentences must come from other shards."""
  files, vocab, shard_bytes = books
  output = str(tmp_path / "train.tfrecord")
  stats = beam_pipeline().create_pretraining_data_beam(
      files, output, vocab, IN_PROCESS, options=OPTIONS, shard_bytes=shard_bytes)
  assert stats.documents == 82 and stats.cut_documents == 0
  spec = feature_spec(OPTIONS.max_seq_length, OPTIONS.max_predictions_per_seq)
  random_from_books = 0
  for record in records_of(output + "-*-of-*"):
    example = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
    ids = example["input_ids"].copy()
    real = example["masked_lm_weights"] > 0
    ids[example["masked_lm_positions"][real]] = example["masked_lm_ids"][real]
    first_sep, second_sep = np.flatnonzero(ids[:example["input_mask"].sum()] == 3)
    (a_source,), (b_source,) = source_of(ids[1:first_sep]), source_of(ids[first_sep + 1:second_sep])
    if example["next_sentence_labels"][0] and a_source != "short":
      assert b_source != a_source
      random_from_books += 1
  assert random_from_books > 10


@pytest.mark.slow
def test_two_worker_processes_write_the_local_records(books, tmp_path):
  local, local_stats, records, stats = run_both(
      books, tmp_path, ["--runner=DirectRunner", "--direct_num_workers=2",
                        "--direct_running_mode=multi_processing"], gzip=True)
  assert len(local) == local_stats.instances > 100
  assert records == local
  assert stats == local_stats


def test_a_runner_without_apache_beam_names_the_extra(books, tmp_path):
  files, vocab, _ = books
  # Hides Apache Beam from the tool, whether or not it is installed here.
  code = ("import sys; sys.modules['apache_beam'] = None; "
          "from official_bert.cli import create_pretraining_data as tool; tool.run()")
  done = subprocess.run(
      [sys.executable, "-c", code, f"--input_file={files[0]}",
       f"--output_file={tmp_path / 'out.tfrecord'}", f"--vocab_file={vocab}",
       "--runner=DirectRunner", "--direct_num_workers=2"],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, PYTHONPATH=str(REPOSITORY), TF_CPP_MIN_LOG_LEVEL="3"))
  errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
  assert done.returncode == 2, done.stderr
  assert errors == ['error: --runner=DirectRunner needs Apache Beam, which is not installed: '
                    'pip install -e ".[beam]" (or pip install "official_bert[beam]")']
  assert not list(tmp_path.glob("out.tfrecord*"))


def test_input_without_text_is_a_clear_error_and_leaves_no_file(books, tmp_path):
  _, vocab, _ = books
  blank = tmp_path / "blank.txt"
  blank.write_text("\n\n\n")
  with pytest.raises(ValueError, match="no pre-training instances.*3 lines, 3 blank"):
    beam_pipeline().create_pretraining_data_beam(
        str(blank), str(tmp_path / "out" / "train.tfrecord"), vocab, IN_PROCESS, options=OPTIONS)
  assert not tf.io.gfile.glob(str(tmp_path / "out" / "train.tfrecord*"))


@pytest.mark.slow
def test_the_script_hands_the_flags_it_does_not_know_to_beam(books, tmp_path):
  beam_pipeline()
  files, vocab, shard_bytes = books
  local = str(tmp_path / "local.tfrecord")
  create_pretraining_data(files, local, vocab, options=OPTIONS, num_workers=1,
                          shard_bytes=shard_bytes)
  output = tmp_path / "beam" / "train.tfrecord"
  done = subprocess.run(
      [sys.executable, str(REPOSITORY / "create_pretraining_data.py"),
       f"--input_file={','.join(files)}",
       f"--output_file={output}", f"--vocab_file={vocab}", "--max_seq_length=48",
       "--dupe_factor=2", f"--shard_size_mb={shard_bytes / 2**20}", "--num_output_shards=2",
       "--runner", "DirectRunner", "--direct_running_mode", "multi_threading",
       "--direct_num_workers=1"],
      capture_output=True, text=True, timeout=600,
      env=dict(os.environ, PYTHONPATH=str(REPOSITORY), TF_CPP_MIN_LOG_LEVEL="3"))
  assert done.returncode == 0, done.stderr[-3000:]
  assert sorted(p.name for p in output.parent.iterdir()) == [
      "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
  assert records_of(f"{output}-*-of-*") == records_of(local)
