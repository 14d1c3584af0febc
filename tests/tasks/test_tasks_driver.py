"""The Task protocol and the one driver: checks before any work, the order of the steps; the
runner that the driver builds for every task: steps from epochs, init checkpoint, resume, eval;
and the task's save."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertEncoder, export_pretrained_dir
from official_bert.checkpoints import check_init_checkpoint, save_tf1_checkpoint
from official_bert.tasks import base, driver, experiment
from official_bert.tasks.classification import classification_loss, classification_metrics
from official_bert.training import RuntimeConfig

from testing import SPECIAL_TOKENS, engine_configs, tiny_bert_config, write_vocab

# One layer: the driver's and the runner's behaviour does not depend on depth, and each layer adds
# to the time TensorFlow takes to trace the model.
CONFIG = tiny_bert_config(30, num_hidden_layers=1, max_position_embeddings=16)
SEQ = 8
ENGINE = engine_configs(enable_xla=False, seed=0, steps_per_loop=2, log_steps=2, train_batch_size=8,
                        num_train_epochs=1.0, learning_rate=1e-3)
RUNNER_ENGINE = engine_configs(enable_xla=False, deterministic=True, seed=0, steps_per_loop=4,
                               log_steps=4, save_checkpoints_steps=4, train_batch_size=8,
                               eval_batch_size=16, predict_batch_size=20, learning_rate=1e-3,
                               num_train_epochs=2.0)


class _RecordingTask(base.Task):
  """A classifier on random ids whose label is whether token 7 occurs; records each step."""

  name = "recording"

  def __init__(self, **settings):
    super().__init__(experiment.TaskConfig(**{"max_seq_length": SEQ, **settings}), CONFIG)
    self.calls = []
    rng = np.random.default_rng(0)
    self.ids = rng.integers(8, CONFIG.vocab_size, size=(32, SEQ)).astype("int32")
    self.labels = rng.integers(0, 2, size=32).astype("int32")
    self.ids[self.labels == 1, 3] = 7

  def _dataset(self, batch_size, repeat):
    inputs = {"input_word_ids": self.ids, "input_mask": np.ones_like(self.ids),
              "input_type_ids": np.zeros_like(self.ids)}
    dataset = tf.data.Dataset.from_tensor_slices(
        (inputs, {"labels": self.labels, "weights": np.ones(32, "float32")}))
    return dataset.repeat().batch(batch_size, drop_remainder=True) if repeat else dataset.batch(
        batch_size)

  def validate(self, modes, init_checkpoint=None, **paths):
    super().validate(modes, init_checkpoint, **paths)
    self.calls.append("validate")

  def build_model(self):
    self.calls.append("build_model")
    return BertClassifier(CONFIG, 2)

  def loss(self, outputs, labels):
    return classification_loss(False)(outputs, labels)

  def untrained(self, output_dir):
    self.calls.append("untrained")

  def num_train_examples(self):
    return 32

  def build_inputs(self, split, output_dir, seed=None):
    self.calls.append(split)
    if split == "predict":
      return lambda batch_size, _: self._dataset(batch_size, repeat=False).map(
          lambda inputs, labels: inputs)
    return lambda batch_size, _: self._dataset(batch_size, repeat=split == "train")

  def postprocess(self, split, outputs, output_dir):
    self.calls.append(f"postprocess {split}")
    accuracy = float(np.mean(outputs["logits"].argmax(-1) == self.labels))
    return ({"accuracy": accuracy}, []) if split == "eval" else (None, [])

  def save(self, model, output_dir, export_dir=None):
    self.calls.append("save")
    return []


def _config(tmp_path, **kwargs):
  values = dict(output_dir=str(tmp_path / "out"), **ENGINE)
  values.update(kwargs)
  return experiment.ExperimentConfig(**values)


def test_the_driver_runs_the_steps_in_order_and_writes_eval_results(tmp_path):
  task = _RecordingTask()
  results = driver.run(task, _config(tmp_path), base.Modes(train=True, eval=True, predict=True))
  assert task.calls == ["validate", "build_model", "train", "eval", "postprocess eval",
                        "predict", "postprocess predict", "save"]
  assert results["global_step"] == 4  # 32 examples / 8 for one epoch
  text = (tmp_path / "out" / "eval_results.txt").read_text()
  assert "global_step = 4" in text and "eval_accuracy = " in text

  # A second run on the same folder resumes; one that does not train says it found a checkpoint.
  again = _RecordingTask()
  driver.run(again, _config(tmp_path), base.Modes(eval=True))
  assert again.calls == ["validate", "build_model", "eval", "postprocess eval"]
  fresh = _RecordingTask()
  driver.run(fresh, _config(tmp_path / "fresh"), base.Modes(predict=True))
  assert fresh.calls == ["validate", "build_model", "untrained", "predict", "postprocess predict"]


def test_multi_worker_evaluation_is_refused_before_any_work(tmp_path):
  task = _RecordingTask()
  config = _config(tmp_path, runtime=RuntimeConfig(distribution_strategy="multi_worker_mirrored"))
  with pytest.raises(ValueError, match="--do_eval run on one machine"):
    driver.run(task, config, base.Modes(train=True, eval=True))
  assert task.calls == [] and not (tmp_path / "out").exists()


def test_modes_need_at_least_one_and_tasks_refuse_what_they_cannot_do(tmp_path):
  with pytest.raises(ValueError, match="do_train, do_eval or do_predict"):
    base.Modes()
  assert base.Modes(train=True, predict=True).names() == ["train", "predict"]

  class PredictOnly(_RecordingTask):
    supported_modes = ("predict",)

  with pytest.raises(ValueError, match="cannot train or eval: it supports predict"):
    driver.run(PredictOnly(), _config(tmp_path), base.Modes(train=True, eval=True))


def test_validate_makes_the_original_checks(tmp_path):
  with pytest.raises(ValueError, match="max_position_embeddings"):
    base.Task.validate(_RecordingTask(max_seq_length=17), base.Modes(train=True))
  google_model = tmp_path / "uncased_L-2_H-128_A-2"
  save_tf1_checkpoint(BertEncoder(CONFIG), str(google_model / "bert_model.ckpt"))
  located = check_init_checkpoint(str(google_model / "bert_model.ckpt"))
  assert located.kind == "tf1" and located.path == str(google_model / "bert_model.ckpt")
  with pytest.raises(ValueError, match="--do_lower_case=True"):
    _RecordingTask(do_lower_case=False).validate(base.Modes(train=True), located)
  _RecordingTask(do_lower_case=True).validate(base.Modes(predict=True), located)


# === The runner ===


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

  def __init__(self, num_examples, vocab_file=None):
    super().__init__(experiment.TaskConfig(vocab_file=vocab_file, max_seq_length=SEQ), CONFIG)
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
  config = experiment.ExperimentConfig(output_dir=str(output_dir), **RUNNER_ENGINE, **config)
  task = _ToyTask(num_train_examples)
  task.resumes = resumes
  init = check_init_checkpoint(config.init_checkpoint) if config.init_checkpoint else None
  return driver.Runner(task, config, train=num_train_examples is not None, init_checkpoint=init)


def _weights(model):
  return [v.numpy() for v in model.weights]


def test_write_eval_results_sorts_keys_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "eval_results.txt"
  driver.write_eval_results(str(path), {"global_step": 7, "eval_loss": 0.5,
                                        "eval_accuracy": 0.75})
  assert path.read_text() == "eval_accuracy = 0.75\neval_loss = 0.5\nglobal_step = 7\n"
  assert os.listdir(tmp_path) == ["eval_results.txt"]


@pytest.mark.slow
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


@pytest.mark.slow
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

  results = resumed.eval_results(resumed.average(_input_fn(is_training=False)), "eval")
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
  task = _ToyTask(48, vocab_file=str(vocab))
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
