"""bfloat16 on CPUs: the choice of XLA and kernels per device and dtype, the `cpu_onednn` forms
against the stock ones, and tiny models in mixed bfloat16 against float32 (forward and one
training step), to tolerances that fit bfloat16's 8-bit significand."""

import dataclasses
import functools
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, BertEncoder, BertPretrainer, ops
from official_bert.layers.activations import gelu_tanh, get_activation
from official_bert.layers.dense import Dense
from official_bert.layers.dropout import Dropout
from official_bert.layers.layer_norm import LayerNorm
from official_bert.layers.transformer_block import TransformerBlock
from official_bert.layers.transposed_dense import TransposedDense
from official_bert.models.losses import pretraining_losses
from official_bert.ops import cpu_onednn, cpu_xla, stock
from official_bert.tasks.classification import classification_loss
from official_bert.training import (
  OptimizerConfig,
  RuntimeConfig,
  Trainer,
  TrainerConfig,
  accelerators,
  create_optimizer,
  updates,
)

AMX = frozenset({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"})
NO_BF16 = frozenset({"avx2", "avx512f"})


@pytest.fixture(autouse=True)
def float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


# === The choice ===

@pytest.mark.parametrize("flags", [AMX, frozenset({"avx512_bf16"})])
def test_bfloat16_on_a_cpu_with_bf16_units_runs_without_xla_on_onednn_kernels(flags):
  choice = accelerators.choose("CPU", "bfloat16", flags)
  assert (choice.enable_xla, choice.kernels, choice.warning) == (False, "cpu_onednn", None)
  assert choice.compile_update and "XLA off" in choice.reason and "update apart" in choice.reason


def test_bfloat16_on_a_cpu_without_bf16_units_warns_that_float32_is_better():
  choice = accelerators.choose("CPU", "bfloat16", NO_BF16)
  assert "float32 is the better choice" in choice.warning
  assert accelerators.choose("CPU", "float32", NO_BF16).warning is None
  assert accelerators.choose("GPU", "bfloat16", NO_BF16).warning is None


def test_bfloat16_with_onednn_turned_off_warns_that_the_bf16_units_go_unused():
  choice = accelerators.choose("CPU", "bfloat16", AMX, onednn=False)
  assert (choice.enable_xla, choice.kernels) == (False, "cpu_onednn")
  assert "TF_ENABLE_ONEDNN_OPTS=0" in choice.warning
  assert accelerators.choose("CPU", "bfloat16", AMX, onednn=True).warning is None
  # None: TensorFlow's default for the CPU, on wherever there are bfloat16 units.
  assert accelerators.choose("CPU", "bfloat16", AMX).warning is None
  assert accelerators.choose("CPU", "bfloat16", AMX, enable_xla=True, onednn=False).warning is None


@pytest.mark.parametrize("flags, by_default", [
    (AMX, True), ({"avx512f", "avx512_vnni"}, True), ({"avx2", "avx_vnni"}, True),
    ({"avx512f", "avx512_bf16"}, True), (NO_BF16, False), ({"avx2"}, False), (set(), False)])
def test_onednn_is_on_by_default_where_the_cpu_has_neural_network_instructions(flags, by_default):
  assert accelerators.onednn_by_default(flags) is by_default
  assert accelerators.onednn_enabled(flags, {}) is by_default
  assert accelerators.onednn_enabled(flags, {"TF_ENABLE_ONEDNN_OPTS": "not a switch"}) is by_default
  for value, enabled in (("1", True), ("true", True), ("TRUE", True), ("0", False),
                         ("false", False)):
    assert accelerators.onednn_enabled(flags, {"TF_ENABLE_ONEDNN_OPTS": value}) is enabled


def test_the_engine_reads_whether_this_process_has_onednn(monkeypatch):
  monkeypatch.setattr(accelerators, "cpu_flags", lambda: AMX)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
  assert "TF_ENABLE_ONEDNN_OPTS=0" in RuntimeConfig(dtype="bfloat16").accelerator_choice(
      strategy).warning
  monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
  assert RuntimeConfig(dtype="bfloat16").accelerator_choice(strategy).warning is None


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_other_cpu_dtypes_keep_xla_and_its_kernels(dtype):
  choice = accelerators.choose("CPU", dtype, AMX)
  assert (choice.enable_xla, choice.kernels, choice.compile_update) == (True, "cpu_xla", False)


@pytest.mark.parametrize("device", ["GPU", "TPU", "gpu"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_accelerators_keep_xla_and_the_stock_kernels(device, dtype):
  choice = accelerators.choose(device, dtype, AMX)
  assert (choice.enable_xla, choice.kernels, choice.warning) == (True, "stock", None)
  assert not choice.compile_update
  assert not accelerators.choose(device, dtype, AMX, enable_xla=False).compile_update


def test_explicit_flags_win_and_auto_kernels_follow_xla():
  assert accelerators.choose("CPU", "bfloat16", AMX, enable_xla=True).kernels == "cpu_xla"
  assert accelerators.choose("CPU", "float32", AMX, enable_xla=False).kernels == "cpu_onednn"
  assert accelerators.choose("CPU", "float32", AMX, enable_xla=False).compile_update
  choice = accelerators.choose("CPU", "bfloat16", AMX, kernels="stock")
  assert (choice.enable_xla, choice.kernels) == (False, "stock")
  assert "as asked" in choice.reason
  choice = accelerators.choose("GPU", "float32", enable_xla=False, kernels="cpu_xla")
  assert (choice.enable_xla, choice.kernels) == (False, "cpu_xla")


def test_cpu_flags_are_read_from_the_flags_line(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f amx_bf16\nbugs\t\t: none\n")
  flags = accelerators.cpu_flags(str(cpuinfo))
  assert flags == {"fpu", "avx512f", "amx_bf16"} and accelerators.has_bf16_hardware(flags)
  assert accelerators.cpu_flags(str(tmp_path / "absent")) == frozenset()
  assert not accelerators.has_bf16_hardware(NO_BF16)


def test_engine_setup_applies_and_logs_the_choice():
  config = RuntimeConfig(dtype="bfloat16")
  strategy = config.setup()
  assert config.accelerator_choice(strategy).kernels == "cpu_onednn"
  assert config.accelerator_choice(strategy).enable_xla is False
  assert RuntimeConfig(dtype="float32").accelerator_choice(strategy).kernels == "cpu_xla"


# === The cpu_onednn forms ===

def _dense_case(seed, shape, units, transpose):
  rng = np.random.default_rng(seed)
  inputs = tf.constant(rng.normal(size=shape), tf.float32)
  kernel_shape = (units, shape[-1]) if transpose else (shape[-1], units)
  kernel = tf.constant(rng.normal(size=kernel_shape) / np.sqrt(shape[-1]), tf.float32)
  bias = tf.constant(rng.normal(size=units), tf.float32)
  return inputs, kernel, bias


def _value_and_gradients(fn, inputs, kernel, bias):
  with tf.GradientTape() as tape:
    tape.watch([inputs, kernel, bias])
    outputs = fn(inputs, kernel, bias)
    loss = tf.reduce_sum(outputs * tf.cos(outputs))
  return [outputs, *tape.gradient(loss, [inputs, kernel, bias])]


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 5)])
@pytest.mark.parametrize("transpose", [False, True])
def test_onednn_dense_matches_stock_forward_and_backward(shape, transpose):
  # In a graph, where the optimizer fuses the product, bias and activation.
  inputs, kernel, bias = _dense_case(0, shape, 4, transpose)
  for activation in (None, "gelu_tanh", "gelu_erf", "relu"):
    function = activation and get_activation(activation)
    results = []
    for module in (stock, cpu_onednn):
      @tf.function
      def fn(x, k, b, module=module, function=function, with_residual=activation in (None, "relu")):
        # The residual (here the product's own inputs) fuses into the product on cpu_onednn.
        residual = x[..., :4] if with_residual else None
        return module.dense(x, k, b, function, transpose_kernel=transpose, residual=residual)
      results.append(_value_and_gradients(fn, inputs, kernel, bias))
    for expected, actual in zip(*results):
      np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5,
                                 err_msg=str(activation))


def test_onednn_dense_in_bfloat16_is_the_float32_product_rounded():
  inputs, kernel, bias = _dense_case(1, (4, 16, 64), 32, False)
  bf16 = [tf.cast(t, tf.bfloat16) for t in (inputs, kernel, bias)]
  fused = tf.function(lambda x, k, b: cpu_onednn.dense(x, k, b, gelu_tanh))(*bf16)
  exact = stock.dense(*[tf.cast(t, tf.float32) for t in bf16], gelu_tanh)
  assert fused.dtype == tf.bfloat16
  np.testing.assert_allclose(tf.cast(fused, tf.float32).numpy(), exact.numpy(), rtol=2e-2,
                             atol=2e-2)


def test_onednn_feed_forward_activation_is_compiled_in_training_and_fused_in_inference():
  # Inference keeps the bfloat16 form that fuses into the product; training, whose activation
  # cannot fuse (its input is kept for the gradient), runs it apart: in the fused kernel where
  # it loads (`test_ops_bfloat16_elementwise.py`), else as an XLA program of its own.
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  block = TransformerBlock(8, 2, 16, kernels="cpu_onednn")
  inputs, mask = tf.ones((2, 5, 8)), tf.ones((2, 5))
  for training in (True, False):
    graph = tf.function(lambda x, m, training=training: block(x, m, training=training)
                        ).get_concrete_function(inputs, mask).graph
    tanh = [op.inputs[0].dtype for op in graph.get_operations() if op.type == "Tanh"]
    compiled = [f.name for f in graph._functions.values()
                if f.cached_definition.attr["_XlaMustCompile"].b]
    apart = "BiasGeluBfloat16" in {op.type for op in graph.get_operations()} or bool(compiled)
    assert tanh == ([] if training else [tf.bfloat16])
    assert apart is training


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu_erf", "relu"])
def test_compiled_activation_matches_stock_forward_and_backward(activation):
  function = get_activation(activation)
  rng = np.random.default_rng(5)
  inputs = tf.cast(tf.constant(rng.normal(size=(64, 96)) * 2, tf.float32), tf.bfloat16)
  bias = tf.cast(tf.constant(rng.normal(size=96), tf.float32), tf.bfloat16)
  upstream = tf.cast(tf.constant(rng.normal(size=(64, 96)), tf.float32), tf.bfloat16)
  results = []
  for fn in (lambda x, b: function(tf.cast(x, tf.float32) + tf.cast(b, tf.float32)),
             tf.function(cpu_onednn.compiled_activation(function))):
    with tf.GradientTape() as tape:
      tape.watch([inputs, bias])
      outputs = fn(inputs, bias)
    results.append([tf.cast(t, tf.float32).numpy() for t in (
        outputs, *tape.gradient(outputs, [inputs, bias], tf.cast(upstream, outputs.dtype)))])
  (expected, *expected_grads), (actual, *actual_grads) = results
  assert actual.dtype == np.float32  # cast back above; the compiled form gives bfloat16
  # The compiled form computes in float32 and rounds to bfloat16 (8-bit significand) once.
  np.testing.assert_allclose(actual, expected, rtol=8e-3, atol=1e-6)
  for actual_grad, expected_grad in zip(actual_grads, expected_grads):
    # The bias gradient is a sum over 64 rows: its size, hence its rounding, is larger.
    np.testing.assert_allclose(actual_grad, expected_grad, rtol=1.6e-2,
                               atol=1e-2 * np.abs(expected_grad).max())


def test_compiled_layer_norm_matches_stock_forward_and_backward():
  rng = np.random.default_rng(7)
  inputs = tf.cast(tf.constant(rng.normal(size=(3, 16, 64)) * 3 + 1, tf.float32), tf.bfloat16)
  upstream = tf.cast(tf.constant(rng.normal(size=(3, 16, 64)), tf.float32), tf.bfloat16)
  gamma = tf.Variable(rng.normal(size=64).astype("float32"))
  beta = tf.Variable(rng.normal(size=64).astype("float32"))
  results = []
  for backend in (stock, cpu_onednn):
    @tf.function
    def step(x, backend=backend):
      with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = backend.layer_norm(x, gamma, beta, 1e-12, training=True)
      return [outputs] + tape.gradient(outputs, [x, gamma, beta],
                                       tf.cast(upstream, outputs.dtype))
    results.append(step(inputs))
  (expected, *expected_grads), (actual, *actual_grads) = results
  assert actual.dtype == tf.bfloat16 and expected.dtype == tf.float32
  # Float32 inside, the output rounded to bfloat16 once.
  np.testing.assert_allclose(tf.cast(actual, tf.float32), expected, rtol=8e-3, atol=2e-2)
  for actual_grad, expected_grad in zip(actual_grads, expected_grads):
    np.testing.assert_allclose(tf.cast(actual_grad, tf.float32), tf.cast(expected_grad, tf.float32),
                               rtol=1.6e-2, atol=1e-2)


def test_onednn_bfloat16_projection_onto_the_table_gives_float32_logits_and_gradients():
  rng = np.random.default_rng(9)
  hidden, table, bias = (tf.constant(rng.normal(size=shape), tf.bfloat16)
                         for shape in [(6, 16), (40, 16), (40,)])
  upstream = tf.constant(rng.normal(size=(6, 40)), tf.float32)
  results = []
  for backend, dtype in ((stock, tf.float32), (cpu_onednn, tf.bfloat16)):
    @tf.function
    def step(inputs, backend=backend):
      with tf.GradientTape() as tape:
        tape.watch(inputs)
        logits = backend.project_onto_table(*inputs)
      return [logits] + tape.gradient(logits, inputs, tf.cast(upstream, logits.dtype))
    results.append(step([tf.cast(t, dtype) for t in (hidden, table, bias)]))
  (expected, *expected_grads), (actual, *actual_grads) = results
  # The bias is added to the bfloat16 product in float32, and the logits stay float32.
  assert actual.dtype == tf.float32
  np.testing.assert_allclose(actual, expected, rtol=1e-2, atol=2e-2)
  for actual_grad, expected_grad in zip(actual_grads, expected_grads):
    assert actual_grad.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(actual_grad, tf.float32), expected_grad,
                               rtol=2e-2, atol=5e-2)


def test_onednn_bfloat16_training_attention_matches_stock_forward_and_backward():
  rng = np.random.default_rng(4)
  qkv = tf.cast(rng.normal(size=(2, 6, 3 * 8)) * 2, tf.bfloat16)
  mask = tf.constant([[1] * 6, [1] * 4 + [0] * 2])
  upstream = tf.cast(rng.normal(size=(2, 6, 8)), tf.bfloat16)
  results = []
  for module in (stock, cpu_onednn):
    @tf.function
    def step(x, module=module):
      with tf.GradientTape() as tape:
        tape.watch(x)
        context = module.attention(x, mask, 2, lambda p, training: p, training=True)
      return context, tape.gradient(context, x, tf.cast(upstream, context.dtype))
    results.append(step(qkv))
  (expected, expected_grad), (actual, actual_grad) = results
  assert actual.dtype == actual_grad.dtype == tf.bfloat16
  np.testing.assert_allclose(tf.cast(actual, tf.float32), tf.cast(expected, tf.float32),
                             rtol=2e-2, atol=3e-2)
  np.testing.assert_allclose(tf.cast(actual_grad, tf.float32),
                             tf.cast(expected_grad, tf.float32), rtol=3e-2, atol=3e-2)
  # The padding keys get no attention, so their values get no gradient.
  assert not np.any(tf.cast(actual_grad, tf.float32).numpy()[1, 4:, 16:])
  graph = step.get_concrete_function(qkv).graph
  # The softmax in one pass each way: the fused kernel where it loads, else an XLA program.
  assert ("MaskedSoftmaxDropoutBfloat16" in {op.type for op in graph.get_operations()}
          or any(f.cached_definition.attr["_XlaMustCompile"].b for f in graph._functions.values()))


def test_compiled_programs_cast_bfloat16_by_the_bits_as_tf_cast_does():
  # Ties to even both ways (0x3F80_8000 keeps 0x3F80, 0x3F81_8000 goes up), the largest
  # float rounding to infinity, infinities, zeros, a subnormal, and NaNs whose plain rounding
  # would give -0.0 (0x7FFF_FFFF) or infinity (0x7F80_0001).
  edge_bits = [0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x0,
               0x80000000, 0x00012345, 0x7FFFFFFF, 0x7F800001, 0xFFC00000]
  random_bits = np.random.default_rng(8).integers(0, 2**32, 4096, dtype=np.uint64)
  values = tf.bitcast(tf.constant(np.concatenate([edge_bits, random_bits]), tf.uint32),
                      tf.float32)
  cast_to_bfloat16 = tf.function(lambda t: cpu_onednn._cast(t, tf.bfloat16), jit_compile=True)
  actual, expected = cast_to_bfloat16(values), tf.cast(values, tf.bfloat16)
  nan = np.isnan(values.numpy())
  assert nan[9:12].all()
  np.testing.assert_array_equal(np.isnan(tf.cast(actual, tf.float32).numpy()), nan)
  np.testing.assert_array_equal(tf.bitcast(actual, tf.uint16).numpy()[~nan],
                                tf.bitcast(expected, tf.uint16).numpy()[~nan])
  widened = tf.function(lambda t: cpu_onednn._cast(t, tf.float32), jit_compile=True)(expected)
  np.testing.assert_array_equal(tf.bitcast(widened, tf.uint32).numpy()[~nan],
                                tf.bitcast(tf.cast(expected, tf.float32), tf.uint32).numpy()[~nan])


@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_compiled_dropout_add_layer_norm_matches_the_backend_composition(rate):
  rng = np.random.default_rng(9)
  inputs, residual, upstream = (
      tf.cast(tf.constant(rng.normal(size=(2, 16, 64)) * 2, tf.float32), tf.bfloat16)
      for _ in range(3))
  gamma = tf.Variable(rng.normal(size=64).astype("float32"))
  beta = tf.Variable(rng.normal(size=64).astype("float32"))
  bias = tf.cast(tf.constant(rng.normal(size=64), tf.float32), tf.bfloat16)
  seed = tf.constant([5, 6])
  results = []
  # The reference: the bias, cpu_xla's hashed dropout (the same mask), the sum and the layer
  # norm, each in float32.
  for fn, dtype in ((cpu_xla.dropout_add_layer_norm, tf.float32),
                    (cpu_onednn.dropout_add_layer_norm, tf.bfloat16)):
    @tf.function
    def step(x, r, fn=fn, dtype=dtype):
      x, r, b = tf.cast(x, dtype), tf.cast(r, dtype), tf.cast(bias, dtype)
      with tf.GradientTape() as tape:
        tape.watch([x, r, b])
        outputs = fn(x, r, gamma, beta, 1e-12, rate, seed, bias=b)
      return [outputs] + tape.gradient(outputs, [x, r, gamma, beta, b],
                                       tf.cast(upstream, outputs.dtype))
    results.append([tf.cast(t, tf.float32).numpy() for t in step(inputs, residual)])
  (expected, *expected_grads), (actual, *actual_grads) = results
  np.testing.assert_allclose(actual, expected, rtol=8e-3, atol=3e-2)
  dropped = tf.cast(cpu_xla.dropout(tf.ones((2, 16, 64)), rate, seed), tf.float32).numpy() == 0
  assert (0.2 < dropped.mean() < 0.4) if rate else not dropped.any()
  # No gradient reaches the dropped inputs; the residual gets the whole gradient.
  assert not actual_grads[0][dropped].any()
  for actual_grad, expected_grad in zip(actual_grads, expected_grads):
    np.testing.assert_allclose(actual_grad, expected_grad, rtol=1.6e-2,
                               atol=1.5e-2 * np.abs(expected_grad).max())


def test_compiled_softmax_drops_the_probabilities_with_the_hashed_mask():
  rng = np.random.default_rng(10)
  scores = tf.cast(rng.normal(size=(2, 2, 6, 6)) * 3, tf.bfloat16)
  upstream = tf.cast(rng.normal(size=(2, 2, 6, 6)), tf.bfloat16)
  padding = tf.constant([[0.0] * 6, [0.0] * 4 + [stock.MASKED_SCORE] * 2])[:, None, None, :]
  seed = tf.constant([7, 8])
  results = []
  for fn in (lambda s: cpu_xla.dropout(tf.nn.softmax(tf.cast(s, tf.float32) * 0.5 + padding),
                                       0.5, seed),
             lambda s: cpu_onednn.compiled_masked_softmax(0.5, 0.5)(s, padding, seed)):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      probs = fn(scores)
    results.append([tf.cast(t, tf.float32).numpy()
                    for t in (probs, tape.gradient(probs, scores, tf.cast(upstream, probs.dtype)))])
  (expected, expected_grad), (actual, actual_grad) = results
  assert 0.3 < (expected == 0).mean() < 0.8
  np.testing.assert_array_equal(actual == 0, expected == 0)
  np.testing.assert_allclose(actual, expected, rtol=8e-3, atol=1e-6)
  np.testing.assert_allclose(actual_grad, expected_grad, rtol=2e-2, atol=2e-2)


def test_bfloat16_training_block_with_dropout_matches_the_cpu_xla_composition():
  # The same weights and dropout seeds on cpu_onednn (fused programs) and on cpu_xla (each
  # kernel apart, the same hashed masks) give the same training outputs and gradients.
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  blocks = []
  for backend in ("cpu_xla", "cpu_onednn"):
    # Weights large enough for the sublayers' outputs to count beside the residuals.
    blocks.append(TransformerBlock(16, 2, 32, dropout_rate=0.2, attention_dropout_rate=0.2,
                                   initializer_range=0.5, kernels=backend, name="block"))
  rng = np.random.default_rng(11)
  inputs = tf.constant(rng.normal(size=(2, 6, 16)), tf.float32)
  mask = tf.constant([[1] * 6, [1] * 4 + [0] * 2], tf.float32)
  # A loss whose gradient is not zero (a sum of squares of a layer norm's outputs is constant).
  weights = tf.constant(rng.normal(size=(2, 6, 16)), tf.float32)
  results = []
  for block in blocks:
    block.build(inputs.shape)
    if results:
      block.set_weights(blocks[0].get_weights())
    for layer in (block.attention.probs_dropout, block.attention_dropout, block.output_dropout):
      layer.seed_generator.state.assign([3, 4])
    @tf.function
    def step(x, block=block):
      with tf.GradientTape() as tape:
        outputs = block(x, mask, training=True)
        loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * weights)
      return outputs, tape.gradient(loss, block.trainable_variables)
    outputs, grads = step(inputs)
    results.append([tf.cast(outputs, tf.float32).numpy()] + [g.numpy() for g in grads])
  (expected, *expected_grads), (actual, *actual_grads) = results
  no_dropout = tf.cast(blocks[0](inputs, mask, training=False), tf.float32).numpy()
  assert np.abs(expected - no_dropout).max() > 0.5  # the masks were applied
  assert _relative_error(actual, expected) < 2e-2
  for actual_grad, expected_grad in zip(actual_grads, expected_grads):
    assert _relative_error(actual_grad, expected_grad) < 5e-2


def test_onednn_layer_norm_is_compiled_in_training_for_bfloat16_only():
  gamma, beta = tf.ones(8), tf.zeros(8)
  for dtype, training, compiled in [(tf.bfloat16, True, True), (tf.float32, True, False),
                                    (tf.bfloat16, False, False)]:
    graph = tf.function(lambda x, training=training: cpu_onednn.layer_norm(
        x, gamma, beta, 1e-12, training=training)).get_concrete_function(
            tf.TensorSpec((None, 8), dtype)).graph
    assert compiled is any(f.cached_definition.attr["_XlaMustCompile"].b
                           for f in graph._functions.values())


def test_onednn_dropout_gradient_hashes_the_same_mask_in_bfloat16():
  inputs = tf.cast(tf.constant(np.random.default_rng(6).normal(size=(8, 4, 33)), tf.float32),
                   tf.bfloat16)
  seed = tf.constant([3, 9])
  @tf.function
  def fn(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      outputs = cpu_onednn.dropout(x, 0.1, seed)
    return outputs, tape.gradient(outputs, x, tf.ones_like(outputs))
  outputs, gradient = fn(inputs)
  expected = cpu_xla.dropout(inputs, 0.1, seed)
  assert outputs.dtype == gradient.dtype == tf.bfloat16
  np.testing.assert_array_equal(outputs.numpy(), expected.numpy())
  kept = expected.numpy() != 0
  assert 0.85 < kept.mean() < 0.95
  # The stock form's gradient: the scale where kept, zero where dropped.
  np.testing.assert_allclose(tf.cast(gradient, tf.float32).numpy(),
                             kept * np.float32(tf.cast(1 / 0.9, tf.bfloat16).numpy()), rtol=1e-6)


@pytest.mark.parametrize("backend", list(ops.BACKENDS))
def test_dense_layer_is_keras_dense_on_every_backend(backend):
  inputs = np.random.default_rng(2).normal(size=(2, 3, 5)).astype("float32")
  reference = keras.layers.Dense(4, activation="relu")
  reference.build(inputs.shape)
  reference.set_weights([np.random.default_rng(4).normal(size=w.shape).astype("float32")
                         for w in reference.get_weights()])
  expected = reference(inputs)
  layer = Dense(4, activation="relu", kernels=backend)
  layer.build(inputs.shape)
  layer.set_weights(reference.get_weights())
  assert [v.path.split("/")[-1] for v in layer.weights] == ["kernel", "bias"]
  for call in (layer, tf.function(layer)):
    np.testing.assert_allclose(call(inputs).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
  restored = Dense.from_config(layer.get_config())
  assert type(restored) is Dense and restored._kernels is ops.kernels(backend)


@pytest.mark.parametrize("backend", list(ops.BACKENDS))
def test_dense_layer_with_lora_runs_keras_product_also_at_the_end_of_a_sublayer(backend):
  # With LoRA, `Dense` runs Keras' own product, whose kernel includes the low-rank update; the
  # fused end of a sublayer then takes the stock form.
  rng = np.random.default_rng(5)
  inputs = rng.normal(size=(2, 3, 5)).astype("float32")
  layer = Dense(4, bias_initializer="ones", kernels=backend)
  layer.build(inputs.shape)
  layer.enable_lora(2)
  for weight in (layer.lora_kernel_a, layer.lora_kernel_b):
    weight.assign(rng.normal(size=weight.shape).astype("float32"))
  kernel = layer.kernel.numpy()  # the frozen kernel plus the low-rank update
  assert not np.allclose(kernel, layer._kernel.numpy())  # pylint: disable=protected-access
  np.testing.assert_allclose(layer(inputs).numpy(), inputs @ kernel + 1.0, rtol=1e-5, atol=1e-5)
  norm = LayerNorm(epsilon=1e-12, kernels=backend)
  residual = tf.constant(rng.normal(size=(2, 3, 4)), tf.float32)
  for training in (False, True):
    actual = ops.kernels(backend).project_dropout_add_layer_norm(
        tf.constant(inputs), layer, residual, Dropout(0.0), norm, training=training)
    np.testing.assert_allclose(actual.numpy(), norm(inputs @ kernel + 1.0 + residual).numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", list(ops.BACKENDS))
@pytest.mark.parametrize("projection_class", [Dense, TransposedDense])
def test_the_end_of_a_sublayer_normalizes_the_projection_plus_residual(backend, projection_class):
  # `project_dropout_add_layer_norm` without dropout, in training and inference, on each
  # backend: the bias and the residual are added where each backend fuses them.
  rng = np.random.default_rng(13)
  hidden, residual = (tf.constant(rng.normal(size=(2, 3, 8)), tf.float32) for _ in range(2))
  projection = projection_class(8, kernels=backend)
  projection.build(hidden.shape)
  projection.set_weights([rng.normal(size=w.shape).astype("float32") for w in projection.weights])
  reference = keras.layers.LayerNormalization(epsilon=1e-12)
  reference.build(hidden.shape)
  norm = LayerNorm(epsilon=1e-12, kernels=backend)
  norm.build(hidden.shape)
  norm.set_weights([rng.normal(size=8).astype("float32") for _ in range(2)])
  reference.set_weights(norm.get_weights())
  expected = reference(projection(hidden) + residual).numpy()
  seam = ops.kernels(backend).project_dropout_add_layer_norm
  for training in (False, True):  # without dropout, training sums the same way
    actual = tf.function(seam, reduce_retracing=True)(
        hidden, projection, residual, Dropout(0.0, kernels=backend), norm, training=training)
    np.testing.assert_allclose(actual.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", list(ops.BACKENDS))
def test_transformer_block_adds_the_same_residuals_in_training_and_inference(backend):
  # Inference adds each residual to the projection before it (fused there on cpu_onednn);
  # training, without dropout, adds it with the bias after: the same function.
  block = TransformerBlock(8, 2, 16, kernels=backend)
  rng = np.random.default_rng(4)
  inputs = tf.constant(rng.normal(size=(2, 5, 8)), tf.float32)
  block.build(inputs.shape)
  # Biases too: training adds the projections' output biases where the sublayers end.
  block.set_weights([rng.normal(size=w.shape).astype("float32") * 0.5
                     for w in block.get_weights()])
  mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], tf.float32)
  inference = tf.function(lambda x, m: block(x, m, training=False))(inputs, mask)
  training = block(inputs, mask, training=True)
  np.testing.assert_allclose(inference.numpy(), training.numpy(), rtol=1e-5, atol=1e-5)


# === Tiny models in bfloat16 against float32 ===

CONFIG = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)


def _features(batch=4, seq=12, predictions=3, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, CONFIG.vocab_size, (batch, seq)).astype("int32")
  mask = np.ones_like(ids)
  mask[0, seq // 2:] = 0
  features = {"input_word_ids": ids * mask, "input_mask": mask,
              "input_type_ids": (np.arange(seq) >= seq // 3).astype("int32")[None].repeat(batch, 0),
              "masked_lm_positions": np.sort(rng.permutation(np.arange(1, seq // 2))[
                  :predictions])[None].repeat(batch, 0).astype("int32")}
  labels = {"labels": rng.integers(0, 3, batch).astype("int32"),
            "weights": np.ones(batch, "float32"),
            "masked_lm_ids": rng.integers(5, CONFIG.vocab_size, (batch, predictions)),
            "masked_lm_weights": np.ones((batch, predictions), "float32"),
            "next_sentence_labels": rng.integers(0, 2, batch).astype("int32")}
  return features, labels


def _twins(build, backend):
  """The same model in float32 (stock kernels) and mixed bfloat16 (`backend`), same weights."""
  float32 = build("float32", "stock")
  bfloat16 = build("mixed_bfloat16", backend)
  bfloat16.set_weights(float32.get_weights())
  return float32, bfloat16


def _relative_error(actual, expected):
  actual, expected = (np.asarray(tf.cast(t, tf.float32)) for t in (actual, expected))
  return np.linalg.norm(actual - expected) / np.linalg.norm(expected)


@pytest.mark.parametrize("backend", ["cpu_onednn", "stock"])
def test_bfloat16_encoder_forward_is_float32_to_bfloat16_precision(backend):
  float32, bfloat16 = _twins(
      lambda dtype, kernels: BertEncoder(CONFIG, dtype=dtype, kernels=kernels), backend)
  features, _ = _features()
  del features["masked_lm_positions"]
  expected = float32(features)
  actual = tf.function(bfloat16)(features)
  assert actual["sequence_output"].dtype == tf.bfloat16
  assert all(v.dtype == "float32" for v in bfloat16.weights)  # master weights
  for name in ("sequence_output", "pooled_output"):
    assert _relative_error(actual[name], expected[name]) < 3e-2, name
  layer = bfloat16.transformer_layers[0]
  assert layer.output_layer_norm.compute_dtype == "float32"


def _train_step(model, loss_fn, features, labels):
  """The loss and the weights after one AdamW step, and the gradients (float32 each)."""
  optimizer = create_optimizer("adamw", 1e-3, 10, 0)
  # Its slots made here: a first call that makes variables would trace the step twice.
  optimizer.build(model.trainable_variables)

  @tf.function(autograph=False)
  def step():
    with tf.GradientTape() as tape:
      loss = loss_fn(model(features, training=True), labels)["loss"]
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss, gradients

  loss, gradients = step()
  return (loss, [tf.convert_to_tensor(g) for g in gradients],
          [v.numpy() for v in model.trainable_variables])


@pytest.mark.parametrize("task", ["classifier", "pretrainer"])
def test_one_bfloat16_training_step_follows_float32(task):
  if task == "classifier":
    def build(dtype, kernels):
      return BertClassifier(CONFIG, num_classes=3, dtype=dtype, kernels=kernels)
    loss_fn = classification_loss(False)
  else:
    def build(dtype, kernels):
      return BertPretrainer(CONFIG, dtype=dtype, kernels=kernels)
    loss_fn = functools.partial(pretraining_losses, kernels="cpu_onednn")
  float32, bfloat16 = _twins(build, "cpu_onednn")
  features, labels = _features()
  if task == "classifier":
    features = {k: v for k, v in features.items() if k != "masked_lm_positions"}
  before = [v.numpy() for v in float32.trainable_variables]
  loss32, grads32, after32 = _train_step(float32, loss_fn, features, labels)
  loss16, grads16, after16 = _train_step(bfloat16, loss_fn, features, labels)
  assert loss16.dtype == tf.float32 and abs(float(loss16) - float(loss32)) < 2e-2 * float(loss32)
  assert all(g.dtype == tf.float32 for g in grads16)
  flat32 = np.concatenate([np.ravel(g) for g in grads32])
  flat16 = np.concatenate([np.ravel(g) for g in grads16])
  assert flat16 @ flat32 / np.linalg.norm(flat16) / np.linalg.norm(flat32) > 0.99
  # The update itself: each weight moved by about the same step in both precisions.
  step32 = np.concatenate([np.ravel(a - b) for a, b in zip(after32, before)])
  step16 = np.concatenate([np.ravel(a - b) for a, b in zip(after16, before)])
  assert _relative_error(step16, step32) < 0.2


@pytest.mark.slow  # a learning check: 30 steps
def test_trainer_trains_a_tiny_classifier_in_bfloat16_without_xla(tmp_path):
  engine = RuntimeConfig(dtype="bfloat16", seed=0)
  strategy = engine.setup()
  assert not engine.accelerator_choice(strategy).enable_xla
  features, labels = _features(batch=8)
  del features["masked_lm_positions"]
  with strategy.scope():
    model = BertClassifier(CONFIG, num_classes=3,
                           kernels=engine.accelerator_choice(strategy).kernels)
    optimizer = create_optimizer("adamw", 3e-3, 30, 0, dtype="bfloat16")
  trainer = Trainer(model, classification_loss(False), optimizer, strategy=strategy,
                    model_dir=str(tmp_path), config=TrainerConfig(steps_per_loop=10, log_steps=10),
                    runtime=engine)
  def dataset_fn(_):
    return tf.data.Dataset.from_tensors((features, labels)).repeat()
  first = trainer.train(dataset_fn, 10)["loss"]
  last = trainer.train(dataset_fn, 30)["loss"]
  assert model.encoder.transformer_layers[0].intermediate.compute_dtype == "bfloat16"
  assert ops.backends_of(model) == {"cpu_onednn"}
  assert np.isfinite(last) and last < 0.5 * first


def _trained_weights(tmp_path, compile_update):
  """A tiny float32 classifier's weights after 3 steps without XLA for the step, its update
  compiled apart by XLA or not."""
  engine = RuntimeConfig(enable_xla=False, kernels="stock", seed=0)
  strategy = engine.setup()
  choice = engine.accelerator_choice(strategy)
  assert choice.compile_update  # the engine's choice for a CPU step without XLA
  features, labels = _features(batch=8)
  del features["masked_lm_positions"]
  keras.utils.set_random_seed(0)
  with strategy.scope():
    model = BertClassifier(CONFIG, num_classes=3, kernels=choice.kernels)
    optimizer = create_optimizer("adamw", 1e-2, 30, 1)
  with mock.patch.object(RuntimeConfig, "accelerator_choice", return_value=dataclasses.replace(
      choice, compile_update=compile_update)):
    trainer = Trainer(model, classification_loss(False), optimizer, strategy=strategy,
                      model_dir=str(tmp_path), runtime=engine, config=TrainerConfig(
                          steps_per_loop=3, log_steps=3,
                          optimizer=OptimizerConfig(clip_norm=0.05)))
  logs = trainer.train(lambda _: tf.data.Dataset.from_tensors((features, labels)).repeat(), 3)
  # The update is one XLA program of its own when asked, else part of the step's graph.
  assert type(trainer._update) is (updates.CompiledUpdate if compile_update else updates.Update)
  return logs, [v.numpy() for v in model.trainable_variables]


def test_the_update_compiled_apart_computes_the_graph_update(tmp_path):
  graph_logs, graph = _trained_weights(tmp_path / "graph", compile_update=False)
  compiled_logs, compiled = _trained_weights(tmp_path / "compiled", compile_update=True)
  # Clipping was active (the norm is above 0.05), so the compiled update clipped too.
  assert compiled_logs["gradient_norm"] > 0.05
  np.testing.assert_allclose(compiled_logs["loss"], graph_logs["loss"], rtol=1e-5)
  for actual, expected in zip(compiled, graph):
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-6)
