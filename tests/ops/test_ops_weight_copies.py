"""Low-precision weight copies: what the layers read, the gradients through them, and a bfloat16
training step that reads them against one that casts, on a tiny pre-training model."""

import functools
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertPretrainer
from official_bert.models.losses import pretraining_losses
from official_bert.ops import weight_copies
from official_bert.training import RuntimeConfig, Trainer, TrainerConfig, create_optimizer, updates

from testing import fixed_pretraining_batch

CONFIG = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)


@pytest.fixture(autouse=True)
def float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


def test_read_casts_outside_a_reading_and_returns_the_copy_inside():
  variable = keras.Variable(np.full((2, 2), 1.0 + 2**-10, "float32"))
  copies = weight_copies.WeightCopies([variable], "bfloat16")
  variable.assign(np.full((2, 2), 3.0, "float32"))  # the copy keeps the old value until refreshed
  assert float(weight_copies.read(variable, "bfloat16")[0, 0]) == 3.0
  with copies.reading():
    assert float(weight_copies.read(variable, "bfloat16")[0, 0]) == 1.0  # 1 + 2^-10 in bfloat16
    assert weight_copies.read(variable, "float32").dtype == tf.float32  # no copy of that dtype
  copies.refresh()
  with copies.reading():
    assert float(weight_copies.read(variable, "bfloat16")[0, 0]) == 3.0


def test_copies_are_made_of_float32_variables_only():
  copies = weight_copies.WeightCopies(
      [keras.Variable(np.ones(3, "float32")), tf.Variable(np.ones(3, "int32"))], "bfloat16")
  assert [c.dtype for c in copies.copies] == [tf.bfloat16]


def test_gradients_through_copies_and_direct_reads_combine_into_the_casts_gradient():
  # A tied table: looked up directly in float32 and multiplied through its copy, as BERT's word
  # embeddings are by the masked-LM head.
  rng = np.random.default_rng(0)
  table = keras.Variable(rng.normal(size=(6, 4)).astype("float32"))
  hidden = tf.constant(rng.normal(size=(3, 4)).astype("float32"))
  ids = tf.constant([1, 4, 4])

  def loss(read_table):
    looked_up = tf.gather(table, ids)
    logits = tf.matmul(tf.cast(hidden + looked_up, tf.bfloat16), read_table(), transpose_b=True)
    return tf.reduce_sum(tf.cast(logits, tf.float32) ** 2)

  with tf.GradientTape() as tape:
    expected_loss = loss(lambda: tf.cast(table, tf.bfloat16))
  expected = tf.convert_to_tensor(tape.gradient(expected_loss, table))
  copies = weight_copies.WeightCopies([table], "bfloat16")
  with tf.GradientTape() as tape, copies.reading():
    actual_loss = loss(lambda: weight_copies.read(table, "bfloat16"))
  direct, through_copies = copies.gradients(tape, actual_loss, [table])
  assert isinstance(direct[0], tf.IndexedSlices) and through_copies[0].dtype == tf.bfloat16
  (combined,) = copies.combine(direct, through_copies)
  assert combined.dtype == tf.float32 and float(actual_loss) == float(expected_loss)
  np.testing.assert_allclose(combined, expected, rtol=1e-6, atol=1e-6)


# === A bfloat16 training step that reads the copies ===

def _trainer(model_dir):
  runtime = RuntimeConfig(dtype="bfloat16", seed=0)
  strategy = runtime.setup()
  keras.utils.set_random_seed(0)
  kernels = runtime.accelerator_choice(strategy).kernels
  with strategy.scope():
    model = BertPretrainer(CONFIG, kernels=kernels)
    optimizer = create_optimizer("adamw", 1e-2, 30, 0, dtype="bfloat16")
  trainer = Trainer(model, functools.partial(pretraining_losses, kernels=kernels), optimizer,
                    strategy=strategy,
                    model_dir=str(model_dir), config=TrainerConfig(steps_per_loop=3, log_steps=3),
                    runtime=runtime)
  return trainer


def _without_copies(optimizer, variables, **choice):
  """`updates.choose` for a step that casts its weights: the same update compiled apart."""
  return updates.CompiledUpdate(optimizer, variables, choice["clip_norm"], choice["replicas"],
                                choice["global_norm"])


@pytest.fixture(scope="module")
def on_copies(tmp_path_factory, native_kernels):
  """`(trainer, logs, weights, copies)`: a bfloat16 trainer on copies after its first 3 steps,
  with what those gave: its logs, its weights, and each copy beside its weight cast to bfloat16.
  The first test below compares them with the step that casts; the second trains it on."""
  del native_kernels  # built, where a compiler is there, as a user who built them runs the step
  trainer = _trainer(tmp_path_factory.mktemp("copies"))
  logs = trainer.train(fixed_pretraining_batch(CONFIG.vocab_size), 3)
  copies = trainer._update.copies  # pylint: disable=protected-access
  pairs = [(copy.numpy(), tf.cast(variable, tf.bfloat16).numpy())
           for variable, copy in zip(copies.variables, copies.copies)]
  yield trainer, logs, [v.numpy() for v in trainer.model.trainable_variables], pairs
  keras.mixed_precision.set_global_policy("float32")


def test_a_bfloat16_step_on_copies_trains_as_the_step_that_casts(tmp_path, native_kernels,
                                                                  on_copies):
  # Both steps as a user who built the kernels runs them (`bert-build-kernels`): the fused
  # element-wise kernels round as the casting step does; their XLA forms drift by a few bfloat16
  # units in the last place over three steps.
  if native_kernels is not None:
    pytest.skip(f"no C++ compiler to build the kernels: {native_kernels}")
  copied, copied_logs, copied_weights, copy_pairs = on_copies
  cast = _trainer(tmp_path / "cast")
  with mock.patch.object(updates, "choose", _without_copies):
    cast_logs = cast.train(fixed_pretraining_batch(CONFIG.vocab_size), 3)
  # pylint: disable=protected-access
  assert type(cast._update) is updates.CompiledUpdate
  assert isinstance(copied._update, updates.CopiesUpdate)
  for name in ("loss", "masked_lm_loss", "gradient_norm"):
    np.testing.assert_allclose(copied_logs[name], cast_logs[name], rtol=1e-3)
  for actual, expected in zip(copied_weights, cast.model.trainable_variables):
    np.testing.assert_allclose(actual, expected.numpy(), rtol=1e-2, atol=1e-4)
  # The update wrote the copies of the weights it changed.
  for copy, variable in copy_pairs:
    np.testing.assert_array_equal(copy, variable)


def test_copies_are_not_saved_and_are_refreshed_from_a_restored_checkpoint(on_copies):
  first = on_copies[0]  # 3 steps trained
  saved = [name for name, _ in tf.train.list_variables(first.latest_checkpoint())]
  assert saved and not any("bfloat16" in name for name in saved)
  first.train(fixed_pretraining_batch(CONFIG.vocab_size), 6)
  expected = [v.numpy() for v in first.model.trainable_variables]
  # The newest checkpoint lost: the same trainer falls back to step 3 over its weights of step
  # 6, and its copies (made in its first `train`) must follow the restored weights for steps 4
  # to 6 to come out the same again.
  for path in tf.io.gfile.glob(first.latest_checkpoint() + ".data*"):
    tf.io.gfile.remove(path)
  first.train(fixed_pretraining_batch(CONFIG.vocab_size), 6)
  assert first.restored_checkpoint.endswith("ckpt-3")
  for actual, wanted in zip(first.model.trainable_variables, expected):
    np.testing.assert_allclose(actual.numpy(), wanted, rtol=1e-5, atol=1e-6)
