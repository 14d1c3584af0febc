"""Interrupted runs and damaged files: the data tools and the engine recover, or say where.

The cases, each with a real interruption or a really damaged file:

1. `create_pretraining_data.py` killed with SIGKILL: its worker processes exit with it within
   seconds, and the next run for the same output removes the partial output and the piece
   folder it left (named after the output, the host and the dead process), saying so.
2. `create_pretraining_data.py` sent SIGTERM: it stops within seconds with a non-zero status and a
   one-line message, its workers gone, no partial output left.
3. A truncated newest checkpoint (`.data` cut short, or its `.index` lost): the restart names
   the file in a warning and resumes from the checkpoint before it, and training goes on from
   there; when no checkpoint can be read, the error names the files instead of starting again.
4. A truncated TFRecord given to pre-training: the error names the file (TensorFlow's names none).
5. A byte that is not UTF-8 at line 20 or line 701 of a text file is reported at that line, not
   where the decoder's read-ahead buffer began.
"""

import json
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from official_bert.cli.launch import is_user_error
from official_bert.data import classifier_data
from official_bert.pretraining import corpus as corpus_lib
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.tasks.experiment import ExperimentConfig
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training.checkpointing import UnreadableCheckpointError

from testing import (
  REPOSITORY,
  engine_configs,
  make_trainer,
  pretraining_dataset_fn,
  run_task,
  tiny_bert_config,
  tiny_engine,
  write_corpus,
  write_full_records,
  write_vocab,
)

# One layer: what these tests check (files, messages, restored steps) does not depend on depth,
# and each layer adds to the time TensorFlow takes to trace the model.
CONFIG = tiny_bert_config(50, hidden_size=32, num_hidden_layers=1, max_position_embeddings=32,
                          dropout=0.0)

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"),
                                reason="finds child processes through /proc (Linux)")


# === 1, 2: create_pretraining_data.py interrupted ===

def _stat(pid):
  """`(state, parent pid)` of a process from /proc, or None when it does not exist."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except (OSError, IndexError):
    return None
  return fields[0], int(fields[1])


def _children(pid):
  return [int(entry) for entry in os.listdir("/proc")
          if entry.isdigit() and (_stat(entry) or (None, None))[1] == pid]


def _running(pid):
  stat = _stat(pid)
  return stat is not None and stat[0] != "Z"  # a zombie has exited, unreaped by an init


def _wait_until(condition, timeout):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if condition():
      return True
    time.sleep(0.1)
  return condition()


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
  """About 10 MB of text: far more than the run does before the test interrupts it."""
  folder = tmp_path_factory.mktemp("big")
  small = pathlib.Path(write_corpus(folder / "small.txt", num_docs=100))
  path = folder / "big.txt"
  path.write_bytes(small.read_bytes() * 200)
  return str(path), write_vocab(folder / "vocab.txt"), str(small)


def _start_with_a_ready_worker(big_corpus, output, log_path, dupe_factor=10):
  """Starts the script with one worker; returns the process once the worker is ready."""
  corpus, vocab, _ = big_corpus
  with open(log_path, "w", encoding="utf-8") as log:
    process = subprocess.Popen(
        [sys.executable, str(REPOSITORY / "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--output_file={output}", f"--vocab_file={vocab}", "--max_seq_length=64",
         f"--dupe_factor={dupe_factor}", "--num_workers=2", "--shard_size_mb=0.1"],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  partial = f"{output}.incomplete-{socket.gethostname()}-{process.pid}"

  def ready():
    assert process.poll() is None, log_path.read_text()[-3000:]
    return "is ready." in log_path.read_text() and os.path.exists(partial)

  try:
    assert _wait_until(ready, timeout=180), log_path.read_text()[-3000:]
  except BaseException:
    process.kill()
    process.wait()
    raise
  workers = [int(pid) for pid in re.search(r"Started 1 worker processes: ([\d, ]+)\.",
                                           log_path.read_text()).group(1).split(",")]
  assert set(workers) <= set(_children(process.pid))
  return process, partial


@needs_proc
@pytest.mark.slow
def test_a_killed_run_takes_its_workers_along_and_the_next_run_clears_its_debris(
    tmp_path, big_corpus, caplog):
  out = tmp_path / "out"
  out.mkdir()
  output = out / "train.tfrecord"
  process, partial = _start_with_a_ready_worker(big_corpus, output, tmp_path / "log.txt")
  children = _children(process.pid)  # the worker and multiprocessing's resource tracker
  process.kill()
  process.wait()
  assert _wait_until(lambda: not any(map(_running, children)), timeout=10), [
      (pid, _stat(pid)) for pid in children if _running(pid)]
  pieces = out / f".train.tfrecord.pieces-{socket.gethostname()}-{process.pid}"
  assert sorted(os.listdir(out)) == sorted([os.path.basename(partial), pieces.name])

  with caplog.at_level(logging.WARNING):
    stats = create_pretraining_data(big_corpus[2], str(output), big_corpus[1], num_workers=1,
                                    options=InstanceOptions(max_seq_length=64, dupe_factor=1))
  assert stats.instances > 0
  assert os.listdir(out) == ["train.tfrecord"]
  removed = [r.getMessage() for r in caplog.records
             if "left by an interrupted run" in r.getMessage()]
  assert len(removed) == 2 and all(str(process.pid) in message for message in removed)


@needs_proc
@pytest.mark.slow
def test_sigterm_stops_the_run_within_seconds_and_leaves_nothing(tmp_path, big_corpus):
  out = tmp_path / "out"
  out.mkdir()
  log_path = tmp_path / "log.txt"
  # With --dupe_factor=40 the whole run takes about a minute on a quiet machine, far longer than
  # the stop may take even on a busy one.
  process, _ = _start_with_a_ready_worker(big_corpus, out / "train.tfrecord", log_path,
                                          dupe_factor=40)
  children = _children(process.pid)
  start = time.monotonic()
  process.send_signal(signal.SIGTERM)
  try:
    status = process.wait(timeout=120)
  finally:
    process.kill()
  elapsed = time.monotonic() - start
  log = log_path.read_text()
  assert status == 128 + signal.SIGTERM, log[-3000:]
  assert "stopped by SIGTERM" in log
  assert elapsed < 10, log[-3000:]
  assert not os.listdir(out)
  assert _wait_until(lambda: not any(map(_running, children)), timeout=5)


def test_debris_of_a_live_process_or_another_host_is_left_alone(tmp_path, caplog):
  folder = tmp_path / "out"
  folder.mkdir()
  host = socket.gethostname()
  live = folder / f"train.tfrecord.incomplete-{host}-{os.getppid()}"
  elsewhere = folder / "train.tfrecord.incomplete-another-host-1"
  other_output = folder / f"other.tfrecord.incomplete-{host}-999999999"
  for path in (live, elsewhere, other_output):
    path.write_bytes(b"partial")
  corpus, vocab = write_corpus(tmp_path / "a.txt", num_docs=10), write_vocab(tmp_path / "v.txt")
  with caplog.at_level(logging.WARNING):
    create_pretraining_data(corpus, str(folder / "train.tfrecord"), vocab, num_workers=1,
                            options=InstanceOptions(max_seq_length=64, dupe_factor=1))
  assert sorted(os.listdir(folder)) == sorted(
      ["train.tfrecord", live.name, elsewhere.name, other_output.name])
  assert any("still runs" in r.getMessage() and str(live) in r.getMessage()
             for r in caplog.records)


# === 3: a damaged newest checkpoint ===

def _trainer(model_dir):
  return make_trainer(model_dir, CONFIG,
                      tiny_engine(save_checkpoints_steps=2, steps_per_loop=2), num_steps=6)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """Records and a run folder with the checkpoints of steps 2, 4 and 6."""
  folder = tmp_path_factory.mktemp("trained")
  records = write_full_records(str(folder / "records.tfrecord"), 64, vocab_size=50)
  _trainer(folder / "run").train(pretraining_dataset_fn(records, 8), 6)
  return records, folder / "run"


@pytest.fixture
def model_dir(trained, tmp_path):
  """A copy of the trained run's folder, to damage."""
  copy = tmp_path / "run"
  shutil.copytree(trained[1], copy)
  # The `checkpoint` file lists the checkpoints by absolute path.
  state = (copy / "checkpoint").read_text().replace(str(trained[1]), str(copy))
  (copy / "checkpoint").write_text(state)
  assert tf.train.get_checkpoint_state(str(copy)).all_model_checkpoint_paths[-1] == str(
      copy / "ckpt-6")
  return copy


def _truncate(path):
  """Cuts a file short inside a record's data (records often have the same size)."""
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2 + 40])


@pytest.mark.slow  # a resumed training run; the fallback alone is checked by the next test
def test_a_truncated_newest_checkpoint_falls_back_to_the_one_before(trained, model_dir, caplog):
  (data,) = model_dir.glob("ckpt-6.data-*")
  _truncate(data)
  resumed = _trainer(model_dir)
  with caplog.at_level(logging.WARNING):
    assert resumed.restore() == 4
  assert any(str(data) in r.getMessage() and "ckpt-4" not in r.getMessage()
             for r in caplog.records if r.levelno == logging.WARNING)
  assert resumed.restored_checkpoint.endswith("ckpt-4")

  resumed.train(pretraining_dataset_fn(trained[0], 8), 6)  # from step 4, writing a readable ckpt-6
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    assert _trainer(model_dir).restore() == 6
  assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_lost_index_is_named_and_not_a_silent_fresh_start(model_dir, caplog):
  os.remove(model_dir / "ckpt-6.index")
  with caplog.at_level(logging.WARNING):
    assert _trainer(model_dir).restore() == 4
  assert any(f"{model_dir / 'ckpt-6'}.index" in r.getMessage() for r in caplog.records)


def test_no_readable_checkpoint_is_an_error_naming_the_files(model_dir):
  damaged = sorted(model_dir.glob("ckpt-*.data-*"))
  for path in damaged:
    _truncate(path)
  with pytest.raises(UnreadableCheckpointError) as raised:
    _trainer(model_dir).restore()
  assert all(str(path) in str(raised.value) for path in damaged) and len(damaged) == 3
  assert is_user_error(raised.value)  # the tools print it as one line, with exit status 2


# === 4: a truncated TFRecord ===

def test_a_truncated_pretraining_record_file_is_named(tmp_path):
  good = write_full_records(str(tmp_path / "good.tfrecord"), 16, vocab_size=50)
  damaged = tmp_path / "damaged.tfrecord"
  write_full_records(str(damaged), 64, vocab_size=50, seed=1)
  _truncate(damaged)
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(CONFIG.to_dict()))
  run_config = ExperimentConfig(
      output_dir=str(tmp_path / "out"),
      **engine_configs(train_batch_size=8, num_train_steps=4, num_warmup_steps=0,
                       enable_xla=False, steps_per_loop=2, log_steps=2))
  for mode in ("do_train", "do_eval"):
    with pytest.raises(tf.errors.DataLossError, match=re.escape(
        f"{damaged}: the TFRecord file is damaged (truncated record at")) as raised:
      run_task(PretrainingTask, config=run_config, bert_config_file=str(config),
               input_file=f"{good},{damaged}", max_seq_length=32, max_predictions_per_seq=5,
               **{mode: True})
    assert is_user_error(raised.value)  # the tools print it as one line, with exit status 2


# === 5: the line of a byte that is not UTF-8 ===

def _lines_with_bad_bytes(bad_lines, count=1000):
  lines = [f"line {n}\tword{n % 7} text of some length\t{n % 2}".encode()
           for n in range(1, count + 1)]
  for n in bad_lines:
    lines[n - 1] = lines[n - 1].replace(b"text", b"t\xffxt")
  return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("bad_line", [20, 701])
def test_a_tsv_file_with_a_bad_byte_is_reported_at_its_line(tmp_path, bad_line, caplog):
  # The decoder reads ahead of the csv reader: the line must come from the bytes themselves.
  path = tmp_path / "train.tsv"
  path.write_bytes(_lines_with_bad_bytes([bad_line]))
  with caplog.at_level(logging.WARNING):
    rows = list(classifier_data.read_rows(str(path)))
  assert len(rows) == 1000
  assert f"{path}: dropped 1 byte(s) that are not UTF-8 on 1 line(s) (line {bad_line})" in (
      caplog.text)


def test_pretraining_text_reports_each_bad_line(tmp_path):
  path = tmp_path / "corpus.txt"
  path.write_bytes(_lines_with_bad_bytes([20, 701]))
  messages = [message for shard in corpus_lib.read_shards([str(path)], 3000)
              for message in corpus_lib.decode_shard(shard).undecodable]
  assert [m.split(": ")[0] for m in messages] == [f"{path}:20", f"{path}:701"]
  assert np.all([str(path) in m for m in messages])
