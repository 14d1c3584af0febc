"""The encoder and every task model: shapes, dtypes, padding, serialisation, mixed precision."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import (
  BertClassifier,
  BertConfig,
  BertEncoder,
  BertMultipleChoice,
  BertPretrainer,
  BertSpanLabeler,
  BertTokenClassifier,
  get_preset,
)
from official_bert.layers import (
  BertEmbeddings,
  ClassificationHead,
  MaskedLMHead,
  SelfAttention,
  SpanHead,
  TransformerBlock,
  TransposedDense,
  get_activation,
)
from official_bert.models import pretraining_losses

CONFIG = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=40)


def _inputs(batch=3, seq=10, seed=0, real_lengths=(10, 6, 3)):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, CONFIG.vocab_size, size=(batch, seq)).astype("int32")
  mask = (np.arange(seq)[None] < np.array(real_lengths)[:, None]).astype("int32")
  types = (np.arange(seq)[None] >= 4).astype("int32").repeat(batch, 0) * mask
  return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types}


def _pretrainer_inputs():
  inputs = _inputs()
  inputs["masked_lm_positions"] = np.array([[1, 2, 0], [1, 4, 0], [2, 0, 0]], "int32")
  return inputs


def _choice_inputs():
  parts = [_inputs(seed=s) for s in range(2)]
  return {name: np.stack([p[name] for p in parts], axis=1) for name in parts[0]}


# (model factory, its inputs, the expected output shapes)
TASKS = {
    "pretrainer": (lambda: BertPretrainer(CONFIG), _pretrainer_inputs,
                   {"mlm_logits": (3, 3, 60), "next_sentence_logits": (3, 2)}),
    "classifier": (lambda: BertClassifier(CONFIG, num_classes=3), _inputs, {"logits": (3, 3)}),
    "regression": (lambda: BertClassifier(CONFIG, num_classes=1), _inputs, {"logits": (3, 1)}),
    "span": (lambda: BertSpanLabeler(CONFIG), _inputs,
             {"start_logits": (3, 10), "end_logits": (3, 10)}),
    "multiple_choice": (lambda: BertMultipleChoice(CONFIG, num_choices=2), _choice_inputs,
                        {"logits": (3, 2)}),
    "token_classifier": (lambda: BertTokenClassifier(CONFIG, num_classes=5), _inputs,
                         {"logits": (3, 10, 5)}),
}


def test_encoder_output_shapes_and_dtypes():
  outputs = BertEncoder(CONFIG)(_inputs())
  assert tuple(outputs["sequence_output"].shape) == (3, 10, 32)
  assert tuple(outputs["pooled_output"].shape) == (3, 32)
  assert len(outputs["encoder_outputs"]) == 2
  assert all(tuple(x.shape) == (3, 10, 32) for x in outputs["encoder_outputs"])
  np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
  assert outputs["sequence_output"].dtype == tf.float32


@pytest.mark.parametrize("task", sorted(TASKS))
def test_task_output_shapes_and_dtypes(task):
  build, make_inputs, shapes = TASKS[task]
  outputs = build()(make_inputs())
  assert {name: tuple(value.shape) for name, value in outputs.items()} == shapes
  assert all(value.dtype == tf.float32 for value in outputs.values())


@pytest.mark.parametrize("task", sorted(TASKS))
def test_keras_save_and_load_gives_identical_outputs(task, tmp_path):
  build, make_inputs, _ = TASKS[task]
  model = build()
  inputs = make_inputs()
  expected = model(inputs)
  path = tmp_path / "model.keras"
  model.save(path)
  restored = keras.saving.load_model(path)
  assert type(restored) is type(model)
  actual = restored(inputs)
  for name in expected:
    np.testing.assert_array_equal(actual[name], expected[name])


def test_pretrainer_ties_the_output_projection_to_word_embeddings(tmp_path):
  model = BertPretrainer(CONFIG)
  assert not hasattr(model.masked_lm, "output_kernel")
  inputs = _pretrainer_inputs()
  before = np.array(model(inputs)["mlm_logits"])
  table = model.encoder.word_embeddings.embeddings
  table.assign(table * 2.0)
  assert not np.allclose(model(inputs)["mlm_logits"], before)
  model.save(tmp_path / "pretrainer.keras")
  restored = keras.saving.load_model(tmp_path / "pretrainer.keras")
  assert restored.masked_lm.embedding is restored.encoder.word_embeddings


def test_padding_does_not_change_outputs_at_real_positions():
  encoder = BertEncoder(CONFIG)
  inputs = _inputs(real_lengths=(10, 6, 3))
  padded = {name: np.pad(value, ((0, 0), (0, 7))) for name, value in inputs.items()}
  short, long = encoder(inputs), encoder(padded)
  mask = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(np.array(long["sequence_output"])[:, :10][mask],
                             np.array(short["sequence_output"])[mask], atol=1e-5)
  np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_padding_tokens_receive_no_attention():
  encoder = BertEncoder(CONFIG)
  inputs = _inputs(real_lengths=(6, 6, 6))
  changed = dict(inputs, input_word_ids=inputs["input_word_ids"].copy())
  changed["input_word_ids"][:, 6:] = 7  # different ids behind the mask
  mask = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(np.array(encoder(changed)["sequence_output"])[mask],
                             np.array(encoder(inputs)["sequence_output"])[mask], atol=1e-6)


def test_dropout_is_active_only_in_training():
  encoder = BertEncoder(CONFIG)
  inputs = _inputs()
  first = encoder(inputs, training=True)["sequence_output"]
  second = encoder(inputs, training=True)["sequence_output"]
  assert not np.allclose(first, second)
  np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                encoder(inputs)["sequence_output"])


def test_multiple_choice_scores_each_choice_independently():
  model = BertMultipleChoice(CONFIG, num_choices=2)
  inputs = _choice_inputs()
  logits = np.array(model(inputs)["logits"])
  swapped = {name: value[:, ::-1] for name, value in inputs.items()}
  np.testing.assert_allclose(np.array(model(swapped)["logits"]), logits[:, ::-1], atol=1e-5)


def test_task_models_share_a_given_encoder():
  encoder = BertEncoder(CONFIG)
  classifier = BertClassifier(CONFIG, num_classes=2, encoder=encoder)
  span = BertSpanLabeler(CONFIG, encoder=encoder)
  assert classifier.encoder is encoder and span.encoder is encoder
  with pytest.raises(ValueError, match="encoder was built from"):
    BertClassifier(get_preset("bert_tiny"), num_classes=2, encoder=encoder)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_float32_weights_softmax_and_layer_norm(policy):
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy(policy)
  try:
    model = BertPretrainer(CONFIG)
    outputs = model(_pretrainer_inputs())
    encoded = model.encoder(_inputs())
  finally:
    keras.config.set_dtype_policy(previous)
  assert all(weight.dtype == "float32" for weight in model.weights)
  assert outputs["mlm_logits"].dtype == tf.float32
  assert np.all(np.isfinite(outputs["mlm_logits"]))
  compute = policy.split("_")[1]
  assert encoded["sequence_output"].dtype == compute
  layer = model.encoder.transformer_layers[0]
  assert layer.attention.compute_dtype == compute
  assert layer.attention_layer_norm.compute_dtype == "float32"
  assert model.encoder.embeddings.layer_norm.compute_dtype == "float32"


def test_encoder_accepts_a_dtype_policy_argument():
  encoder = BertEncoder(CONFIG, dtype="mixed_bfloat16")
  assert encoder(_inputs())["sequence_output"].dtype == tf.bfloat16
  assert all(weight.dtype == "float32" for weight in encoder.weights)


@pytest.mark.parametrize("layer", [
    BertEmbeddings(60, 16, 20, 2, dropout_rate=0.1, name="e"),
    SelfAttention(16, 4, dropout_rate=0.1),
    TransformerBlock(16, 4, 32, activation="gelu_new", dropout_rate=0.1),
    MaskedLMHead(60, 16, activation="relu"),
    ClassificationHead(3, dropout_rate=0.2),
    SpanHead(initializer_range=0.05),
    TransposedDense(5, kernel_initializer="zeros"),
], ids=lambda layer: type(layer).__name__)
def test_layers_round_trip_through_their_config(layer):
  serialized = keras.saving.serialize_keras_object(layer)
  restored = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialized)))
  assert type(restored) is type(layer)
  assert restored.get_config() == layer.get_config()


def test_gelu_variants_differ_and_match_their_formulas():
  x = np.linspace(-4, 4, 41).astype("float32")
  exact = np.array(get_activation("gelu")(x))
  tanh = np.array(get_activation("gelu_new")(x))
  from math import erf, pi, sqrt
  np.testing.assert_allclose(exact, [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x], atol=1e-6)
  np.testing.assert_allclose(
      tanh, 0.5 * x * (1 + np.tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))), atol=1e-6)
  assert 1e-5 < np.max(np.abs(exact - tanh)) < 1e-3
  with pytest.raises(ValueError, match="Unknown hidden_act"):
    get_activation("gelu2")


def test_pretraining_losses_match_the_original_formulas():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 3, 7)).astype("float32")
  ids = np.array([[1, 2, 0], [4, 0, 0]])
  weights = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], "float32")
  nsp_logits = rng.normal(size=(2, 2)).astype("float32")
  nsp_labels = np.array([[1], [0]])
  losses = pretraining_losses(
      {"mlm_logits": logits, "next_sentence_logits": nsp_logits},
      {"masked_lm_ids": ids, "masked_lm_weights": weights, "next_sentence_labels": nsp_labels})

  def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))
  per_position = -np.take_along_axis(log_softmax(logits), ids[..., None], -1)[..., 0]
  mlm = (per_position * weights).sum() / (weights.sum() + 1e-5)
  nsp = -np.take_along_axis(log_softmax(nsp_logits), nsp_labels, -1).mean()
  np.testing.assert_allclose(float(losses["masked_lm_loss"]), mlm, rtol=1e-5)
  np.testing.assert_allclose(float(losses["next_sentence_loss"]), nsp, rtol=1e-5)
  np.testing.assert_allclose(float(losses["loss"]), mlm + nsp, rtol=1e-5)


def test_released_model_sizes():
  # The paper's 110M and 340M count the encoder (embeddings, layers, pooler).
  assert BertEncoder(get_preset("bert_base")).count_params() == 109_482_240
  assert BertEncoder(get_preset("bert_large")).count_params() == 335_141_888
