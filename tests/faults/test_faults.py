"""The reliability promise: a fault stops the run with a clear message, never a silent wrong result.

Each test is a fault that once passed unnoticed, run for real (tiny models, real files, a second
process where the fault needs one):

The run itself
  1. an output folder made for another run (another task, new training rows, another sequence
     length) is refused, listing the differences; the same command resumes;
     `overwrite_output_dir` starts afresh;
  2. two runs in one output folder: the second stops at once naming the holder; a dead holder's
     lock is taken over; the lock is released when a run fails;
  3. a `bert_config.json` missing a field, or with an unknown key, is refused (the released files'
     extra keys are ignored with a warning);
  4. a SQuAD training answer that is not at its `answer_start` is skipped and reported by question
     id (or stops the run), instead of training towards another span;
  5. a SQuAD v2.0 file read as v1.1 is refused;
  6. a training checkpoint given as `init_checkpoint` is refused before any work, saying how to
     resume or start from it;
  7. the tools print a user's error as one line on stderr with exit status 2 (the traceback with
     `--verbose`), and keep the traceback of a bug.
"""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, BertEncoder, get_preset
from official_bert.checkpoints import check_init_checkpoint, save_model_dir
from official_bert.cli import launch
from official_bert.common.errors import UserError
from official_bert.configs import REQUIRED_FIELDS
from official_bert.data import squad, synthetic
from official_bert.tasks import base, classification, driver, output_folder
from official_bert.tasks.experiment import ClassificationConfig, ExperimentConfig

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  engine_configs,
  run_python,
  run_task,
  shared_data,
  tiny_bert_config,
)

ENGINE = dict(enable_xla=False, seed=0, steps_per_loop=10, log_steps=10)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """An SST-2 folder (48 rows), an MRPC folder (48 pairs) and a 1-layer model's files (what the
  tests check does not depend on depth; each layer adds to the time TensorFlow traces)."""
  directory = tmp_path_factory.mktemp("tiny")
  sst2 = directory / "SST-2"
  synthetic.write_sentiment_task(str(sst2), num_train=48, num_dev=16, seed=3)
  rows = [line.split("\t") for line in (sst2 / "train.tsv").read_text().splitlines()[1:]]
  mrpc = directory / "MRPC"
  mrpc.mkdir()
  (mrpc / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
      f"{label}\t{i}\t{i + 1}\t{sentence}\t{sentence}\n" for i, (sentence, label) in
      enumerate(rows)))
  words = sorted({word for sentence, _ in rows for word in sentence.split()})
  vocab = directory / "vocab.txt"
  vocab.write_text("\n".join(SPECIAL_TOKENS + words) + "\n")
  config = directory / "bert_config.json"
  tiny_bert_config(len(SPECIAL_TOKENS) + len(words), hidden_size=32, num_hidden_layers=1,
                   max_position_embeddings=32).to_json_file(config)
  return {"sst2": sst2, "mrpc": mrpc, "vocab": str(vocab), "config": str(config),
          "directory": directory}


def _classify(tiny, output_dir, task_name="SST-2", max_seq_length=16, do_train=True, **config):
  return run_task(classification.ClassificationTask,
                  config=ExperimentConfig(output_dir=str(output_dir),
                                          **engine_configs(train_batch_size=16,
                                                           learning_rate=1e-3,
                                                           num_train_epochs=1.0, **ENGINE),
                                          **config),
                  bert_config_file=tiny["config"], vocab_file=tiny["vocab"], task_name=task_name,
                  data_dir=str(tiny["sst2" if task_name == "SST-2" else "mrpc"]),
                  max_seq_length=max_seq_length, do_train=do_train, do_eval=not do_train)


# === The output folder ===


@pytest.mark.slow  # five training runs of the driver on one folder
def test_a_folder_made_for_another_run_is_refused_and_the_same_run_resumes(tiny, tmp_path):
  output_dir = tmp_path / "out"
  _classify(tiny, output_dir)
  weights = (output_dir / "model.weights.h5").read_bytes()
  recorded = json.loads((output_dir / output_folder.FINGERPRINT_NAME).read_text())
  assert recorded["training"]["task"] == "SST-2"
  assert recorded["training"]["data_files"][0]["bytes"] == os.path.getsize(
      tiny["sst2"] / "train.tsv")

  with pytest.raises(output_folder.OutputDirMismatchError,
                     match=r"training.task: 'SST-2' then, 'MRPC' now.*--overwrite_output_dir"):
    _classify(tiny, output_dir, task_name="MRPC")
  assert (output_dir / "model.weights.h5").read_bytes() == weights  # nothing was overwritten
  with pytest.raises(output_folder.OutputDirMismatchError, match="model.max_seq_length: 16 then, "
                     "24 now"):
    _classify(tiny, output_dir, max_seq_length=24, do_train=False)  # evaluating checks the model

  # The same command resumes at its last step (48 / 16 = 3); new training rows are another run.
  _classify(tiny, output_dir)
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-3")
  more_rows = tmp_path / "SST-2-more"
  more_rows.mkdir()
  train = (tiny["sst2"] / "train.tsv").read_text()
  (more_rows / "train.tsv").write_text(train + "".join(train.splitlines(True)[1:17]))
  with pytest.raises(output_folder.OutputDirMismatchError,
                     match=r"training.data_files: .*train.tsv \(\d+ bytes, sha256 \w+\) then"):
    _classify(dict(tiny, sst2=more_rows), output_dir)

  # overwrite_output_dir clears the folder and trains afresh on the new rows: 64 / 16 = 4 steps.
  _classify(dict(tiny, sst2=more_rows), output_dir, overwrite_output_dir=True)
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-4")
  assert not tf.io.gfile.glob(str(output_dir / "ckpt-3*"))  # the old run's checkpoints are gone
  recorded = json.loads((output_dir / output_folder.FINGERPRINT_NAME).read_text())
  assert recorded["training"]["data_files"][0]["file"] == str(more_rows / "train.tsv")


def test_overwrite_needs_training_and_keeps_inputs_inside_the_folder(tiny, tmp_path):
  with pytest.raises(UserError, match="overwrite_output_dir starts a fresh training run"):
    _classify(tiny, tmp_path / "out", do_train=False, overwrite_output_dir=True)
  output_folder.check_fingerprint(tmp_path, {"model": {}, "training": {}}, train=True)
  with pytest.raises(UserError, match="holds this run's input"):
    output_folder.clear(tmp_path, [str(tmp_path / "data" / "train.tsv")])
  assert (tmp_path / output_folder.FINGERPRINT_NAME).exists()


def _dead_pid():
  process = subprocess.Popen([sys.executable, "-c", "pass"])
  process.wait()
  return process.pid


def test_the_lock_names_its_holder_takes_over_a_dead_one_and_is_released_on_error(tmp_path,
                                                                                  caplog):
  with output_folder.OutputDirLock(tmp_path):
    with pytest.raises(output_folder.OutputDirInUseError, match=f"process {os.getpid()} on "):
      output_folder.OutputDirLock(tmp_path).acquire()
  assert not (tmp_path / output_folder.LOCK_NAME).exists()

  lock_file = tmp_path / output_folder.LOCK_NAME
  lock_file.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid()}))
  with caplog.at_level(logging.WARNING), output_folder.OutputDirLock(tmp_path) as lock:
    assert json.loads(lock_file.read_text())["token"] == lock.holder["token"]
  assert "no longer runs" in caplog.text and not lock_file.exists()
  lock_file.write_text(json.dumps({"host": "another-host", "pid": 1}))
  with pytest.raises(output_folder.OutputDirInUseError, match="process 1 on another-host"):
    output_folder.OutputDirLock(tmp_path).acquire()
  lock_file.unlink()

  class FailingTask(classification.ClassificationTask):
    def build_inputs(self, split, output_dir, seed=None):
      assert lock_file.exists()  # held while the run works
      raise RuntimeError("the input pipeline broke")

  config = BertConfig.from_json_file(_small_config_file(tmp_path))
  data = tmp_path / "data"
  synthetic.write_sentiment_task(str(data), num_train=32, num_dev=1)
  with pytest.raises(RuntimeError, match="input pipeline broke"):
    driver.run(FailingTask(ClassificationConfig(task_name="SST-2", data_dir=str(data),
                                                max_seq_length=8), config),
               ExperimentConfig(output_dir=str(tmp_path),
                                **engine_configs(train_batch_size=16, **ENGINE)),
               base.Modes(train=True))
  assert not lock_file.exists()


def _small_config_file(folder, **changes):
  path = os.path.join(folder, "small_config.json")
  values = dict(tiny_bert_config(40, num_hidden_layers=1, max_position_embeddings=16).to_dict(),
                **changes)
  with open(path, "w", encoding="utf-8") as f:
    json.dump({key: value for key, value in values.items() if value is not None}, f)
  return path


def _classifier_command(tiny, output_dir, *extra):
  return [sys.executable, os.path.join(REPOSITORY, "run_classifier.py"), "--task_name=SST-2",
          f"--data_dir={tiny['sst2']}", f"--vocab_file={tiny['vocab']}",
          f"--bert_config_file={tiny['config']}", f"--output_dir={output_dir}",
          "--max_seq_length=16", "--train_batch_size=16", "--enable_xla=false", "--do_train",
          *extra]


@pytest.mark.slow
def test_a_second_process_on_the_same_folder_stops_at_once_naming_the_holder(tiny, tmp_path):
  output_dir = tmp_path / "out"
  lock_file = output_dir / output_folder.LOCK_NAME
  holder = subprocess.Popen(_classifier_command(tiny, output_dir, "--num_train_epochs=2000"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 180
    while not lock_file.exists() and holder.poll() is None and time.time() < deadline:
      time.sleep(0.5)
    assert lock_file.exists(), "the first run never took the lock"
    second = run_python(_classifier_command(tiny, output_dir, "--num_train_epochs=1"), timeout=300)
    assert holder.poll() is None  # the first run is still training
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert second.returncode == launch.USER_ERROR_STATUS, second.stderr[-3000:]
  last_line = second.stderr.strip().splitlines()[-1]
  assert last_line.startswith("error: ") and f"in use by another run (process {holder.pid}" \
      in last_line
  assert "Traceback" not in second.stderr and not (output_dir / "model.json").exists()
  # The killed run left its lock; the next run on this host takes it over.
  assert json.loads(lock_file.read_text())["pid"] == holder.pid
  with output_folder.OutputDirLock(output_dir):
    pass
  assert not lock_file.exists()


def test_a_tfds_data_set_that_cannot_be_downloaded_is_one_line_at_once(tiny, tmp_path):
  # A proxy on a closed port stands for a machine without a network, whatever the test machine
  # has: TFDS itself would retry for minutes, then raise a `requests` traceback.
  env = dict(os.environ, HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
  command = [arg for arg in _classifier_command(tiny, tmp_path / "out")
             if not arg.startswith(("--task_name", "--data_dir"))]
  command += ["--tfds_name=glue/sst2", f"--data_dir={tmp_path / 'tfds'}"]
  started = time.time()
  result = run_python(command, env=env, timeout=300)
  assert result.returncode == 2, result.stderr[-3000:]
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(f"error: TFDS glue/sst2 is not in {tmp_path / 'tfds'}")
  assert "dl.fbaipublicfiles.com is not reachable" in last_line and "tfds build" in last_line
  assert "Traceback" not in result.stderr
  assert time.time() - started < 120  # seconds, not TFDS' minutes of retries
  # Nothing is left that looks like a prepared data set or a started run.
  assert not (tmp_path / "out" / "model.json").exists()
  assert not list((tmp_path / "tfds").rglob("dataset_info.json"))


# === Configs ===


def test_a_config_file_must_give_every_field_and_only_known_keys(tmp_path, caplog):
  missing = _small_config_file(tmp_path, hidden_act=None, type_vocab_size=None)
  with pytest.raises(UserError, match=r"small_config.json: the required field\(s\) hidden_act, "
                     "type_vocab_size are missing"):
    BertConfig.from_json_file(missing)
  misspelt = _small_config_file(tmp_path, num_hiden_layers=4)
  with pytest.raises(UserError, match="unknown field.*num_hiden_layers.*allow_unknown_config"):
    BertConfig.from_json_file(misspelt)
  with caplog.at_level(logging.WARNING):
    config = BertConfig.from_json_file(misspelt, allow_unknown_keys=True)
    released = BertConfig.from_json_file(_small_config_file(
        tmp_path, directionality="bidi", pooler_type="first_token_transform", pooler_fc_size=16,
        pooler_num_attention_heads=2, pooler_num_fc_layers=3, pooler_size_per_head=8))
  assert config.num_hidden_layers == 1 and released == config
  assert "ignoring the field(s) num_hiden_layers" in caplog.text
  assert "ignoring the field(s) directionality, pooler_fc_size" in caplog.text


def test_the_config_of_a_model_folder_this_package_writes_loads(tmp_path):
  encoder = BertEncoder(get_preset("bert_tiny"))
  save_model_dir(encoder, tmp_path / "model")
  assert BertConfig.from_json_file(tmp_path / "model" / "bert_config.json") == encoder.config


def test_a_released_config_with_the_pooler_keys_loads():
  released = shared_data("checkpoints/tf1_tiny_random/bert_config.json")
  assert BertConfig.from_json_file(released).hidden_size == 4


# === SQuAD ===


def _squad_file(path, answers, version=None, is_impossible=None):
  """One paragraph, one question per `(id, text, answer_start)`."""
  context = "The cat sat on the mat (1895-1943). It slept."
  questions = []
  for qas_id, text, start in answers:
    qa = {"id": qas_id, "question": "What?", "answers": [{"text": text, "answer_start": start}]}
    if is_impossible is not None:
      qa["is_impossible"] = is_impossible
    questions.append(qa)
  data = {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": questions}]}]}
  if version:
    data["version"] = version
  path.write_text(json.dumps(data))
  return str(path)


def test_a_training_answer_not_at_its_answer_start_is_reported_not_kept(tmp_path, caplog):
  # "sat on" starts at 8; at 7 (the space before it) the original's token check still finds it in
  # "cat sat on" and would train towards that span.
  path = _squad_file(tmp_path / "train.json",
                     [("good", "sat on", 8), ("shifted", "sat on", 7), ("in_word", "1895", 24)])
  with caplog.at_level(logging.WARNING):
    examples, skipped = squad.read_squad_examples(path, is_training=True)
  assert [example.qas_id for example in examples] == ["good", "in_word"] and skipped == ["shifted"]
  assert examples[0].doc_tokens[examples[0].start_position] == "sat"
  assert "1 training answer(s) are not at their answer_start (question ids shifted)" in caplog.text
  with pytest.raises(squad.SquadFormatError, match=r"train.json: 1 training answer.*shifted.*"
                     "--bad_answer_policy=skip"):
    squad.read_squad_examples(path, is_training=True, bad_answer_policy="error")


def test_a_squad_file_is_read_as_the_version_it_declares(tmp_path, caplog):
  declared = _squad_file(tmp_path / "declared.json", [("q", "cat", 4)], version="v2.0")
  with pytest.raises(squad.SquadFormatError, match=r'declared.json declares "version": "v2.0".*'
                     "--version_2_with_negative"):
    squad.read_squad_examples(declared, is_training=False)
  flagged = _squad_file(tmp_path / "flagged.json", [("q", "cat", 4)], is_impossible=True)
  with pytest.raises(squad.SquadFormatError, match="has 1 question.s. marked is_impossible"):
    squad.read_squad_examples(flagged, is_training=False)
  assert len(squad.read_squad_examples(flagged, False, version_2_with_negative=True)[0]) == 1
  old = _squad_file(tmp_path / "old.json", [("q", "cat", 4)], version="1.1")
  with caplog.at_level(logging.WARNING):
    squad.read_squad_examples(old, is_training=False, version_2_with_negative=True)
  assert "declares version '1.1' and has no unanswerable question" in caplog.text


# === Checkpoints ===


def test_a_training_checkpoint_as_init_checkpoint_is_refused_before_any_work(tiny, tmp_path):
  # A run killed before its end leaves ckpt-N files and no model folder.
  model = BertClassifier(BertConfig.from_json_file(tiny["config"]), num_classes=2)
  model(model.input)
  run_dir = tmp_path / "killed_run"
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run_dir), 1,
                             checkpoint_name="ckpt").save(checkpoint_number=3)
  for init in (run_dir, run_dir / "ckpt-3"):
    with pytest.raises(UserError, match=r"is a training checkpoint .*ckpt-3.*give its folder as "
                       "output_dir"):
      _classify(tiny, tmp_path / "out", init_checkpoint=str(init))
  assert not (tmp_path / "out").exists()
  with pytest.raises(FileNotFoundError, match="No BERT checkpoint at"):
    check_init_checkpoint(str(tmp_path / "nothing_here"))
  save_model_dir(model, tmp_path / "finished", vocab_file=tiny["vocab"])
  assert check_init_checkpoint(str(tmp_path / "finished")).kind == "keras"


# === The tools ===


def test_errors_of_the_input_and_bugs_are_told_apart():
  with pytest.raises(ValueError) as ours:
    BertConfig(vocab_size=10, hidden_size=30, num_attention_heads=4)
  assert launch.is_user_error(ours.value)
  with pytest.raises(ValueError) as numpy_error:
    np.zeros(2).reshape(3)
  assert not launch.is_user_error(numpy_error.value)
  assert launch.is_user_error(UserError("bad input")) and not launch.is_user_error(KeyError("x"))


@pytest.mark.slow
def test_a_tool_prints_a_users_error_as_one_line_and_exits_2(tiny, tmp_path):
  command = _classifier_command(dict(tiny, config=_small_config_file(tmp_path, hidden_act=None)),
                                tmp_path / "out")
  quiet = run_python(command, timeout=300)
  assert quiet.returncode == 2
  assert quiet.stderr.strip().splitlines()[-1] == (
      f"error: {tmp_path / 'small_config.json'}: the required field(s) hidden_act are missing; "
      "a BERT config gives every one of " + ", ".join(REQUIRED_FIELDS) + ".")
  assert "Traceback" not in quiet.stderr
  verbose = run_python(command + ["--verbose"], timeout=300)
  assert verbose.returncode == 1 and "Traceback" in verbose.stderr
  assert "UserError" in verbose.stderr.strip().splitlines()[-1]
