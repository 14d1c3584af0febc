"""The one config tree of a run: JSON round trip, flags -> tree, fingerprint from the tree, the
written `experiment_config.json` that reproduces its run, and the files and output folders of
earlier versions."""

import dataclasses
import json
import re
import shutil
import sys

import pytest
import tensorflow as tf

from official_bert import BertConfig
from official_bert.common.errors import UserError
from official_bert.data import synthetic
from official_bert.tasks import base, driver, experiment, output_folder
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  TESTS,
  read_eval_results,
  run_python,
  tiny_bert_config,
  write_vocab,
)

MODEL = tiny_bert_config(60, num_hidden_layers=1, max_position_embeddings=32)
TASKS = [
    experiment.TaskConfig(vocab_file="vocab.txt"),
    experiment.ClassificationConfig(task_name="custom", data_dir="data", max_seq_length=64,
                                    custom_options={"text_a_column": "text",
                                                    "label_column": "label"}),
    experiment.NerConfig(data_dir="conll", do_lower_case=False),
    experiment.SwagConfig(train_file="train.csv", eval_file="val.csv"),
    experiment.SquadConfig(train_file="train.json", version_2_with_negative=True),
    experiment.PretrainingConfig(input_file="a.tfrecord,b*.tfrecord", dynamic_masking=True),
    experiment.FeatureExtractionConfig(input_file="in.txt", output_file="out.jsonl",
                                       pooling="mean"),
]


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.kind)
def test_every_task_kind_goes_through_json_and_back_unchanged(task, tmp_path):
  config = experiment.ExperimentConfig(
      task=task, model=MODEL, output_dir=str(tmp_path), init_checkpoint="bert_model.ckpt",
      trainer=TrainerConfig(train_batch_size=12, num_train_steps=7, steps_per_loop=3,
                            optimizer=OptimizerConfig(type="lamb", learning_rate=3e-5,
                                                      beta_2=0.98)),
      runtime=RuntimeConfig(dtype="bfloat16", seed=3))
  path = config.write()
  assert path == str(tmp_path / experiment.CONFIG_NAME)
  assert json.loads((tmp_path / experiment.CONFIG_NAME).read_text())["task"]["kind"] == task.kind
  assert experiment.ExperimentConfig.read(path) == config
  assert experiment.ExperimentConfig.read(tmp_path) == config
  assert type(experiment.ExperimentConfig.read(path).task) is type(task)


def test_experiment_config_needs_an_output_dir():
  with pytest.raises(ValueError, match="output_dir"):
    experiment.ExperimentConfig(output_dir="")


# The trainer and runtime of an experiment_config.json that the package wrote before #42, when the
# learning rate and warmup were the trainer's and the loop and optimizer flags the runtime's.
_EARLIER_TRAINER = {"train_batch_size": 16, "eval_batch_size": 8, "predict_batch_size": 8,
                    "learning_rate": 2e-05, "num_train_epochs": 2.0, "warmup_proportion": 0.2,
                    "num_train_steps": None, "num_warmup_steps": None}
_EARLIER_RUNTIME = {"distribution_strategy": "one_device", "num_gpus": 0, "tpu": None,
                    "tpu_zone": None, "gcp_project": None, "dtype": "bfloat16",
                    "enable_xla": False, "kernels": "auto", "steps_per_loop": 50,
                    "gradient_accumulation_steps": 2, "log_steps": 25,
                    "save_checkpoints_steps": 100, "keep_checkpoint_max": 3,
                    "optimizer_type": "lamb", "weight_decay": 0.0, "clip_norm": None,
                    "deterministic": True, "seed": 4}


def test_a_config_file_of_the_earlier_layout_reads_into_the_same_settings(tmp_path):
  values = dict(experiment.ExperimentConfig(task=experiment.SquadConfig(), output_dir="out",
                                            model=MODEL).to_dict(),
                trainer=_EARLIER_TRAINER, runtime=_EARLIER_RUNTIME)
  path = tmp_path / experiment.CONFIG_NAME
  path.write_text(json.dumps(values))
  config = experiment.ExperimentConfig.read(path)
  assert config.trainer == TrainerConfig(
      train_batch_size=16, num_train_epochs=2.0, steps_per_loop=50, gradient_accumulation_steps=2,
      log_steps=25, save_checkpoints_steps=100, keep_checkpoint_max=3,
      optimizer=OptimizerConfig(type="lamb", learning_rate=2e-5, warmup_proportion=0.2,
                                weight_decay=0.0, clip_norm=None))
  assert config.runtime == RuntimeConfig(dtype="bfloat16", enable_xla=False, deterministic=True,
                                         seed=4)
  assert config.task == experiment.SquadConfig() and config.model == MODEL
  # Written again, it is in this version's layout, which reads back unchanged.
  assert experiment.upgrade(config.to_dict()) == config.to_dict()
  assert experiment.ExperimentConfig.read(config.write(str(tmp_path / "again"))) == config


def test_a_bad_config_file_names_the_file_and_what_is_wrong(tmp_path):
  values = experiment.ExperimentConfig(task=experiment.SquadConfig(), output_dir="out").to_dict()
  path = tmp_path / experiment.CONFIG_NAME
  path.write_text(json.dumps(dict(values, task={"kind": "poetry"})))
  with pytest.raises(UserError, match=f"{path}: unknown task kind 'poetry'"):
    experiment.ExperimentConfig.read(path)
  path.write_text(json.dumps(dict(values, trainer={"batch": 3})))
  with pytest.raises(UserError, match=f"{path}: .*'batch'"):
    experiment.ExperimentConfig.read(path)
  path.write_text("{")
  with pytest.raises(UserError, match="is damaged"):
    experiment.ExperimentConfig.read(path)


def test_the_fingerprint_comes_from_the_marked_fields_of_the_tree(tmp_path):
  pretraining = experiment.ExperimentConfig(
      task=experiment.PretrainingConfig(), model=MODEL, output_dir=str(tmp_path),
      trainer=TrainerConfig(num_train_steps=10, optimizer=OptimizerConfig(num_warmup_steps=1)))
  parts = experiment.fingerprint(pretraining)
  # The same command with more steps trains further: the step counts are not in it.
  longer = experiment.ExperimentConfig(
      task=experiment.PretrainingConfig(), model=MODEL, output_dir=str(tmp_path),
      trainer=TrainerConfig(num_train_steps=1000, eval_batch_size=99, steps_per_loop=7,
                            optimizer=OptimizerConfig(num_warmup_steps=100, clip_norm=None)),
      runtime=RuntimeConfig(dtype="bfloat16", seed=5))
  assert experiment.fingerprint(longer) == parts
  assert parts["model"] == {"bert_config": MODEL.to_dict(), "do_lower_case": None,
                            "max_seq_length": 128, "max_predictions_per_seq": 20}
  # Masking settings count only when masks are drawn during training.
  assert parts["training"]["masked_lm_prob"] is None
  dynamic = experiment.fingerprint(experiment.ExperimentConfig(
      task=experiment.PretrainingConfig(dynamic_masking=True, masked_lm_prob=0.2), model=MODEL,
      output_dir=str(tmp_path)))
  assert dynamic["training"]["masked_lm_prob"] == 0.2
  faster = experiment.ExperimentConfig(
      task=experiment.PretrainingConfig(), model=MODEL, output_dir=str(tmp_path),
      trainer=TrainerConfig(optimizer=OptimizerConfig(learning_rate=1e-3, weight_decay=0.0,
                                                      type="lamb", beta_1=0.8)))
  assert output_folder.differences(parts, experiment.fingerprint(faster), ["training"]) == [
      "training.beta_1: None then, 0.8 now",
      "training.learning_rate: 5e-05 then, 0.001 now",
      "training.optimizer_type: 'adamw' then, 'lamb' now",
      "training.weight_decay: 0.01 then, 0.0 now"]
  squad = experiment.fingerprint(experiment.ExperimentConfig(
      task=experiment.SquadConfig(doc_stride=64, max_answer_length=10), model=MODEL,
      output_dir=str(tmp_path)))
  assert squad["training"]["doc_stride"] == 64
  assert squad["training"]["version_2_with_negative"] is False
  assert "max_answer_length" not in squad["model"] and squad["model"]["max_seq_length"] == 384


def _sentiment(folder):
  data = folder / "data"
  synthetic.write_sentiment_task(str(data), num_train=32, num_dev=16)
  words = sorted({word for name in ("train.tsv", "dev.tsv")
                  for line in (data / name).read_text().splitlines()[1:]
                  for word in line.split("\t")[0].split()})
  vocab = folder / "vocab.txt"
  write_vocab(vocab, SPECIAL_TOKENS + words)
  model = BertConfig(**dict(MODEL.to_dict(), vocab_size=len(SPECIAL_TOKENS) + len(words)))
  return data, vocab, model


@pytest.mark.slow
def test_the_written_config_reproduces_the_run_and_its_fingerprint_keeps_its_stored_form(
    tmp_path):
  data, vocab, model = _sentiment(tmp_path)
  config = experiment.ExperimentConfig(
      task=experiment.ClassificationConfig(vocab_file=str(vocab), task_name="SST-2",
                                           data_dir=str(data), max_seq_length=16),
      model=model, output_dir=str(tmp_path / "out"),
      trainer=TrainerConfig(train_batch_size=8, num_train_epochs=1.0, steps_per_loop=2,
                            log_steps=2),
      runtime=RuntimeConfig(enable_xla=False, seed=0))
  first = driver.run_experiment(config, base.Modes(train=True, eval=True))
  written = experiment.ExperimentConfig.read(tmp_path / "out")
  assert written == config

  # The fingerprint holds what the hand-assembled one held, under the same names, so that the
  # folders of earlier versions still resume.
  fingerprint = json.loads((tmp_path / "out" / output_folder.FINGERPRINT_NAME).read_text())
  assert sorted(fingerprint["model"]) == ["bert_config", "do_lower_case", "extra",
                                          "is_regression", "labels", "max_seq_length", "task"]
  assert sorted(fingerprint["training"]) == [
      "data_files", "init_checkpoint", "learning_rate", "num_train_epochs", "optimizer_type",
      "task", "train_batch_size", "warmup_proportion", "weight_decay"]
  assert fingerprint["model"]["task"] == "ClassificationTask"
  assert fingerprint["training"]["task"] == "SST-2"
  assert fingerprint["model"]["max_seq_length"] == 16

  # Reading it back runs the same run: it resumes (the folder accepts it) at the same step.
  again = driver.run_experiment(written, base.Modes(eval=True))
  assert again == first
  with pytest.raises(output_folder.OutputDirMismatchError, match="max_seq_length: 16 then"):
    driver.run_experiment(experiment.ExperimentConfig.from_dict(dict(
        written.to_dict(), task=dict(written.to_dict()["task"], max_seq_length=32))),
        base.Modes(eval=True))


def test_a_task_and_a_config_that_disagree_are_refused(tmp_path):
  data, vocab, model = _sentiment(tmp_path)
  task = experiment.ClassificationConfig(vocab_file=str(vocab), task_name="SST-2",
                                         data_dir=str(data), max_seq_length=16)
  config = experiment.ExperimentConfig(task=task, model=model, output_dir=str(tmp_path / "out"))
  other = driver.build_task(experiment.ExperimentConfig(
      task=experiment.ClassificationConfig(vocab_file=str(vocab), task_name="SST-2",
                                           data_dir=str(data), max_seq_length=8),
      model=model, output_dir=str(tmp_path / "out")))
  with pytest.raises(ValueError, match="The config's task .* is not the task's"):
    driver.run(other, config, base.Modes(eval=True))
  assert driver.build_task(config).config == task
  assert not (tmp_path / "out").exists()


_FLAGS_TO_TREE = """
import json, sys
from absl import flags
from official_bert.cli import fine_tuning_flags, {tool}
{tool}.define_flags()
flags.FLAGS(sys.argv)
print(json.dumps(fine_tuning_flags.experiment_config_from_flags(
    {tool}.task_config_from_flags()).to_dict()))
"""


def _tree_of(tool, *argv):
  result = run_python([sys.executable, "-c", _FLAGS_TO_TREE.format(tool=tool), *argv],
                      cwd=REPOSITORY, check=True)
  return experiment.ExperimentConfig.from_dict(json.loads(result.stdout.splitlines()[-1]))


def test_the_flags_of_a_tool_map_onto_the_tree(tmp_path):
  config_file = tmp_path / "bert_config.json"
  MODEL.to_json_file(str(config_file))
  config = _tree_of("run_squad", f"--bert_config_file={config_file}", "--vocab_file=vocab.txt",
                    f"--output_dir={tmp_path}/out", "--train_file=train-v1.1.json",
                    "--init_checkpoint=bert_model.ckpt", "--train_batch_size=12",
                    "--learning_rate=3e-5", "--num_train_epochs=2.0", "--doc_stride=64",
                    "--dtype=bfloat16", "--seed=7", "--save_checkpoints_steps=50",
                    "--use_tpu", "--tpu_name=grpc://1.2.3.4:8470")
  assert config == experiment.ExperimentConfig(
      task=experiment.SquadConfig(vocab_file="vocab.txt", train_file="train-v1.1.json",
                                  doc_stride=64),
      trainer=TrainerConfig(train_batch_size=12, num_train_epochs=2.0, save_checkpoints_steps=50,
                            optimizer=OptimizerConfig(learning_rate=3e-5)),
      runtime=RuntimeConfig(distribution_strategy="tpu", tpu="grpc://1.2.3.4:8470",
                            dtype="bfloat16", seed=7),
      model=MODEL, output_dir=f"{tmp_path}/out", init_checkpoint="bert_model.ckpt")
  assert config.task.max_seq_length == 384  # run_squad.py's default, as the original's


# An output folder that run_classifier.py wrote before #42 (the package at f05cabd; see its
# README.md), left as a run killed after its step-2 checkpoint of 4 leaves it.
EARLIER_RUN = TESTS / "tasks" / "testdata" / "classifier_run_before_42"


@pytest.mark.slow
def test_an_output_folder_of_the_earlier_layout_resumes_with_the_same_command(tmp_path):
  shutil.copytree(EARLIER_RUN, tmp_path / "run")
  inputs, output = tmp_path / "run" / "inputs", tmp_path / "run" / "output"
  earlier = experiment.ExperimentConfig.read(output)
  assert earlier.trainer == TrainerConfig(
      train_batch_size=8, num_train_epochs=1.0, steps_per_loop=2, log_steps=2,
      save_checkpoints_steps=2, keep_checkpoint_max=2,
      optimizer=OptimizerConfig(learning_rate=1e-3, warmup_proportion=0.25, weight_decay=0.02,
                                clip_norm=0.5))
  assert earlier.runtime == RuntimeConfig(enable_xla=False, seed=0)
  assert earlier.task.task_name == "SST-2" and earlier.task.max_seq_length == 16
  recorded = json.loads((output / output_folder.FINGERPRINT_NAME).read_text())

  flags = json.loads((tmp_path / "run" / "flags.json").read_text())
  result = run_python([sys.executable, str(REPOSITORY / "run_classifier.py"),
                       *(flag.format(inputs=inputs, output=output) for flag in flags)],
                      timeout=300, cwd=REPOSITORY)
  assert result.returncode == 0, result.stderr[-5000:]
  # It continued the checkpoint at step 2 (the fingerprint matched), to the last step, 4.
  assert re.search(r"Restored \S*ckpt-2 \(step 2\)", result.stderr), result.stderr[-5000:]
  assert tf.train.latest_checkpoint(str(output)).endswith("ckpt-4")
  assert read_eval_results(output / "eval_results.txt")["global_step"] == 4
  assert json.loads((output / output_folder.FINGERPRINT_NAME).read_text()) == recorded
  # The config it wrote, in this version's layout, holds the same settings.
  assert experiment.ExperimentConfig.read(output) == dataclasses.replace(
      earlier, output_dir=str(output), task=dataclasses.replace(
          earlier.task, data_dir=str(inputs / "data"), vocab_file=str(inputs / "vocab.txt")))
