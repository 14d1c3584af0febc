"""`run_pretraining.py` with the original flags, and the engine flags every script shares."""

import json
import os
import shutil
import sys

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertEncoder
from official_bert.checkpoints import load_encoder
from official_bert.cli import engine_flags
from official_bert.tasks import driver
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ExperimentConfig, PretrainingConfig
from official_bert.tasks.pretraining import PretrainingTask

from testing import (
  REPOSITORY,
  assert_no_scheme_folders,
  engine_configs,
  file_uri,
  make_records,
  read_eval_results,
  run_python,
  shared_data,
  write_full_records,
  write_synthetic_corpus,
)

EVAL_KEYS = {"global_step", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
             "next_sentence_loss"}


def _run_pretraining(tmp_path, output_dir, num_train_steps):
  """The original README's `run_pretraining.py` command on the files of `_readme_run`, with
  `--num_train_steps`; returns its log."""
  # Every path a file:// URL, as gs:// ones would be given.
  command = [
      sys.executable, os.path.join(REPOSITORY, "run_pretraining.py"),
      f"--input_file={file_uri(tmp_path / 'tf_examples.tfrecord')}",
      f"--output_dir={file_uri(output_dir)}", "--do_train=True", "--do_eval=True",
      f"--bert_config_file={file_uri(tmp_path / 'bert_config.json')}",
      "--train_batch_size=32", "--max_seq_length=32",
      "--max_predictions_per_seq=5", f"--num_train_steps={num_train_steps}",
      "--num_warmup_steps=2", "--learning_rate=2e-5", "--save_checkpoints_steps=2",
      "--iterations_per_loop=2", f"--vocab_file={file_uri(tmp_path / 'vocab.txt')}",
      "--enable_xla=false"]
  result = run_python(command, timeout=300, cwd=REPOSITORY)
  assert result.returncode == 0, result.stderr[-5000:]
  return result.stderr


@pytest.fixture(name="readme_run", scope="module")
def fixture_readme_run(tmp_path_factory):
  """The README command run once, 4 steps of a tiny model on a generated corpus: its folder, log,
  eval results and vocabulary size."""
  tmp_path = tmp_path_factory.mktemp("pretraining")
  corpus, vocab, vocab_size = write_synthetic_corpus(str(tmp_path), num_documents=30)
  make_records(corpus, vocab, str(tmp_path / "tf_examples.tfrecord"))
  (tmp_path / "bert_config.json").write_text(json.dumps({
      "vocab_size": vocab_size, "hidden_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
      "hidden_act": "gelu", "type_vocab_size": 2, "initializer_range": 0.02,
      "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}))
  output_dir = tmp_path / "pretraining_output"
  log = _run_pretraining(tmp_path, output_dir, num_train_steps=4)
  return dict(root=tmp_path, output_dir=output_dir, log=log, vocab_size=vocab_size,
              results=read_eval_results(output_dir / "eval_results.txt"))


def test_the_original_readme_command_trains_evaluates_and_exports(readme_run):
  output_dir = readme_run["output_dir"]
  assert "step 4/4" in readme_run["log"]
  results = readme_run["results"]
  assert EVAL_KEYS <= set(results) and results["global_step"] == 4
  assert 0 <= results["masked_lm_accuracy"] <= 1 and results["masked_lm_loss"] > 0
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-4")
  encoder = load_encoder(str(output_dir / "pretrained"))
  assert encoder.config.vocab_size == readme_run["vocab_size"]
  assert ((output_dir / "pretrained" / "vocab.txt").read_text()
          == (readme_run["root"] / "vocab.txt").read_text())
  assert_no_scheme_folders(readme_run["root"])


@pytest.mark.slow
def test_the_same_command_further_resumes(readme_run, tmp_path):
  output_dir = tmp_path / "pretraining_output"  # a copy: the first run's folder stays as it was
  shutil.copytree(readme_run["output_dir"], output_dir)
  log = _run_pretraining(readme_run["root"], output_dir, num_train_steps=6)
  assert "Restored" in log and "ckpt-4" in log and "step 6/6" in log and "step 2/" not in log
  assert read_eval_results(output_dir / "eval_results.txt")["global_step"] == 6
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-6")
  assert load_encoder(str(output_dir / "pretrained")).config.vocab_size == readme_run[
      "vocab_size"]
  assert_no_scheme_folders(tmp_path)


def test_engine_and_tpu_flags_map_to_the_engine_config():
  values = flags.FlagValues()
  engine_flags.define_engine_flags(values)
  engine_flags.define_tpu_flags(values)
  values(["prog", "--iterations_per_loop=7", "--dtype=bfloat16", "--use_tpu=True",
          "--tpu_name=my-tpu", "--tpu_zone=us-central1-b", "--clip_norm=0"])
  runtime = engine_flags.runtime_config_from_flags(values)
  trainer = engine_flags.trainer_config_from_flags(values, save_checkpoints_steps=50,
                                                   optimizer={"learning_rate": 1e-4})
  assert trainer.steps_per_loop == 7 and runtime.dtype == "bfloat16"
  assert (runtime.distribution_strategy, runtime.tpu, runtime.tpu_zone) == ("tpu", "my-tpu",
                                                                            "us-central1-b")
  assert trainer.save_checkpoints_steps == 50 and trainer.optimizer.clip_norm is None
  assert runtime.enable_xla is None and trainer.optimizer.type == "adamw"
  assert trainer.optimizer.weight_decay == 0.01 and trainer.optimizer.learning_rate == 1e-4


@pytest.mark.slow
def test_init_checkpoint_takes_an_original_tf1_checkpoint(tmp_path):
  original_dir = shared_data("checkpoints/tf1_tiny_random")  # hidden 4, vocab 15, 16 positions
  records = write_full_records(str(tmp_path / "records.tfrecord"), 32, vocab_size=15,
                               seq_length=16)
  task = PretrainingTask(
      PretrainingConfig(input_file=records, vocab_file=str(original_dir / "vocab.txt"),
                        max_seq_length=16, max_predictions_per_seq=5),
      BertConfig.from_json_file(original_dir / "bert_config.json"))
  config = ExperimentConfig(
      output_dir=str(tmp_path / "out"), init_checkpoint=str(original_dir / "bert_model.ckpt"),
      **engine_configs(train_batch_size=8, learning_rate=1e-5, num_train_steps=2,
                       num_warmup_steps=0, enable_xla=False, steps_per_loop=1, log_steps=1))
  results = driver.run(task, config, Modes(train=True, eval=True))
  assert results["global_step"] == 2 and np.isfinite(results["masked_lm_loss"])
  original = load_encoder(str(original_dir / "bert_model.ckpt"))
  trained = load_encoder(str(tmp_path / "out" / "pretrained"))
  fresh = BertEncoder(original.config)
  # Two Adam steps at 1e-5 move each weight by at most 2e-5 from the checkpoint's values.
  for start, end, _new in zip(original.trainable_weights, trained.trainable_weights,
                              fresh.trainable_weights):
    np.testing.assert_allclose(end.numpy(), start.numpy(), atol=1e-4, err_msg=start.path)
  assert max(np.abs(n.numpy() - s.numpy()).max()
             for s, n in zip(original.trainable_weights, fresh.trainable_weights)) > 1e-2
