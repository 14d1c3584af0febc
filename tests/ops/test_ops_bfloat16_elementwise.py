"""The fused bfloat16 element-wise kernels: each against the compiled XLA program it replaces,
forward and backward, with the same dropout masks; bad input; the switch and the fallback; and
a bfloat16 pre-training step on them against the same step on the programs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.layers.activations import gelu_tanh
from official_bert.layers.transformer_block import TransformerBlock
from official_bert.ops import bfloat16_elementwise, cpu_onednn, cpu_xla, native, stock

from testing import engine_configs, fixed_pretraining_batch, make_trainer, tiny_bert_config


@pytest.fixture
def built(native_kernels):
  """The kernels, built once a session (`conftest.py`); without a C++ compiler the tests that
  need them skip, and bfloat16 training takes the compiled programs (test_bf16.py)."""
  if native_kernels is not None:
    pytest.skip(f"no C++ compiler: {native_kernels}")


FUSED_OPS = {"BiasGeluBfloat16", "DropoutAddLayerNormBfloat16", "MaskedSoftmaxDropoutBfloat16"}


@pytest.fixture(autouse=True)
def restore_policy_and_kernels():
  """The trainers below set the dtype policy process-wide; the next test gets float32."""
  yield
  keras.mixed_precision.set_global_policy("float32")


def _bfloat16(rng, shape, scale=1.0):
  return tf.cast(tf.constant(rng.normal(size=shape) * scale, tf.float32), tf.bfloat16)


def _forward_and_backward(fn, inputs, upstream):
  """`fn(*inputs)` and its gradients for `upstream`, as float32 arrays."""
  @tf.function
  def run(*args):
    with tf.GradientTape() as tape:
      tape.watch(args)
      outputs = fn(*args)
    return [outputs] + tape.gradient(outputs, list(args), tf.cast(upstream, outputs.dtype))
  return [tf.cast(t, tf.float32).numpy() for t in run(*inputs)]


def _assert_close(actual, expected, rtol=1.6e-2):
  """Each array within bfloat16's rounding of its reference, scaled to the reference's size."""
  for got, wanted in zip(actual, expected):
    assert got.shape == wanted.shape
    np.testing.assert_allclose(got, wanted, rtol=rtol, atol=1e-2 * np.abs(wanted).max() + 1e-6)


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_dropout_add_layer_norm_matches_the_compiled_program(rate):
  rng = np.random.default_rng(1)
  inputs, residual, upstream = (_bfloat16(rng, (3, 10, 96), 2) for _ in range(3))
  bias = _bfloat16(rng, (96,))
  gamma = tf.constant(rng.normal(size=96), tf.float32)
  beta = tf.constant(rng.normal(size=96), tf.float32)
  seed = tf.constant([5, 6])
  args = (inputs, bias, residual, gamma, beta)
  expected = _forward_and_backward(
      lambda *a: cpu_onednn.compiled_dropout_add_layer_norm(1e-12, rate)(*a, seed), args,
      upstream)
  actual = _forward_and_backward(
      lambda *a: bfloat16_elementwise.dropout_add_layer_norm(*a, seed, 1e-12, rate), args,
      upstream)
  _assert_close(actual, expected)
  dropped = tf.cast(cpu_xla.dropout(tf.ones((3, 10, 96)), rate, seed), tf.float32).numpy() == 0
  assert (0.2 < dropped.mean() < 0.4) if rate else not dropped.any()
  # The dropped inputs get no gradient; the residual gets the whole gradient.
  assert not actual[1][dropped].any()
  assert np.count_nonzero(actual[3][dropped]) >= 0.95 * dropped.sum()


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("rate", [0.0, 0.5])
def test_masked_softmax_matches_the_compiled_program_with_the_same_mask(rate):
  rng = np.random.default_rng(2)
  scores, upstream = _bfloat16(rng, (2, 3, 7, 9), 3), _bfloat16(rng, (2, 3, 7, 9))
  padding = tf.constant([[0.0] * 9, [0.0] * 6 + [stock.MASKED_SCORE] * 3])
  seed = tf.constant([7, 8])
  expected = _forward_and_backward(
      lambda s: cpu_onednn.compiled_masked_softmax(0.25, rate)(s, padding[:, None, None, :], seed),
      [scores], upstream)
  actual = _forward_and_backward(
      lambda s: bfloat16_elementwise.masked_softmax(s, padding, seed, 0.25, rate), [scores],
      upstream)
  np.testing.assert_array_equal(actual[0] == 0, expected[0] == 0)  # the same mask, bit for bit
  assert not actual[0][1, :, :, 6:].any()  # padding keys get no attention
  if rate:
    assert 0.3 < (actual[0][0] == 0).mean() < 0.7
  else:
    np.testing.assert_allclose(actual[0].sum(-1), 1.0, rtol=1e-2)
  _assert_close(actual, expected)


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("activation,approximate", [(gelu_tanh, True), (stock.gelu, False)])
def test_bias_gelu_matches_the_compiled_program(activation, approximate):
  rng = np.random.default_rng(3)
  inputs, upstream, bias = _bfloat16(rng, (40, 160), 3), _bfloat16(rng, (40, 160)), _bfloat16(
      rng, (160,))
  expected = _forward_and_backward(cpu_onednn.compiled_activation(activation), [inputs, bias],
                                   upstream)
  actual = _forward_and_backward(
      lambda x, b: bfloat16_elementwise.bias_gelu(x, b, approximate), [inputs, bias], upstream)
  _assert_close(actual, expected)


@pytest.mark.usefixtures("built")
def test_bias_add_passes_the_gradient_and_sums_the_bias_gradient_in_float32():
  rng = np.random.default_rng(4)
  inputs, upstream, bias = _bfloat16(rng, (300, 24)), _bfloat16(rng, (300, 24)), _bfloat16(
      rng, (24,))
  outputs, inputs_grad, bias_grad = _forward_and_backward(bfloat16_elementwise.bias_add,
                                                          [inputs, bias], upstream)
  np.testing.assert_array_equal(outputs, tf.cast(inputs + bias, tf.float32).numpy())
  np.testing.assert_array_equal(inputs_grad, tf.cast(upstream, tf.float32).numpy())
  # A float32 sum of 300 rows, rounded once (a bfloat16 sum would drift by several units).
  exact = tf.cast(upstream, tf.float64).numpy().sum(0)
  np.testing.assert_array_equal(bias_grad, tf.cast(tf.cast(exact, tf.float32), tf.bfloat16)
                                .numpy().astype("float32"))


@pytest.mark.usefixtures("built")
def test_bad_shapes_are_refused_with_the_input_that_is_wrong():
  x = tf.zeros((4, 8), tf.bfloat16)
  seed = tf.constant([1, 2])
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"residual has shape \[4,6\]"):
    bfloat16_elementwise.dropout_add_layer_norm(x, tf.zeros(8, tf.bfloat16),
                                                tf.zeros((4, 6), tf.bfloat16), tf.ones(8),
                                                tf.zeros(8), seed, 1e-12, 0.1)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"gamma must be \[8\]"):
    bfloat16_elementwise.dropout_add_layer_norm(x, tf.zeros(8, tf.bfloat16), x, tf.ones(5),
                                                tf.zeros(8), seed, 1e-12, 0.1)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"seed must be an int32 \[2\]"):
    bfloat16_elementwise.dropout_add_layer_norm(x, tf.zeros(8, tf.bfloat16), x, tf.ones(8),
                                                tf.zeros(8), tf.constant([1, 2, 3]), 1e-12, 0.1)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"padding must be \[batch, keys\]"):
    bfloat16_elementwise.masked_softmax(tf.zeros((2, 1, 3, 5), tf.bfloat16), tf.zeros((2, 3)),
                                        seed, 1.0, 0.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"bias must be \[8\]"):
    bfloat16_elementwise.bias_gelu(x, tf.zeros(3, tf.bfloat16), True)


def _training_graph_ops():
  """The op types and XLA-compiled functions of a bfloat16 `cpu_onednn` training block's
  forward and backward graph."""
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  block = TransformerBlock(16, 2, 32, dropout_rate=0.1, attention_dropout_rate=0.1,
                           kernels="cpu_onednn")
  inputs, mask = tf.ones((2, 5, 16)), tf.ones((2, 5))

  @tf.function
  def step(x, m):
    with tf.GradientTape() as tape:
      tape.watch(x)
      outputs = block(x, m, training=True)
    return tape.gradient(outputs, x)

  graph = step.get_concrete_function(inputs, mask).graph
  types = {op.type for op in graph.get_operations()}
  for function in graph._functions.values():  # pylint: disable=protected-access
    types |= {node.op for node in function.cached_definition.node_def}
  compiled = [f for f in graph._functions.values()  # pylint: disable=protected-access
              if f.cached_definition.attr["_XlaMustCompile"].b]
  return types, compiled


@pytest.mark.usefixtures("built")
def test_a_bfloat16_training_block_runs_the_kernels_and_the_switch_turns_them_off(monkeypatch):
  types, compiled = _training_graph_ops()
  grads = {f"{name}Grad" for name in FUSED_OPS} | {"BiasGradBfloat16"}
  assert FUSED_OPS | grads <= types and not compiled
  monkeypatch.setenv(bfloat16_elementwise.ENABLE_VARIABLE, "0")
  assert bfloat16_elementwise.kernels() is None
  types, compiled = _training_graph_ops()
  assert not (FUSED_OPS | grads) & types and compiled


def test_without_built_kernels_training_takes_the_compiled_programs(tmp_path, monkeypatch):
  monkeypatch.setenv(native.CACHE_VARIABLE, str(tmp_path / "cache"))
  native.load.cache_clear()
  try:
    assert bfloat16_elementwise.kernels() is None
    types, compiled = _training_graph_ops()
    assert not FUSED_OPS & types and compiled
    with pytest.raises(RuntimeError, match="unavailable"):
      bfloat16_elementwise.bias_add(tf.zeros((1, 2), tf.bfloat16), tf.zeros(2, tf.bfloat16))
  finally:
    native.load.cache_clear()
  assert not (tmp_path / "cache").exists()  # nothing was compiled


# === A bfloat16 pre-training step on the kernels against the compiled programs ===

CONFIG = tiny_bert_config(60, hidden_size=32, num_hidden_layers=1, max_position_embeddings=32,
                          dropout=0.2)


def _trained(model_dir, fused, monkeypatch):
  monkeypatch.setenv(bfloat16_elementwise.ENABLE_VARIABLE, "1" if fused else "0")
  keras.utils.set_random_seed(0)  # the same initial weights and dropout seeds for both
  trainer = make_trainer(model_dir, CONFIG, engine_configs(
      dtype="bfloat16", enable_xla=False, kernels="cpu_onednn", steps_per_loop=1, log_steps=1,
      seed=0), learning_rate=1e-3, num_steps=30)
  before = [v.numpy() for v in trainer.model.trainable_variables]
  logs = trainer.train(fixed_pretraining_batch(CONFIG.vocab_size), 2)
  return trainer, before, logs


# A whole step on all the kernels, two trainers: the tests above check each kernel against its
# program, so the fast lane leaves this run to the whole suite.
@pytest.mark.slow
@pytest.mark.usefixtures("built")
def test_a_pretraining_step_on_the_kernels_matches_the_compiled_programs(tmp_path, monkeypatch):
  fused, before, fused_logs = _trained(tmp_path / "fused", True, monkeypatch)
  compiled, _, compiled_logs = _trained(tmp_path / "compiled", False, monkeypatch)
  for key in ("loss", "gradient_norm"):
    np.testing.assert_allclose(fused_logs[key], compiled_logs[key], rtol=2e-2)
  for got, wanted, initial in zip(fused.model.trainable_variables,
                                  compiled.model.trainable_variables, before):
    # Two Adam steps of 1e-3 move a weight by up to about 2e-3, whatever the gradient's size:
    # nearly all weights agree to a tenth of that; the few whose gradients are near zero (where
    # bfloat16 rounding decides the direction of Adam's step) within the steps' reach.
    difference = np.abs(got.numpy() - wanted.numpy())
    assert np.mean(difference > 2e-4) < 0.02 and difference.max() < 4e-3, got.path
    assert np.abs(got.numpy() - initial).max() > 5e-4, got.path


@pytest.mark.usefixtures("built")
def test_inside_an_xla_program_the_compiled_programs_run_with_the_same_results():
  rng = np.random.default_rng(5)
  inputs, residual = _bfloat16(rng, (2, 4, 32), 2), _bfloat16(rng, (2, 4, 32))

  def sublayer_end(x, r):
    return cpu_onednn.dropout_add_layer_norm(x, r, tf.ones(32), tf.zeros(32), 1e-12, 0.3,
                                             tf.constant([1, 2]))

  # The kernels have no XLA form: a step compiled whole keeps the programs, which XLA inlines.
  inside = tf.function(sublayer_end, jit_compile=True)
  outside = tf.function(sublayer_end)
  assert "DropoutAddLayerNormBfloat16" not in {
      op.type for op in inside.get_concrete_function(inputs, residual).graph.get_operations()}
  assert "DropoutAddLayerNormBfloat16" in {
      op.type for op in outside.get_concrete_function(inputs, residual).graph.get_operations()}
  np.testing.assert_allclose(tf.cast(inside(inputs, residual), tf.float32),
                             tf.cast(outside(inputs, residual), tf.float32), rtol=1e-2, atol=2e-2)
