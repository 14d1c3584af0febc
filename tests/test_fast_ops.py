"""The hand-written fast paths of the training step give TensorFlow's values and gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.layers import MaskedLMHead, TransposedDense
from official_bert.layers.activations import get_activation
from official_bert.layers.dropout import Dropout, random_words
from official_bert.models.cross_entropy import label_logits, sparse_softmax_cross_entropy
from official_bert.pretraining.task import pretraining_metrics
from official_bert.training.gradient_norm import global_norm


def _both_modes(fn):
  """`fn` eagerly and XLA-compiled, since the training step runs under XLA by default."""
  return [fn, tf.function(fn, jit_compile=True)]


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_cross_entropy_value_and_gradient_match_tensorflow(mode):
  rng = np.random.default_rng(0)
  # Large logits check the max shift: exp(300) overflows float32.
  logits = tf.constant(rng.normal(size=(3, 4, 50)) * [[[1.0]], [[30.0]], [[300.0]]], tf.float32)
  labels = tf.constant(rng.integers(0, 50, (3, 4)), tf.int64)
  upstream = tf.constant(rng.normal(size=(3, 4)), tf.float32)

  def loss_and_gradient(cross_entropy):
    def fn(logits):
      with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = cross_entropy(labels, logits)
      return loss, tape.gradient(loss, logits, output_gradients=upstream)
    return _both_modes(fn)[mode == "xla"](logits)

  ours = loss_and_gradient(sparse_softmax_cross_entropy)
  reference = loss_and_gradient(
      lambda y, x: tf.nn.sparse_softmax_cross_entropy_with_logits(y, x))
  assert np.all(np.isfinite(ours[0]))
  np.testing.assert_allclose(ours[0], reference[0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ours[1], reference[1], rtol=1e-5, atol=1e-6)


def test_label_logits_pick_each_rows_label():
  logits = np.arange(24, dtype="float32").reshape(2, 3, 4)
  labels = np.array([[0, 3, 1], [2, 2, 0]])
  np.testing.assert_array_equal(label_logits(labels, logits),
                                np.take_along_axis(logits, labels[..., None], -1)[..., 0])


def test_pretraining_metrics_count_correct_predictions_and_average_losses():
  logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]], "float32"))
  outputs = {"mlm_logits": logits, "next_sentence_logits": np.array([[2.0, 1.0]], "float32")}
  labels = {"masked_lm_ids": np.array([[0, 1]]), "masked_lm_weights": np.array([[1.0, 1.0]]),
            "next_sentence_labels": np.array([[1]])}
  metrics = {name: (float(total), float(count))
             for name, (total, count) in pretraining_metrics(outputs, labels).items()}
  assert metrics["masked_lm_accuracy"] == (1.0, 2.0)  # the first is right, the second is not
  np.testing.assert_allclose(metrics["masked_lm_loss"][0], -np.log(0.7) - np.log(0.3), rtol=1e-5)
  assert metrics["next_sentence_accuracy"] == (0.0, 1.0)


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_tied_projection_gradients_match_automatic_differentiation(mode):
  vocab, hidden_size = 40, 16
  embedding = keras.layers.Embedding(vocab, hidden_size)
  embedding.build()
  head = MaskedLMHead(vocab, hidden_size, embedding=embedding)
  rng = np.random.default_rng(1)
  sequence = tf.constant(rng.normal(size=(2, 6, hidden_size)), tf.float32)
  positions = tf.constant([[1, 3, 5], [0, 2, 2]], tf.int32)
  head(sequence, positions)
  head.output_bias.assign(rng.normal(size=vocab).astype("float32"))
  upstream = tf.constant(rng.normal(size=(2, 3, vocab)), tf.float32)
  variables = [embedding.embeddings, head.output_bias, head.transform.kernel]

  def gradients(fn):
    def step(sequence):
      with tf.GradientTape() as tape:
        tape.watch(sequence)
        logits = fn(sequence)
      grads = tape.gradient(logits, [sequence] + variables, output_gradients=upstream)
      return logits, [tf.convert_to_tensor(g) for g in grads]
    return _both_modes(step)[mode == "xla"](sequence)

  def reference(sequence):
    selected = tf.gather(sequence, positions, batch_dims=1)
    hidden = head.layer_norm(head.transform(selected))
    return tf.einsum("bph,vh->bpv", hidden, embedding.embeddings) + head.output_bias

  ours, expected = gradients(lambda s: head(s, positions)), gradients(reference)
  np.testing.assert_allclose(ours[0], expected[0], rtol=1e-5, atol=1e-5)
  for got, want in zip(ours[1], expected[1]):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_exact_gelu_and_its_gradient_match_keras():
  x = tf.constant(np.linspace(-12, 12, 2401), tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours = get_activation("gelu_erf")(x)
    reference = keras.activations.gelu(x, approximate=False)
  np.testing.assert_allclose(ours, reference, atol=2e-6)
  np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), atol=2e-6)


@pytest.mark.parametrize("shape", [(64, 129, 33), (1,), (2, 3)])
def test_dropout_drops_its_rate_and_rescales_the_rest(shape):
  layer = Dropout(0.1, seed=3)
  outputs = np.array(layer(tf.ones(shape), training=True))
  assert outputs.shape == shape
  assert set(np.unique(outputs)) <= {0.0, np.float32(1 / 0.9)}
  if outputs.size > 10000:
    # 272,448 draws: the dropped fraction is within 4 standard deviations of 0.1.
    assert abs((outputs == 0).mean() - 0.1) < 4 * np.sqrt(0.09 / outputs.size)


def test_dropout_masks_repeat_for_a_seed_and_differ_between_calls():
  def masks(seed):
    layer = Dropout(0.5, seed=seed)
    return [np.array(layer(tf.ones((8, 100)), training=True)) for _ in range(2)]
  first, again = masks(7), masks(7)
  np.testing.assert_array_equal(first[0], again[0])
  assert not np.array_equal(first[0], first[1])
  assert 0.4 < (first[0] == 0).mean() < 0.6


def test_random_words_are_uniform_and_unrelated_across_positions_and_seeds():
  size = 1 << 16
  words = {seed: random_words([size], tf.constant(seed, tf.int32)).numpy()
           for seed in [(5, 0), (5, 1), (6, 0), (0, 0)]}
  # Each of the 32 bits is set half the time: 4 standard deviations of 65,536 fair coins.
  bits = (words[5, 0][:, None] >> np.arange(32, dtype=np.uint32)) & 1
  assert np.all(np.abs(bits.mean(0) - 0.5) < 4 * 0.5 / np.sqrt(size))
  # Neighbouring positions, the next step of a layer (seed counter + 1), another layer's seed,
  # and the zero seed all give uncorrelated words.
  uniform = {seed: w / 2.0**32 - 0.5 for seed, w in words.items()}
  pairs = [(uniform[5, 0][1:], uniform[5, 0][:-1]), (uniform[5, 0], uniform[5, 1]),
           (uniform[5, 0], uniform[6, 0]), (uniform[5, 0], uniform[0, 0])]
  for a, b in pairs:
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(size)


def test_dropout_gradient_is_the_mask_times_the_scale():
  layer = Dropout(0.25, seed=11)
  inputs = tf.constant(np.random.default_rng(3).normal(size=(16, 50)), tf.float32)
  upstream = tf.constant(np.random.default_rng(4).normal(size=(16, 50)), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    outputs = layer(inputs, training=True)
    loss = tf.reduce_sum(outputs * upstream)
  kept = outputs.numpy() != 0
  np.testing.assert_allclose(outputs.numpy()[kept], inputs.numpy()[kept] / 0.75, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(loss, inputs), upstream * kept / 0.75, rtol=1e-6)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_transposed_dense_is_a_dense_layer_with_the_kernel_turned(policy):
  rng = np.random.default_rng(2)
  inputs = tf.constant(rng.normal(size=(2, 3, 6)), tf.float32)
  layer = TransposedDense(4, dtype=policy)
  layer.build(inputs.shape)
  assert tuple(layer.kernel.shape) == (4, 6) and layer.kernel.dtype == "float32"
  layer.kernel.assign(rng.normal(size=(4, 6)).astype("float32"))
  layer.bias.assign(rng.normal(size=4).astype("float32"))
  dense = keras.layers.Dense(4, dtype=policy)
  dense.build(inputs.shape)
  dense.set_weights([layer.kernel.numpy().T, layer.bias.numpy()])
  upstream = tf.constant(rng.normal(size=(2, 3, 4)), tf.float32)

  def outputs_and_gradients(model):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      outputs = tf.cast(model(inputs), tf.float32)
    grads = tape.gradient(outputs, [inputs, *model.trainable_variables], output_gradients=upstream)
    return outputs, grads

  ours, reference = outputs_and_gradients(layer), outputs_and_gradients(dense)
  tolerance = 1e-5 if policy == "float32" else 2e-2
  np.testing.assert_allclose(ours[0], reference[0], rtol=tolerance, atol=tolerance)
  np.testing.assert_allclose(ours[1][0], reference[1][0], rtol=tolerance, atol=tolerance)
  np.testing.assert_allclose(ours[1][1], np.transpose(reference[1][1]), rtol=tolerance,
                             atol=tolerance)
  np.testing.assert_allclose(ours[1][2], reference[1][2], rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_global_norm_matches_tensorflow(mode):
  rng = np.random.default_rng(5)
  tensors = [tf.constant(rng.normal(size=shape), tf.float32)
             for shape in [(768, 96), (7, 5), (32,), (64,), (3, 4, 8)]]
  tensors.append(tf.IndexedSlices(tf.constant(rng.normal(size=(3, 8)), tf.float32),
                                  tf.constant([0, 2, 5]), tf.constant([6, 8])))
  norm = _both_modes(global_norm)[mode == "xla"](tensors)
  np.testing.assert_allclose(norm, tf.linalg.global_norm(tensors), rtol=1e-5)
  poisoned = tensors[:1] + [tf.constant([np.nan] * 64, tf.float32)]
  assert np.isnan(_both_modes(global_norm)[mode == "xla"](poisoned))


def test_random_words_number_positions_the_same_with_a_dynamic_shape():
  seed = tf.constant([9, 4])
  static = random_words([3, 50], seed)
  dynamic = tf.function(random_words, input_signature=[tf.TensorSpec([2], tf.int32),
                                                       tf.TensorSpec([2], tf.int32)])
  np.testing.assert_array_equal(static, dynamic(tf.constant([3, 50]), seed))
