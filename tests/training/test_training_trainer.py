"""The training engine's loops on real pre-training records: learning, resuming, accumulating,
evaluating, predicting, mixed precision and the stop on a non-finite loss."""

import importlib
import logging
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertPretrainer
from official_bert.models.losses import pretraining_losses
from official_bert.training import NonFiniteLossError, updates

from testing import (
  PREDICTIONS,
  SEQ,
  fixed_pretraining_batch,
  make_records,
  make_trainer,
  pretraining_dataset_fn,
  shared_data,
  tiny_bert_config,
  tiny_engine,
  tiny_pretraining_config,
  write_full_records,
  write_synthetic_corpus,
)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  corpus, vocab, vocab_size = write_synthetic_corpus(directory)
  path = os.path.join(directory, "train.tfrecord")
  assert make_records(corpus, vocab, path) >= 200
  return path, vocab_size


def one_layer_config(vocab_size, dropout=0.0):
  """The pre-trainer of the tests of the engine around the model (resuming, accumulating,
  evaluating, precision): one layer, as a second only makes each program slower to trace and
  compile; the learning tests keep `tiny_pretraining_config`'s two."""
  return tiny_bert_config(vocab_size, hidden_size=32, num_hidden_layers=1,
                          max_position_embeddings=SEQ, dropout=dropout)


@pytest.fixture(autouse=True)
def float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


# === Learning ===

def overfit(tmp_path, files, vocab_size, steps):
  # 1.2e-3 without warmup learns faster than 1e-3 after 10 steps of warmup: the real text's
  # accuracy in 120 steps instead of 150. (At 2e-3 both stall at their most frequent word.)
  trainer = make_trainer(tmp_path / "run", tiny_pretraining_config(vocab_size, hidden=64),
                         tiny_engine(steps_per_loop=steps, log_steps=steps), learning_rate=1.2e-3,
                         num_steps=steps, warmup=0)
  before = trainer.evaluate(pretraining_dataset_fn(files, 64, is_training=False))
  trainer.train(pretraining_dataset_fn(files, 32), steps)
  after = trainer.evaluate(pretraining_dataset_fn(files, 64, is_training=False))
  return before, after


@pytest.mark.slow
def test_a_small_model_overfits_generated_records(tmp_path, records):
  files, vocab_size = records
  before, after = overfit(tmp_path, files, vocab_size, steps=160)
  chance = 1.0 / vocab_size
  assert before["masked_lm_accuracy"] < 5 * chance + 0.05
  assert after["masked_lm_accuracy"] > 0.25, after  # 40 times chance; reaches 0.29
  assert after["masked_lm_loss"] < before["masked_lm_loss"] - 1.5


@pytest.mark.slow
def test_a_small_model_overfits_real_text_with_the_uncased_vocab(tmp_path):
  text = shared_data("corpus/sample_text.txt")
  vocab = shared_data("vocab/bert-base-uncased-vocab.txt")
  files = str(tmp_path / "sample.tfrecord")
  assert make_records(str(text), str(vocab), files, dupe_factor=15) >= 200
  # Each step updates all 30522 embeddings: 120 steps, which reach 0.19.
  before, after = overfit(tmp_path, files, vocab_size=30522, steps=120)
  assert before["masked_lm_accuracy"] < 0.01
  assert after["masked_lm_accuracy"] > 0.1, after  # chance: 1 / 30522


# === Resuming ===

def resumable_run(directory, config, data_checkpointing, initial_weights):
  return make_trainer(
      directory, config, tiny_engine(save_checkpoints_steps=4, steps_per_loop=4), num_steps=10,
      warmup=3, initial_weights=initial_weights, data_checkpointing=data_checkpointing)


def kill_in_step_6(directory, files, config, data_checkpointing, initial):
  """Trains a `resumable_run` from `initial` until its process dies in step 6, after the
  checkpoint of step 4."""
  killed = resumable_run(directory, config, data_checkpointing, initial)

  def crash_in_step_6(outputs, labels):
    with tf.control_dependencies([tf.debugging.assert_less(killed.global_step, np.int64(5))]):
      return pretraining_losses(outputs, labels)

  killed.loss_fn = crash_in_step_6
  with pytest.raises(tf.errors.InvalidArgumentError):
    killed.train(pretraining_dataset_fn(files, 8), 10)
  assert killed.latest_checkpoint().endswith("ckpt-4")


def resume(directory, files, config, data_checkpointing, caplog):
  """Resumes the killed run in `directory` to its end; returns the trainer and its logs."""
  resumed = resumable_run(directory, config, data_checkpointing, None)
  assert resumed.restore() == 4
  with caplog.at_level(logging.INFO, logger="absl"):
    resumed.train(pretraining_dataset_fn(files, 8), 10)
  return resumed, caplog.text


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, records):
  """The run both resumptions must reproduce: its config, initial and final weights.

  Built once: without an interruption the data checkpointing only adds the iterator to the
  checkpoints, so one reference serves both ways of resuming.
  """
  files, vocab_size = records
  # Dropout on: the random state must resume too.
  config = one_layer_config(vocab_size, dropout=0.1)
  initial = BertPretrainer(config).get_weights()
  trainer = resumable_run(tmp_path_factory.mktemp("straight"), config, "iterator", initial)
  trainer.train(pretraining_dataset_fn(files, 8), 10)
  return config, initial, trainer.model.get_weights()


@pytest.fixture(scope="module")
def killed_with_its_input(tmp_path_factory, records, uninterrupted):
  """A folder holding its input (`train.tfrecord`) and a run (`run/`) that checkpointed its
  input position and was killed in step 6. Killed once: the tests resume copies of it, in place
  and moved."""
  folder = tmp_path_factory.mktemp("killed")
  files = str(folder / "train.tfrecord")
  tf.io.gfile.copy(records[0], files)
  config, initial, _ = uninterrupted
  kill_in_step_6(folder / "run", files, config, "iterator", initial)
  return folder


@pytest.mark.slow
@pytest.mark.parametrize("data_checkpointing", ["iterator", "skip"])
def test_a_killed_run_resumes_to_the_same_weights(tmp_path, records, uninterrupted, request,
                                                  caplog, data_checkpointing):
  config, initial, expected_weights = uninterrupted
  if data_checkpointing == "iterator":
    folder = request.getfixturevalue("killed_with_its_input")
    files = str(folder / "train.tfrecord")
    shutil.copytree(folder / "run", tmp_path / "killed")  # the input stays where it was read
  else:
    files = records[0]
    kill_in_step_6(tmp_path / "killed", files, config, data_checkpointing, initial)
  resumed, logs = resume(tmp_path / "killed", files, config, data_checkpointing, caplog)
  assert ("from the checkpointed iterator" if data_checkpointing == "iterator"
          else "by skipping the batches already used") in logs

  for expected, actual in zip(expected_weights, resumed.model.get_weights()):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
  # Already finished: nothing to do.
  assert resumed.train(pretraining_dataset_fn(files, 8), 10) == {}


@pytest.mark.slow
def test_a_run_moved_with_its_input_resumes_to_the_same_weights(tmp_path, uninterrupted,
                                                                killed_with_its_input, caplog):
  """The checkpointed input position names the input files; moved, it cannot be restored, and
  the run resumes by skipping the batches already used: the same batches, the same weights."""
  config, _, expected_weights = uninterrupted
  after = tmp_path / "after"
  shutil.copytree(killed_with_its_input, after)
  # Moved: the folder is gone from where the run read its input (and comes back for the others).
  away = killed_with_its_input.with_name(killed_with_its_input.name + "-away")
  os.rename(killed_with_its_input, away)
  try:
    resumed, logs = resume(after / "run", str(after / "train.tfrecord"), config, "iterator",
                           caplog)
  finally:
    os.rename(away, killed_with_its_input)
  assert "cannot be restored" in logs
  for expected, actual in zip(expected_weights, resumed.model.get_weights()):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


# === Gradient accumulation ===

def test_accumulating_micro_batches_equals_one_large_batch(tmp_path):
  files = write_full_records(str(tmp_path / "full.tfrecord"), 64, vocab_size=50)
  config = one_layer_config(50)
  initial = BertPretrainer(config).get_weights()
  weights, logs = [], []
  for steps in (1, 4):
    # SGD: its update is linear in the gradient, so float noise stays float noise (Adam's first
    # steps amplify it to the learning rate on near-zero gradients).
    trainer = make_trainer(tmp_path / f"accumulate{steps}", config,
                           tiny_engine(gradient_accumulation_steps=steps), initial_weights=initial,
                           optimizer=keras.optimizers.SGD(0.5))
    logs.append(trainer.train(pretraining_dataset_fn(files, 16), 3))
    weights.append(trainer.model.get_weights())
  for full, accumulated in zip(*weights):
    np.testing.assert_allclose(accumulated, full, rtol=1e-4, atol=1e-6)
  assert logs[1]["loss"] == pytest.approx(logs[0]["loss"], rel=1e-5)
  assert not np.allclose(weights[0][0], initial[0])


def test_a_batch_that_does_not_split_into_micro_batches_is_an_error(tmp_path, records):
  files, vocab_size = records
  # The config's batch splits (the config refuses one that does not); the dataset's does not.
  trainer = make_trainer(tmp_path, one_layer_config(vocab_size),
                         tiny_engine(gradient_accumulation_steps=3, train_batch_size=9))
  with pytest.raises(ValueError, match="does not split into gradient_accumulation_steps=3"):
    trainer.train(pretraining_dataset_fn(files, 8), 2)


# === A non-finite loss ===

def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, records):
  files, vocab_size = records
  trainer = make_trainer(tmp_path, one_layer_config(vocab_size),
                         tiny_engine(save_checkpoints_steps=2))

  def poisoned(outputs, labels):
    losses = pretraining_losses(outputs, labels)
    poison = tf.where(trainer.global_step >= 4, np.nan, 0.0)  # from the 5th step on
    return dict(losses, masked_lm_loss=losses["masked_lm_loss"] + poison,
                loss=losses["loss"] + poison)

  trainer.loss_fn = poisoned
  with pytest.raises(NonFiniteLossError) as error:
    trainer.train(pretraining_dataset_fn(files, 8), 10)
  message = str(error.value)
  assert "step 5" in message and "masked_lm_loss" in message and "nan" in message
  assert "ckpt-4" in message
  assert trainer.latest_checkpoint().endswith("ckpt-4")
  assert not os.path.exists(os.path.join(tmp_path, "ckpt-5.index"))


# === Evaluation and prediction ===

def test_evaluate_counts_every_example_and_predict_keeps_their_order(tmp_path, records):
  files, vocab_size = records
  trainer = make_trainer(tmp_path, one_layer_config(vocab_size), tiny_engine())
  num_examples = sum(1 for _ in tf.data.TFRecordDataset(files))
  batch = [b for b in range(24, 48) if num_examples % b != 0][0]  # the last batch is partial
  results = trainer.evaluate(pretraining_dataset_fn(files, batch, is_training=False))
  assert results["examples"] == num_examples
  assert set(results) >= {"loss", "masked_lm_accuracy", "masked_lm_loss",
                          "next_sentence_accuracy", "next_sentence_loss"}
  limited = trainer.evaluate(pretraining_dataset_fn(files, batch, is_training=False), num_steps=2)
  assert limited["examples"] == 2 * batch

  predictions = trainer.predict(pretraining_dataset_fn(files, batch, is_training=False))
  assert predictions["mlm_logits"].shape == (num_examples, PREDICTIONS, vocab_size)
  features, _ = next(iter(pretraining_dataset_fn(files, num_examples, is_training=False)(None)))
  expected = trainer.model(features, training=False)["next_sentence_logits"]
  np.testing.assert_allclose(predictions["next_sentence_logits"], expected, atol=1e-5)


# === The step's trace ===

def _traced_training(tmp_path, dtype, loss_fn, caplog, monkeypatch, kernels="stock"):
  """Trains a one-layer pre-trainer 2 steps without XLA (float32 steps take the plain update,
  bfloat16 ones the update through the weights' bfloat16 copies); returns the `training`
  argument of each trace of its logs, per trainable variable whether it moved, and the modules
  imported while tracing.

  AutoGraph cannot convert importlib's frozen code: an import inside the traced step (a lookup
  of the kernels' module, say) would put a "could not transform" warning in every run's log.
  """
  vocab_size = 40
  trainer = make_trainer(tmp_path, one_layer_config(vocab_size),
                         tiny_engine(dtype=dtype, kernels=kernels, steps_per_loop=2))
  trainer.loss_fn = loss_fn
  traces, logs = [], trainer._logs  # pylint: disable=protected-access

  def counted(features, labels, training):
    traces.append(training)
    return logs(features, labels, training)

  trainer._logs = counted  # pylint: disable=protected-access
  traced_imports = []
  real_import = importlib.import_module

  def watched_import(name, package=None):
    if tf.inside_function():
      traced_imports.append(name)
    return real_import(name, package)

  monkeypatch.setattr(importlib, "import_module", watched_import)
  before = {v.path: v.numpy() for v in trainer.model.trainable_variables}
  with caplog.at_level(logging.INFO, logger="absl"):
    trainer.train(fixed_pretraining_batch(vocab_size), 2)
  assert trainer.global_step == 2
  moved = {path: not np.array_equal(value, variable.numpy())
           for (path, value), variable in zip(before.items(), trainer.model.trainable_variables)}
  return traces, moved, traced_imports


# Each kernel backend: the test of a traced step's imports too.
@pytest.mark.parametrize("kernels", ["stock", "cpu_xla"])
def test_a_step_is_traced_once_and_imports_nothing(tmp_path, caplog, monkeypatch, kernels):
  traces, moved, traced_imports = _traced_training(tmp_path, "float32", pretraining_losses,
                                                   caplog, monkeypatch, kernels)
  assert traces == [True]  # the step's one trace, which the loop calls
  assert all(moved.values())
  assert "The loss does not depend on" not in caplog.text
  assert traced_imports == []


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_variables_the_loss_misses_are_left_untrained(tmp_path, caplog, monkeypatch, dtype):
  # A loss of the masked LM alone leaves the pooler and the next-sentence head without
  # gradients.
  def masked_lm_only(outputs, labels):
    return {"loss": pretraining_losses(outputs, labels)["masked_lm_loss"]}

  traces, moved, traced_imports = _traced_training(tmp_path, dtype, masked_lm_only, caplog,
                                                   monkeypatch)
  # The first trace finds variables without gradients and stops; the second leaves them out.
  assert traces == [True, True]
  untouched = sorted(path for path, changed in moved.items() if not changed)
  assert untouched and all("pooler" in path or "next_sentence" in path for path in untouched)
  assert all(changed for path, changed in moved.items() if "masked_lm" in path)
  assert "The loss does not depend on" in caplog.text
  assert all(path in caplog.text for path in untouched)
  assert traced_imports == []


# === Mixed precision ===

@pytest.mark.parametrize("dtype,kernels", [("bfloat16", "stock"), ("float16", "cpu_xla")])
def test_mixed_precision_trains_with_float32_master_weights(tmp_path, records, dtype, kernels):
  # As accelerator users run it: XLA on, dropout on, each kernel backend.
  files, vocab_size = records
  trainer = make_trainer(tmp_path, one_layer_config(vocab_size, dropout=0.1),
                         tiny_engine(dtype=dtype, enable_xla=True, kernels=kernels))
  assert trainer.model.compute_dtype == dtype
  before = [v.numpy() for v in trainer.model.trainable_variables]
  logs = trainer.train(pretraining_dataset_fn(files, 8), 4)
  assert np.isfinite(logs["loss"])
  assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
  changed = [not np.array_equal(b, v.numpy())
             for b, v in zip(before, trainer.model.trainable_variables)]
  assert sum(changed) > len(changed) // 2
  if dtype == "float16":
    # Dynamic loss scaling: the scale is a variable that the optimizer adjusts.
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert trainer.optimizer.dynamic_growth_steps > 0
    assert float(trainer.optimizer.scale_loss(1.0)) > 1.0


# === The update ===

def _dense_layer(dtype_policy="float32"):
  layer = keras.layers.Dense(3, dtype=dtype_policy)
  layer.build((None, 4))
  return layer


@pytest.mark.parametrize("replicas, compile_update, accumulation, policy, form", [
    (1, False, 1, "float32", "Update"),  # a step that XLA compiles whole
    (2, True, 1, "mixed_bfloat16", "Update"),  # several replicas: in the step's graph
    (1, True, 1, "float32", "CompiledUpdate"),
    (1, True, 2, "mixed_bfloat16", "CompiledUpdate"),  # micro-batches sum in float32
    (1, True, 1, "mixed_bfloat16", "CopiesUpdate"),  # SGD: the fused kernel is AdamW's
])
def test_one_choice_picks_the_update_form(replicas, compile_update, accumulation, policy, form):
  layer = _dense_layer(policy)
  optimizer = keras.optimizers.SGD(0.1)
  optimizer.build(layer.trainable_variables)
  update = updates.choose(optimizer, layer.trainable_variables, clip_norm=1.0,
                          replicas=replicas, compile_update=compile_update,
                          accumulation_steps=accumulation, dtype_policy=layer.dtype_policy,
                          global_norm=tf.linalg.global_norm)
  assert type(update).__name__ == form


def test_the_plain_and_compiled_updates_clip_and_step_alike():
  gradients = [tf.fill([4, 3], 2.0), tf.fill([3], -1.0)]
  results = []
  for form in (updates.Update, updates.CompiledUpdate):
    layer = _dense_layer()
    layer.set_weights([np.ones([4, 3], "float32"), np.zeros([3], "float32")])
    optimizer = keras.optimizers.SGD(0.5)
    optimizer.build(layer.trainable_variables)
    update = form(optimizer, layer.trainable_variables, clip_norm=1.0, replicas=1,
                  global_norm=tf.linalg.global_norm)
    norm = float(update(gradients))
    results.append((norm, [w.numpy() for w in layer.trainable_variables]))
  expected_norm = np.sqrt(12 * 4.0 + 3 * 1.0)
  for norm, (kernel, bias) in results:
    assert norm == pytest.approx(expected_norm)
    # Clipped to norm 1, then one SGD step of 0.5.
    np.testing.assert_allclose(kernel, 1.0 - 0.5 * 2.0 / expected_norm, rtol=1e-6)
    np.testing.assert_allclose(bias, 0.5 * 1.0 / expected_norm, rtol=1e-6)
