"""The `cpu_onednn` inference forms of layer norm and attention give the stock forms' values, in
float32 and, to bfloat16's precision, in bfloat16; in training they are the stock forms."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import ops
from official_bert.layers.layer_norm import LayerNorm
from official_bert.ops import cpu_onednn, stock

EPSILON = 1e-12


def _layer_norm_case(shape, seed=0):
  rng = np.random.default_rng(seed)
  inputs = tf.constant(rng.normal(1.0, 3.0, size=shape), tf.float32)
  gamma = tf.constant(rng.normal(size=shape[-1]), tf.float32)
  beta = tf.constant(rng.normal(size=shape[-1]), tf.float32)
  return inputs, gamma, beta


def _dynamic(fn, inputs, *others):
  """`fn` as a graph whose leading dimensions are unknown, as in a SavedModel's signature (the
  form in which the optimizer fuses the layer norm)."""
  specs = [tf.TensorSpec([None] * (inputs.shape.rank - 1) + inputs.shape[-1:], inputs.dtype)]
  specs += [tf.TensorSpec(t.shape, t.dtype) for t in others]
  return tf.function(fn, input_signature=specs)


def _onednn_layer_norm(x, gamma, beta):
  return cpu_onednn.layer_norm(x, gamma, beta, EPSILON)


@pytest.mark.parametrize("shape", [(6, 16), (2, 3, 16)])
def test_onednn_layer_norm_matches_stock_in_float32(shape):
  inputs, gamma, beta = _layer_norm_case(shape)
  expected = stock.layer_norm(inputs, gamma, beta, EPSILON)
  for fn in (_onednn_layer_norm, tf.function(_onednn_layer_norm),
             _dynamic(_onednn_layer_norm, inputs, gamma, beta)):
    actual = fn(inputs, gamma, beta)
    assert actual.dtype == tf.float32
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_onednn_layer_norm_keeps_bfloat16_inputs_in_bfloat16_with_float32_statistics():
  inputs, gamma, beta = _layer_norm_case((4, 8, 64), seed=1)
  # A large common offset: statistics in bfloat16 would lose the deviations.
  inputs = tf.cast(inputs + 100.0, tf.bfloat16)
  expected = stock.layer_norm(inputs, gamma, beta, EPSILON)  # float32 of the same inputs
  for fn in (_onednn_layer_norm, _dynamic(_onednn_layer_norm, inputs, gamma, beta)):
    actual = fn(inputs, gamma, beta)
    assert actual.dtype == tf.bfloat16
    # bfloat16 rounds to 8 significant bits: 2^-8 of outputs up to a few units.
    np.testing.assert_allclose(tf.cast(actual, tf.float32).numpy(), expected.numpy(),
                               rtol=1e-2, atol=3e-2)


def _value_and_gradients(fn, *tensors):
  with tf.GradientTape() as tape:
    tape.watch(tensors)
    outputs = fn(*tensors)
    loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * tf.cos(tf.cast(outputs, tf.float32)))
  return [outputs, *tape.gradient(loss, list(tensors))]


def test_onednn_layer_norm_in_training_is_the_stock_form():
  inputs, gamma, beta = _layer_norm_case((2, 3, 16), seed=2)
  results = [_value_and_gradients(
      lambda x, g, b, module=module: module.layer_norm(x, g, b, EPSILON, training=True),
      inputs, gamma, beta) for module in (stock, cpu_onednn)]
  for expected, actual in zip(*results):
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("backend", list(ops.BACKENDS))
def test_layer_norm_layer_is_keras_layer_normalization_on_every_backend(backend):
  inputs = np.random.default_rng(3).normal(size=(2, 3, 8)).astype("float32")
  reference = keras.layers.LayerNormalization(epsilon=EPSILON, beta_initializer="ones",
                                              gamma_initializer="random_normal")
  expected = reference(inputs)
  layer = LayerNorm(epsilon=EPSILON, kernels=backend)
  layer.build(inputs.shape)
  layer.set_weights(reference.get_weights())
  assert [v.path.split("/")[-1] for v in layer.weights] == ["gamma", "beta"]
  np.testing.assert_allclose(layer(inputs).numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
  keras_layer = keras.layers.LayerNormalization(epsilon=EPSILON, name=layer.name)
  keras_layer.build(inputs.shape)
  assert layer.get_config() == dict(keras_layer.get_config(), kernels=backend)
  assert type(LayerNorm.from_config(layer.get_config())) is LayerNorm


# === Attention ===

def _attention_case(batch=3, seq=7, heads=2, head_size=4, seed=0):
  rng = np.random.default_rng(seed)
  qkv = tf.constant(rng.normal(size=(batch, seq, 3 * heads * head_size)), tf.float32)
  mask = np.ones((batch, seq), "int32")
  mask[0, seq // 2:] = 0  # padding
  mask[1, -1] = 0
  return qkv, tf.constant(mask)


def _no_dropout(probs, training):
  del training
  return probs


def test_onednn_attention_matches_stock_in_float32():
  qkv, mask = _attention_case()
  expected = stock.attention(qkv, mask, 2, _no_dropout)
  for fn in (cpu_onednn.attention, tf.function(cpu_onednn.attention, reduce_retracing=True)):
    actual = fn(qkv, mask, 2, _no_dropout)
    assert actual.shape == expected.shape and actual.dtype == tf.float32
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_onednn_attention_in_bfloat16_is_float32_to_bfloat16_precision():
  qkv, mask = _attention_case(batch=2, seq=16, heads=4, head_size=16, seed=1)
  qkv = tf.cast(qkv, tf.bfloat16)
  expected = stock.attention(tf.cast(qkv, tf.float32), mask, 4, _no_dropout)
  fused = tf.function(lambda x, m: cpu_onednn.attention(x, m, 4, _no_dropout))
  for fn in (lambda x, m: cpu_onednn.attention(x, m, 4, _no_dropout), fused):
    actual = fn(qkv, mask)
    assert actual.dtype == tf.bfloat16
    error = np.linalg.norm(tf.cast(actual, tf.float32) - expected) / np.linalg.norm(expected)
    assert error < 1e-2
  # Padding positions get no weight: changing their keys and values changes no real position.
  real = tf.cast(mask, tf.bool)
  changed = tf.where(real[..., None], qkv, tf.cast(7.0, tf.bfloat16))
  np.testing.assert_array_equal(tf.boolean_mask(fused(changed, mask), real).numpy(),
                                tf.boolean_mask(fused(qkv, mask), real).numpy())


def test_onednn_attention_in_training_is_the_stock_form():
  qkv, mask = _attention_case(seed=2)

  def halve(probs, training):
    assert training
    return probs * 0.5

  results = [_value_and_gradients(
      lambda x, module=module: module.attention(x, mask, 2, halve, training=True), qkv)
      for module in (stock, cpu_onednn)]
  for expected, actual in zip(*results):
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_onednn_forms_leave_float16_to_the_stock_forms():
  inputs, gamma, beta = _layer_norm_case((2, 3, 16), seed=3)
  half = tf.cast(inputs, tf.float16)
  np.testing.assert_array_equal(cpu_onednn.layer_norm(half, gamma, beta, EPSILON).numpy(),
                                stock.layer_norm(half, gamma, beta, EPSILON).numpy())
  qkv, mask = _attention_case(seed=3)
  np.testing.assert_array_equal(
      cpu_onednn.attention(tf.cast(qkv, tf.float16), mask, 2, _no_dropout).numpy(),
      stock.attention(tf.cast(qkv, tf.float16), mask, 2, _no_dropout).numpy())


def test_layer_norm_layer_rejects_the_forms_it_does_not_compute():
  for kwargs in ({"axis": 1}, {"center": False}, {"scale": False}):
    with pytest.raises(ValueError, match="last axis with gamma and beta"):
      LayerNorm(**kwargs)
