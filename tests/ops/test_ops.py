"""The kernel backends (`official_bert.ops`): `cpu_xla`'s forms give `stock`'s values and
gradients, eagerly and under XLA, in the layers and in a whole pre-training model."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertPretrainer, ops
from official_bert.layers import Dropout, MaskedLMHead, TransposedDense
from official_bert.layers.activations import get_activation
from official_bert.models.losses import pretraining_losses
from official_bert.ops import cpu_xla, stock
from official_bert.ops.cpu_xla import label_logits, random_words
from official_bert.tasks.pretraining import pretraining_metrics
from official_bert.training import RuntimeConfig

from testing import tiny_bert_config

BACKENDS = list(ops.BACKENDS)


def _both_modes(fn):
  """`fn` eagerly and XLA-compiled, since the training step runs under XLA by default."""
  return [fn, tf.function(fn, jit_compile=True)]


def test_every_backend_defines_every_kernel():
  for module in map(ops.kernels, ops.BACKENDS):
    for name in ops.KERNELS:
      assert callable(getattr(module, name)), (module.__name__, name)


def test_auto_follows_the_device_and_the_engine_hands_its_choice_to_the_models():
  assert ops.resolve_backend("auto", "CPU") == "cpu_xla"
  assert ops.resolve_backend("auto", "GPU") == ops.resolve_backend("auto", "TPU") == "stock"
  assert ops.resolve_backend("stock", "CPU") == "stock"
  assert ops.kernels() is ops.kernels("auto") is cpu_xla  # this machine has no GPU
  assert ops.kernels(stock) is stock and ops.choice_name(stock) == "stock"
  with pytest.raises(ValueError, match="kernels must be one of auto, stock, cpu_xla"):
    RuntimeConfig(kernels="fast")
  with pytest.raises(ValueError, match="kernels must be one of auto, stock, cpu_xla"):
    Dropout(0.5, kernels="fast")
  engine = RuntimeConfig(kernels="stock")
  assert engine.accelerator_choice(engine.setup()).kernels == "stock"
  engine = RuntimeConfig(enable_xla=False)  # auto, on this machine's CPU without XLA
  assert engine.accelerator_choice(engine.setup()).kernels == "cpu_onednn"
  # Setting up an engine leaves the kernels of new models alone.
  assert BertPretrainer(tiny_bert_config(30, hidden_size=16)).kernels == "auto"


def test_layers_keep_their_kernels_and_save_the_choice_in_their_config():
  layer = Dropout(0.5, seed=1, kernels="stock")
  assert layer._kernels is stock and Dropout(0.5)._kernels is cpu_xla
  assert get_activation("gelu_erf", "cpu_xla") is cpu_xla.gelu
  assert get_activation("gelu_erf", stock) is stock.gelu
  assert get_activation("gelu") is get_activation("gelu", "cpu_onednn")  # one tanh form
  assert layer.get_config()["kernels"] == "stock"
  assert Dropout.from_config(layer.get_config())._kernels is stock
  config = layer.get_config()
  del config["kernels"]  # as written before the choice was the layer's
  assert Dropout.from_config(config)._kernels is cpu_xla


def test_two_models_in_one_process_keep_different_kernels():
  config = tiny_bert_config(30, hidden_size=16)
  first = BertPretrainer(config, kernels="cpu_onednn")
  second = BertPretrainer(config, kernels="stock")
  assert ops.backends_of(first) == {"cpu_onednn"} and ops.backends_of(second) == {"stock"}
  restored = BertPretrainer.from_config(first.get_config())
  assert restored.kernels == "cpu_onednn" and ops.backends_of(restored) == {"cpu_onednn"}
  old = first.get_config()
  del old["kernels"]  # a config written before the field
  assert ops.backends_of(BertPretrainer.from_config(old)) == {"cpu_xla"}


@pytest.mark.parametrize("mode", ["eager", "xla"])
@pytest.mark.parametrize("backend", ["cpu_xla", "cpu_onednn"])
@pytest.mark.parametrize("classes", [50, 1100])  # cpu_onednn compiles from 1,024 classes on
def test_cross_entropy_values_and_gradients_agree(mode, backend, classes):
  rng = np.random.default_rng(0)
  # Large logits check the max shift: exp(300) overflows float32.
  logits = tf.constant(rng.normal(size=(3, 4, classes)) * [[[1.0]], [[30.0]], [[300.0]]],
                       tf.float32)
  labels = tf.constant(rng.integers(0, classes, (3, 4)), tf.int64)
  upstream = tf.constant(rng.normal(size=(3, 4)), tf.float32)

  def loss_and_gradient(kernels):
    def fn(logits):
      with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = kernels.sparse_softmax_cross_entropy(labels, logits)
      return loss, tape.gradient(loss, logits, output_gradients=upstream)
    return _both_modes(fn)[mode == "xla"](logits)

  ours, reference = loss_and_gradient(ops.kernels(backend)), loss_and_gradient(stock)
  assert np.all(np.isfinite(ours[0]))
  np.testing.assert_allclose(ours[0], reference[0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ours[1], reference[1], rtol=1e-5, atol=1e-6)


def test_label_logits_pick_each_rows_label():
  logits = np.arange(24, dtype="float32").reshape(2, 3, 4)
  labels = np.array([[0, 3, 1], [2, 2, 0]])
  expected = np.take_along_axis(logits, labels[..., None], -1)[..., 0]
  np.testing.assert_array_equal(label_logits(labels, logits), expected)  # cpu_xla's gather
  np.testing.assert_array_equal(stock.label_logits(labels, logits), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pretraining_metrics_count_correct_predictions_and_average_losses(backend):
  logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]], "float32"))
  outputs = {"mlm_logits": logits, "next_sentence_logits": np.array([[2.0, 1.0]], "float32")}
  labels = {"masked_lm_ids": np.array([[0, 1]]), "masked_lm_weights": np.array([[1.0, 1.0]]),
            "next_sentence_labels": np.array([[1]])}
  metrics = {name: (float(total), float(count))
             for name, (total, count) in pretraining_metrics(outputs, labels, backend).items()}
  assert metrics["masked_lm_accuracy"] == (1.0, 2.0)  # the first is right, the second is not
  np.testing.assert_allclose(metrics["masked_lm_loss"][0], -np.log(0.7) - np.log(0.3), rtol=1e-5)
  assert metrics["next_sentence_accuracy"] == (0.0, 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_tied_projection_gradients_match_automatic_differentiation(backend, mode):
  vocab, hidden_size = 40, 16
  embedding = keras.layers.Embedding(vocab, hidden_size)
  embedding.build()
  head = MaskedLMHead(vocab, hidden_size, embedding=embedding, kernels=backend)
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


def test_exact_gelu_and_its_gradient_agree():
  x = tf.constant(np.linspace(-12, 12, 2401), tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours = cpu_xla.gelu(x)
    reference = stock.gelu(x)
  np.testing.assert_allclose(ours, reference, atol=2e-6)
  np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), atol=2e-6)
  assert stock.gelu(tf.constant(1.0, tf.bfloat16)).dtype == cpu_xla.gelu(
      tf.constant(1.0, tf.bfloat16)).dtype == tf.bfloat16


def _dropout(backend, rate, seed):
  return Dropout(rate, seed=seed, kernels=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(64, 129, 33), (1,), (2, 3)])
def test_dropout_drops_its_rate_and_rescales_the_rest(backend, shape):
  outputs = np.array(_dropout(backend, 0.1, seed=3)(tf.ones(shape), training=True))
  assert outputs.shape == shape
  assert set(np.unique(outputs)) <= {0.0, np.float32(1 / 0.9)}
  if outputs.size > 10000:
    # 272,448 draws: the dropped fraction is within 4 standard deviations of 0.1.
    assert abs((outputs == 0).mean() - 0.1) < 4 * np.sqrt(0.09 / outputs.size)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_at_rate_zero_or_inference_is_the_identity(backend):
  inputs = tf.constant(np.random.default_rng(2).normal(size=(4, 7)), tf.float32)
  np.testing.assert_array_equal(_dropout(backend, 0.0, 1)(inputs, training=True), inputs)
  np.testing.assert_array_equal(_dropout(backend, 0.5, 1)(inputs, training=False), inputs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_masks_repeat_for_a_seed_and_differ_between_calls(backend):
  def masks(seed):
    layer = _dropout(backend, 0.5, seed)
    return [np.array(layer(tf.ones((8, 100)), training=True)) for _ in range(2)]
  first, again = masks(7), masks(7)
  np.testing.assert_array_equal(first[0], again[0])
  assert not np.array_equal(first[0], first[1])
  assert 0.4 < (first[0] == 0).mean() < 0.6


def test_the_dropout_backends_draw_different_masks_of_the_same_law():
  """Same seed, different streams; each keeps independent elements at the same rate (a 2x2
  table of two backends' masks is close to the product of their marginals)."""
  shape, rate = (200, 500), 0.3
  kept = {backend: np.array(_dropout(backend, rate, 5)(tf.ones(shape), training=True)) != 0
          for backend in BACKENDS}
  sigma = np.sqrt(rate * (1 - rate) / np.prod(shape))
  for mask in kept.values():
    assert abs(mask.mean() - (1 - rate)) < 4 * sigma
  both = (kept["stock"] & kept["cpu_xla"]).mean()
  assert abs(both - (1 - rate) ** 2) < 4 * np.sqrt((1 - rate) ** 2 / np.prod(shape))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_gradient_is_the_mask_times_the_scale(backend):
  layer = _dropout(backend, 0.25, 11)
  inputs = tf.constant(np.random.default_rng(3).normal(size=(16, 50)), tf.float32)
  upstream = tf.constant(np.random.default_rng(4).normal(size=(16, 50)), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    outputs = layer(inputs, training=True)
    loss = tf.reduce_sum(outputs * upstream)
  kept = outputs.numpy() != 0
  np.testing.assert_allclose(outputs.numpy()[kept], inputs.numpy()[kept] / 0.75, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(loss, inputs), upstream * kept / 0.75, rtol=1e-6)


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


def test_random_words_number_positions_the_same_with_a_dynamic_shape():
  seed = tf.constant([9, 4])
  static = random_words([3, 50], seed)
  dynamic = tf.function(random_words, input_signature=[tf.TensorSpec([2], tf.int32),
                                                       tf.TensorSpec([2], tf.int32)])
  np.testing.assert_array_equal(static, dynamic(tf.constant([3, 50]), seed))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_transposed_dense_is_a_dense_layer_with_the_kernel_turned(backend, policy):
  rng = np.random.default_rng(2)
  inputs = tf.constant(rng.normal(size=(2, 3, 6)), tf.float32)
  layer = TransposedDense(4, dtype=policy, kernels=backend)
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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_global_norm_matches_tensorflow(backend, mode):
  rng = np.random.default_rng(5)
  tensors = [tf.constant(rng.normal(size=shape), tf.float32)
             for shape in [(768, 96), (7, 5), (32,), (64,), (3, 4, 8)]]
  tensors.append(tf.IndexedSlices(tf.constant(rng.normal(size=(3, 8)), tf.float32),
                                  tf.constant([0, 2, 5]), tf.constant([6, 8])))
  global_norm = _both_modes(ops.kernels(backend).global_norm)[mode == "xla"]
  np.testing.assert_allclose(global_norm(tensors), tf.linalg.global_norm(tensors), rtol=1e-5)
  assert np.isnan(global_norm(tensors[:1] + [tf.constant([np.nan] * 64, tf.float32)]))


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_a_pretraining_model_is_the_same_function_with_either_backend(mode):
  """Forward pass, losses and every weight's gradient of a 1-layer BertPretrainer (dropout 0):
  every kind of layer once, which XLA compiles faster than two of each."""
  config = tiny_bert_config(60, hidden_size=32, num_hidden_layers=1, max_position_embeddings=16,
                            dropout=0.0)
  models = {backend: BertPretrainer(config, kernels=backend) for backend in ("stock", "cpu_xla")}
  models["cpu_xla"].set_weights(models["stock"].get_weights())
  rng = np.random.default_rng(6)
  ids = rng.integers(5, 60, (3, 16)).astype("int32")
  mask = (np.arange(16) < [[16], [11], [7]]).astype("int32")
  features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids),
              "masked_lm_positions": np.array([[1, 4, 9], [2, 3, 5], [1, 1, 6]], "int32")}
  labels = {"masked_lm_ids": rng.integers(0, 60, (3, 3)), "masked_lm_weights": np.ones((3, 3)),
            "next_sentence_labels": np.array([0, 1, 1])}
  results = {}
  for backend, model in models.items():
    def step(features, model=model, backend=backend):
      with tf.GradientTape() as tape:
        outputs = model(features, training=True)
        loss = pretraining_losses(outputs, labels, backend)["loss"]
      grads = tape.gradient(loss, model.trainable_variables)
      return outputs["mlm_logits"], loss, [tf.convert_to_tensor(g) for g in grads]
    results[backend] = _both_modes(step)[mode == "xla"](features)
  ours, reference = results["cpu_xla"], results["stock"]
  np.testing.assert_allclose(ours[0], reference[0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ours[1], reference[1], rtol=1e-6)
  for variable, got, want in zip(models["stock"].trainable_variables, ours[2], reference[2]):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=variable.path)
