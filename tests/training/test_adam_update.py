"""The fused AdamW update kernel: its arithmetic against `AdamWeightDecay`, sparse rows, bad
input, and a bfloat16 pre-training step that uses it against the compiled update. Its build is
`test_ops_native.py`'s."""

import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.ops import adam_update, native
from official_bert.training import fused_update, updates
from official_bert.training.adam_weight_decay import AdamWeightDecay

from testing import engine_configs, fixed_pretraining_batch, make_trainer, tiny_bert_config


@pytest.fixture
def built(native_kernels):
  """The kernel, built once a session (`conftest.py`); without a C++ compiler the tests that
  need it skip, and training takes the compiled update (test_ops_weight_copies.py)."""
  if native_kernels is not None:
    pytest.skip(f"no C++ compiler: {native_kernels}")


CONFIG = tiny_bert_config(60, hidden_size=32, num_hidden_layers=1, max_position_embeddings=32,
                          dropout=0.0)


@pytest.fixture(autouse=True)
def restore_policy_and_kernels():
  """The bfloat16 trainers below set the dtype policy process-wide; the next test gets float32."""
  yield
  keras.mixed_precision.set_global_policy("float32")


def _state(shape, seed):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=shape).astype("float32"),
          (rng.normal(size=shape) * 0.01).astype("float32"),
          (rng.uniform(size=shape) * 1e-4).astype("float32"),
          tf.cast(rng.normal(size=shape) * 0.01, tf.bfloat16))


def _keras_step(weight, m, v, gradient, learning_rate, weight_decay):
  """One `AdamWeightDecay` step by Keras from the given state."""
  variable = keras.Variable(weight, name="kernel")
  optimizer = AdamWeightDecay(learning_rate=learning_rate, weight_decay=weight_decay or None)
  optimizer.build([variable])
  first, second = optimizer.slots(variable)
  first.assign(m)
  second.assign(v)
  optimizer.apply([tf.cast(gradient, tf.float32)], [variable])
  return variable.numpy(), first.numpy(), second.numpy()


def _fused_step(weight, m, v, gradient, learning_rate, weight_decay, scale=1.0, rows=None,
                row_gradients=None):
  variables = [tf.Variable(x) for x in (weight, m, v)]
  copy = tf.Variable(tf.zeros(weight.shape, tf.bfloat16))
  adam_update.update(*variables, copy, gradient, learning_rate, scale, 0.9, 0.999, 1e-6,
                     weight_decay, rows, row_gradients)
  return [x.numpy() for x in variables] + [copy]


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("shape", [(7, 300), (5,), (40, 1000)])
def test_the_kernel_steps_as_adam_weight_decay(shape, weight_decay):
  weight, m, v, gradient = _state(shape, seed=1)
  expected = _keras_step(weight, m, v, gradient, 0.01, weight_decay)
  *actual, copy = _fused_step(weight, m, v, gradient, 0.01, weight_decay)
  for got, wanted in zip(actual, expected):
    np.testing.assert_allclose(got, wanted, rtol=1e-6, atol=1e-9)
  assert np.abs(actual[0] - weight).max() > 1e-3  # the step moved the weights
  np.testing.assert_array_equal(copy.numpy(), tf.cast(actual[0], tf.bfloat16).numpy())


@pytest.mark.usefixtures("built")
def test_the_gradient_scale_and_sparse_rows_enter_the_gradient():
  weight, m, v, gradient = _state((6, 4), seed=2)
  sparse = tf.IndexedSlices(tf.constant(np.arange(12, dtype="float32").reshape(3, 4) * 1e-3),
                            tf.constant([4, 1, 4]), dense_shape=tf.constant([6, 4]))
  dense = tf.cast(gradient, tf.float32) + tf.convert_to_tensor(sparse)
  expected = _keras_step(weight, m, v, dense * 0.5, 0.01, 0.01)
  rows, row_gradients = adam_update.sparse_rows(sparse)
  actual = _fused_step(weight, m, v, gradient, 0.01, 0.01, scale=0.5, rows=rows,
                       row_gradients=row_gradients)[:3]
  for got, wanted in zip(actual, expected):
    np.testing.assert_allclose(got, wanted, rtol=1e-6, atol=1e-9)


@pytest.mark.usefixtures("built")
def test_bad_rows_and_shapes_are_refused_with_what_is_wrong():
  weight, m, v, gradient = _state((6, 4), seed=3)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"rows\[1\] = 9 is outside \[0, 6\)"):
    _fused_step(weight, m, v, gradient, 0.01, 0.0, rows=tf.constant([0, 9]),
                row_gradients=tf.zeros([2, 4]))
  with pytest.raises(tf.errors.InvalidArgumentError, match="repeated"):
    _fused_step(weight, m, v, gradient, 0.01, 0.0, rows=tf.constant([2, 2]),
                row_gradients=tf.zeros([2, 4]))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape is \[6,4\]"):
    _fused_step(weight, m, v, gradient[:3], 0.01, 0.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="must be scalars"):
    _fused_step(weight, m, v, gradient, tf.constant([0.01, 0.02]), 0.0)


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("shape", [(0,), (5,), (3, 16384), (70001,), (123, 457)])
def test_the_squared_norm_sums_the_squares_in_float32(shape):
  values = np.random.default_rng(4).normal(size=shape).astype("float32")
  gradient = tf.cast(values, tf.bfloat16)
  expected = np.square(gradient.numpy().astype("float64")).sum()
  np.testing.assert_allclose(float(adam_update.squared_norm(gradient)), expected, rtol=2e-6)
  traced = tf.function(adam_update.squared_norm)(gradient)
  assert traced.dtype == tf.float32 and traced.shape == ()


@pytest.fixture(scope="module")
def without_kernel(tmp_path_factory, native_kernels):
  """`(kernel(), trainer, logs, cache, files)`: a bfloat16 step (clip norm 1.0) with the kernel
  asked for, from a cache that holds the session's other builds (the element-wise kernels, where
  a compiler built them: `files`) but not this kernel's. It takes the compiled update with all
  else as in the steps below, so the clip-norm-1.0 comparison takes it as its compiled
  reference too: one trainer less."""
  cache = tmp_path_factory.mktemp("without_kernel") / "cache"
  if native_kernels is None:
    for source in set(native.SOURCES) - {"adam_update.cc"}:
      library = native.library_path(source)
      folder = native.library_path(source, cache).parent
      folder.mkdir(parents=True, exist_ok=True)
      for path in (library, library.with_suffix(".json")):
        shutil.copy(path, folder)
  files = sorted(cache.rglob("*"))
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv(native.CACHE_VARIABLE, str(cache))
    native.load.cache_clear()
    try:
      kernel = adam_update.kernel()
      trainer, _, logs = _trained(cache.parent / "model", True, patch)
    finally:
      native.load.cache_clear()
      keras.mixed_precision.set_global_policy("float32")
  return kernel, trainer, logs, cache, files


def test_without_a_built_kernel_the_trainer_takes_the_compiled_update(without_kernel):
  # No build of this kernel in the cache: `kernel()` is None, with one warning line, and nothing
  # is compiled.
  kernel, trainer, logs, cache, files = without_kernel
  assert kernel is None
  # pylint: disable=protected-access
  assert type(trainer._update) is updates.CopiesUpdate
  assert np.isfinite(logs["loss"]) and int(trainer.optimizer.iterations) == 1
  assert sorted(cache.rglob("*")) == files
  assert not native.library_path("adam_update.cc", cache).exists()


def test_the_kernel_can_be_turned_off(monkeypatch):
  monkeypatch.setenv(adam_update.ENABLE_VARIABLE, "0")
  assert adam_update.kernel() is None
  with pytest.raises(RuntimeError, match="unavailable"):
    adam_update.update(*[tf.Variable(tf.zeros([2]))] * 3, tf.Variable(tf.zeros([2], tf.bfloat16)),
                       tf.zeros([2], tf.bfloat16), 0.1, 1.0, 0.9, 0.999, 1e-6, 0.0)


# === A bfloat16 pre-training step on the kernel against the compiled update ===

def _trained(model_dir, fused, monkeypatch, clip_norm=1.0):
  monkeypatch.setenv(adam_update.ENABLE_VARIABLE, "1" if fused else "0")
  keras.utils.set_random_seed(0)  # the same initial weights for both
  trainer = make_trainer(model_dir, CONFIG, engine_configs(
      dtype="bfloat16", steps_per_loop=1, log_steps=1, seed=0, clip_norm=clip_norm),
      learning_rate=1e-2, num_steps=30)
  before = [v.numpy() for v in trainer.model.trainable_variables]
  logs = trainer.train(fixed_pretraining_batch(CONFIG.vocab_size), 1)
  return trainer, before, logs


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("clip_norm", [1.0, 0.05])
def test_a_step_on_the_kernel_matches_the_compiled_update(tmp_path, monkeypatch, clip_norm,
                                                          request):
  fused, before, fused_logs = _trained(tmp_path / "fused", True, monkeypatch, clip_norm)
  if clip_norm == 1.0:  # the trainer without this kernel's build: the compiled update
    _, compiled, compiled_logs, _, _ = request.getfixturevalue("without_kernel")
  else:  # the kernel turned off
    compiled, _, compiled_logs = _trained(tmp_path / "compiled", False, monkeypatch, clip_norm)
  # pylint: disable=protected-access
  assert isinstance(fused._update, fused_update.FusedUpdate)
  assert type(compiled._update) is updates.CopiesUpdate
  np.testing.assert_allclose(fused_logs["gradient_norm"], compiled_logs["gradient_norm"],
                             rtol=1e-5)
  assert int(fused.optimizer.iterations) == int(compiled.optimizer.iterations) == 1
  for got, wanted in zip(fused.model.trainable_variables, compiled.model.trainable_variables):
    np.testing.assert_allclose(got.numpy(), wanted.numpy(), rtol=1e-5, atol=1e-6)
    m_got, v_got = fused.optimizer.slots(got)
    m_wanted, v_wanted = compiled.optimizer.slots(wanted)
    np.testing.assert_allclose(m_got.numpy(), m_wanted.numpy(), rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(v_got.numpy(), v_wanted.numpy(), rtol=1e-4, atol=1e-12)
  table = fused.model.trainable_variables[0]
  assert "word_embeddings" in table.path and np.abs(table.numpy() - before[0]).max() > 1e-3
  copies = fused._update.copies
  for variable, copy in zip(copies.variables, copies.copies):
    np.testing.assert_array_equal(copy.numpy(), tf.cast(variable, tf.bfloat16).numpy())
