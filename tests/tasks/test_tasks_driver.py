"""The Task protocol and the one driver: checks before any work, the order of the steps."""

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertEncoder
from official_bert.checkpoints import check_init_checkpoint, save_tf1_checkpoint
from official_bert.tasks import base, driver, experiment
from official_bert.tasks.classification import classification_loss
from official_bert.training import RuntimeConfig

from testing import engine_configs, tiny_bert_config

CONFIG = tiny_bert_config(30, max_position_embeddings=16)
SEQ = 8
ENGINE = engine_configs(enable_xla=False, seed=0, steps_per_loop=2, log_steps=2, train_batch_size=8,
                        num_train_epochs=1.0, learning_rate=1e-3)


class _RecordingTask(base.Task):
  """A classifier on random ids whose label is whether token 7 occurs; records each step."""

  name = "recording"

  def __init__(self, **kwargs):
    super().__init__(bert_config=CONFIG, vocab_file=None, **{"max_seq_length": SEQ, **kwargs})
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
