"""The runner that the driver builds for every task: steps from epochs, checks, init checkpoint,
resume, eval; and the task's save."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertEncoder, export_pretrained_dir
from official_bert.checkpoints import check_init_checkpoint
from official_bert.tasks import base, experiment
from official_bert.tasks import runner as run_lib
from official_bert.tasks.classification import classification_loss, classification_metrics

from testing import SPECIAL_TOKENS, engine_configs, tiny_bert_config, write_vocab

CONFIG = tiny_bert_config(30, max_position_embeddings=16)
SEQ = 8
ENGINE = engine_configs(enable_xla=False, deterministic=True, seed=0, steps_per_loop=4,
                        log_steps=4, save_checkpoints_steps=4, train_batch_size=8,
                        eval_batch_size=16, predict_batch_size=20, learning_rate=1e-3,
                        num_train_epochs=2.0)


def _toy_data(count=48, seed=0):
  """Sequences whose label says whether token 7 occurs in them."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(8, CONFIG.vocab_size, size=(count, SEQ)).astype("int32")
  labels = rng.integers(0, 2, size=count).astype("int32")
  ids[labels == 1, rng.integers(1, SEQ, size=int(labels.sum()))] = 7
  ids[:, 0] = 2
  return ids, labels


def _input_fn(is_training, for_predict=False):
  ids, labels = _toy_data()

  def input_fn(batch_size, input_context):
    assert input_context.num_replicas_in_sync == 1
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": np.zeros_like(ids)}
    dataset = tf.data.Dataset.from_tensor_slices(
        (inputs, {"labels": labels, "weights": np.ones(len(ids), "float32")}))
    if is_training:
      return dataset.shuffle(len(ids), seed=0).repeat().batch(batch_size, drop_remainder=True)
    if for_predict:
      dataset = dataset.map(lambda features, labels: dict(features, label_ids=labels["labels"]))
    return dataset.batch(batch_size)

  return input_fn


class _ToyTask(base.Task):
  """A classifier on `_toy_data`, with `num_examples` training examples."""

  name = "toy"

  def __init__(self, num_examples):
    super().__init__(bert_config=CONFIG, vocab_file=None, max_seq_length=SEQ)
    self.num_examples = num_examples

  def build_model(self):
    return BertClassifier(CONFIG, 2)

  def loss(self, outputs, labels):
    return classification_loss(False)(outputs, labels)

  def metrics(self, outputs, labels):
    return classification_metrics(outputs, labels)

  def num_train_examples(self):
    return self.num_examples

  def model_folder_fields(self):
    return {"labels": ["no", "yes"]}


def _runner(output_dir, num_train_examples=48, resumes=True, **config):
  config = experiment.ExperimentConfig(
      output_dir=str(output_dir), **ENGINE, **config)
  task = _ToyTask(num_train_examples)
  task.resumes = resumes
  init = check_init_checkpoint(config.init_checkpoint) if config.init_checkpoint else None
  return run_lib.Runner(task, config, train=num_train_examples is not None, init_checkpoint=init)


def _weights(model):
  return [v.numpy() for v in model.weights]


def test_training_steps_follow_the_original_rounding():
  trainer = experiment.TrainerConfig
  assert trainer(train_batch_size=32, num_train_epochs=3.0).steps(3668) == (343, 34)
  half = experiment.OptimizerConfig(warmup_proportion=0.5)
  assert trainer(train_batch_size=32, num_train_epochs=1.0, optimizer=half).steps(100) == (3, 1)
  ten = experiment.OptimizerConfig(num_warmup_steps=10)
  assert trainer(num_train_steps=20, optimizer=ten).steps() == (20, 10)
  with pytest.raises(ValueError, match="no training step"):
    trainer(train_batch_size=32, num_train_epochs=1.0).steps(10)


@pytest.mark.parametrize("field, value, message", [
    ("train_batch_size", 0, "train_batch_size"),
    ("warmup_proportion", 1.5, "warmup_proportion"),
    ("num_train_epochs", 0.0, "num_train_epochs"),
    ("num_train_steps", 0, "num_train_steps"),
    ("steps_per_loop", 0, "steps_per_loop"),
    ("learning_rate", 0.0, "learning_rate"),
    ("type", "sgd", "optimizer type must be one of adamw"),
])
def test_trainer_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    if field in experiment.OptimizerConfig.__dataclass_fields__:
      experiment.OptimizerConfig(**{field: value})
    else:
      experiment.TrainerConfig(**{field: value})


def test_experiment_config_needs_an_output_dir():
  with pytest.raises(ValueError, match="output_dir"):
    experiment.ExperimentConfig(output_dir="")


def test_write_eval_results_sorts_keys_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "eval_results.txt"
  run_lib.write_eval_results(str(path), {"global_step": 7, "eval_loss": 0.5,
                                         "eval_accuracy": 0.75})
  assert path.read_text() == "eval_accuracy = 0.75\neval_loss = 0.5\nglobal_step = 7\n"
  assert os.listdir(tmp_path) == ["eval_results.txt"]


def test_init_checkpoint_loads_the_encoder_unless_there_is_a_checkpoint_to_resume(tmp_path):
  pretrained = BertEncoder(CONFIG)
  export_pretrained_dir(pretrained, CONFIG, str(tmp_path / "pretrained"))
  runner = _runner(tmp_path / "out", init_checkpoint=str(tmp_path / "pretrained"))
  for expected, actual in zip(_weights(pretrained), _weights(runner.model.encoder)):
    np.testing.assert_array_equal(expected, actual)
  runner.train(_input_fn(is_training=True), num_steps=4)
  trained = _weights(runner.model)

  resumed = _runner(tmp_path / "out", init_checkpoint=str(tmp_path / "pretrained"))
  assert resumed.global_step == 4
  for expected, actual in zip(trained, _weights(resumed.model)):
    np.testing.assert_array_equal(expected, actual)

  # A task that does not resume starts from init_checkpoint whatever lies in output_dir.
  fresh = _runner(tmp_path / "out", num_train_examples=None, resumes=False,
                  init_checkpoint=str(tmp_path / "pretrained"))
  assert fresh.global_step == 0
  for expected, actual in zip(_weights(pretrained), _weights(fresh.model.encoder)):
    np.testing.assert_array_equal(expected, actual)


def test_interrupted_training_resumes_to_the_same_weights_then_evaluates_predicts_saves(tmp_path):
  whole = _runner(tmp_path / "whole")
  assert (whole.num_train_steps, whole.num_warmup_steps) == (12, 1)
  whole.train(_input_fn(is_training=True))
  assert whole.global_step == 12

  _runner(tmp_path / "parts").train(_input_fn(is_training=True), num_steps=8)
  assert tf.train.latest_checkpoint(str(tmp_path / "parts")).endswith("ckpt-8")
  resumed = _runner(tmp_path / "parts", export_dir=str(tmp_path / "export"))
  assert resumed.global_step == 8
  resumed.train(_input_fn(is_training=True))
  assert resumed.global_step == 12
  for expected, actual in zip(_weights(whole.model), _weights(resumed.model)):
    np.testing.assert_allclose(expected, actual, rtol=1e-5, atol=1e-6)

  results = resumed.evaluate(_input_fn(is_training=False))
  assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step"]
  assert results["global_step"] == 12 and 0 <= results["eval_accuracy"] <= 1
  assert np.isfinite(results["eval_loss"])
  outputs = resumed.predict(_input_fn(is_training=False, for_predict=True), keep=("label_ids",))
  assert outputs["logits"].shape == (48, 2)
  np.testing.assert_array_equal(outputs["label_ids"], _toy_data()[1])
  accuracy = np.mean(outputs["logits"].argmax(-1) == outputs["label_ids"])
  assert accuracy == pytest.approx(results["eval_accuracy"])

  vocab = tmp_path / "vocab.txt"
  write_vocab(vocab, SPECIAL_TOKENS + [f"token{i}" for i in range(20)])
  task = _ToyTask(48)
  task.vocab_file = str(vocab)
  exported = task.save(resumed.model, str(tmp_path / "parts"), str(tmp_path / "export"))
  manifest = json.loads((tmp_path / "parts" / "model.json").read_text())
  assert manifest["kind"] == "classifier" and manifest["labels"] == ["no", "yes"]
  assert manifest["max_seq_length"] == SEQ
  assert exported == [str(tmp_path / "export")]
  assert tf.saved_model.contains_saved_model(exported[0])


def test_a_runner_for_a_run_without_training_cannot_train(tmp_path):
  runner = _runner(tmp_path / "out", num_train_examples=None)
  assert runner.trainer.optimizer is None and runner.num_train_steps == 0
  with pytest.raises(ValueError, match="does not train"):
    runner.train(_input_fn(is_training=True))
