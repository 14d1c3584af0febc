"""The encoder and every task model: shapes, dtypes, padding, serialisation, mixed precision."""

import json
import sys

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
from official_bert import ops as kernel_ops
from official_bert.layers import (
  BertEmbeddings,
  ClassificationHead,
  Dropout,
  MaskedLMHead,
  SelfAttention,
  SpanHead,
  TransformerBlock,
  TransposedDense,
  get_activation,
)
from official_bert.models import pretraining_losses
from official_bert.models.bert_multiple_choice import MergeChoices
from official_bert.networks import encoder_inputs

from testing import (
  REPOSITORY,
  assert_config_round_trips,
  run_layer_test,
  run_model_saving_test,
  run_python,
  tiny_bert_config,
)

CONFIG = tiny_bert_config(60, hidden_size=32, num_attention_heads=4, max_position_embeddings=40)


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


@pytest.fixture(name="encoder", scope="module")
def fixture_encoder():
  """One encoder for the tests that only call it (none changes its weights)."""
  return BertEncoder(CONFIG)


def test_encoder_output_shapes_and_dtypes(encoder):
  outputs = encoder(_inputs())
  assert tuple(outputs["sequence_output"].shape) == (3, 10, 32)
  assert tuple(outputs["pooled_output"].shape) == (3, 32)
  assert len(outputs["encoder_outputs"]) == 2
  assert all(tuple(x.shape) == (3, 10, 32) for x in outputs["encoder_outputs"])
  np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
  assert outputs["sequence_output"].dtype == tf.float32


@pytest.mark.parametrize("task", sorted(TASKS))
def test_task_output_shapes_and_dtypes_and_keras_save_and_load_gives_identical_outputs(
    task, tmp_path):
  build, make_inputs, shapes = TASKS[task]
  model = build()
  outputs = model(make_inputs())
  assert {name: tuple(value.shape) for name, value in outputs.items()} == shapes
  assert all(value.dtype == tf.float32 for value in outputs.values())
  run_model_saving_test(model, make_inputs(), tmp_path)


_SEQUENCE = np.random.default_rng(0).standard_normal((2, 5, 16)).astype("float32")
_MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
# Each layer: its arguments, the inputs of `call` (the first, the others), the output shape(s).
LAYERS = {
    "BertEmbeddings": (
        BertEmbeddings, dict(vocab_size=60, hidden_size=16, max_position_embeddings=20,
                             type_vocab_size=2, dropout_rate=0.1),
        np.array([[2, 7, 9, 3, 0], [2, 8, 3, 0, 0]], "int32"), (_MASK,), (2, 5, 16)),
    "SelfAttention": (SelfAttention, dict(hidden_size=16, num_heads=4, dropout_rate=0.1),
                      _SEQUENCE, (_MASK,), (2, 5, 16)),
    "TransformerBlock": (TransformerBlock, dict(hidden_size=16, num_heads=4, intermediate_size=32,
                                                dropout_rate=0.1), _SEQUENCE, (_MASK,),
                         (2, 5, 16)),
    "MaskedLMHead": (MaskedLMHead, dict(vocab_size=60, hidden_size=16), _SEQUENCE,
                     (np.array([[0, 2], [1, 4]], "int32"),), (2, 2, 60)),
    "ClassificationHead": (ClassificationHead, dict(num_classes=3, dropout_rate=0.2),
                           _SEQUENCE[:, 0], (), (2, 3)),
    "SpanHead": (SpanHead, dict(initializer_range=0.05), _SEQUENCE, (), ((2, 5), (2, 5))),
    "TransposedDense": (TransposedDense, dict(units=5), _SEQUENCE, (), (2, 5, 5)),
    "Dropout": (Dropout, dict(rate=0.3, seed=4), _SEQUENCE, (), (2, 5, 16)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_layer_builds_calls_and_is_rebuilt_from_its_config(name):
  layer_class, init_kwargs, inputs, call_args, shape = LAYERS[name]
  run_layer_test(layer_class, init_kwargs, inputs, shape, call_args=call_args)


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


def test_padding_does_not_change_outputs_at_real_positions(encoder):
  inputs = _inputs(real_lengths=(10, 6, 3))
  padded = {name: np.pad(value, ((0, 0), (0, 7))) for name, value in inputs.items()}
  short, long = encoder(inputs), encoder(padded)
  mask = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(np.array(long["sequence_output"])[:, :10][mask],
                             np.array(short["sequence_output"])[mask], atol=1e-5)
  np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_padding_tokens_receive_no_attention(encoder):
  inputs = _inputs(real_lengths=(6, 6, 6))
  changed = dict(inputs, input_word_ids=inputs["input_word_ids"].copy())
  changed["input_word_ids"][:, 6:] = 7  # different ids behind the mask
  mask = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(np.array(encoder(changed)["sequence_output"])[mask],
                             np.array(encoder(inputs)["sequence_output"])[mask], atol=1e-6)


def test_dropout_is_active_only_in_training(encoder):
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


@pytest.mark.parametrize("backend", list(kernel_ops.BACKENDS))
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_float32_weights_softmax_and_layer_norm(policy, backend):
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy(policy)
  try:
    model = BertPretrainer(CONFIG, kernels=backend)
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
  half = tf.ones((2, 3, CONFIG.hidden_size), compute)
  # Normalized in float32; cpu_onednn's inference form keeps bfloat16 inputs in bfloat16 (with
  # float32 statistics, tests/ops/test_onednn_inference.py).
  normalized = compute if (backend, compute) == ("cpu_onednn", "bfloat16") else "float32"
  for norm in (layer.attention_layer_norm, layer.output_layer_norm,
               model.encoder.embeddings.layer_norm):
    assert norm.compute_dtype == "float32" and norm(half).dtype == normalized
  # In the traced training step: every softmax (the attention probabilities) runs in float32,
  # the products in the half type, and the losses come out float32.
  graph = tf.function(lambda inputs: model(inputs, training=True)).get_concrete_function(
      _pretrainer_inputs()).graph
  # (cpu_onednn's bfloat16 softmax is the fused kernel, float32 inside
  # (tests/ops/test_ops_bfloat16_elementwise.py), or where it does not load a function the step
  # calls, compiled by XLA, once per distinct shape.)
  fused = [op for op in graph.get_operations() if op.type == "MaskedSoftmaxDropoutBfloat16"]
  softmaxes = [op.outputs[0].dtype for op in graph.get_operations() if op.type == "Softmax"]
  softmaxes += [tf.as_dtype(node.attr["T"].type) for function in graph._functions.values()
                for node in function.cached_definition.node_def if node.op == "Softmax"]
  if (backend, compute) == ("cpu_onednn", "bfloat16") and fused:
    assert len(fused) == CONFIG.num_hidden_layers and not softmaxes
  else:
    assert not fused and softmaxes and set(softmaxes) == {tf.float32}
  if (backend, compute) != ("cpu_onednn", "bfloat16"):
    assert len(softmaxes) == CONFIG.num_hidden_layers
  products = [op for op in graph.get_operations() if op.type in ("MatMul", "BatchMatMulV2",
                                                                 "Einsum")]
  assert {op.outputs[0].dtype for op in products} == {tf.as_dtype(compute)}


def test_encoder_accepts_a_dtype_policy_argument():
  encoder = BertEncoder(CONFIG, dtype="mixed_bfloat16")
  assert encoder(_inputs())["sequence_output"].dtype == tf.bfloat16
  assert all(weight.dtype == "float32" for weight in encoder.weights)


# Every layer and model class, built with a given dtype policy.
SERIALISABLE = {
    "BertEmbeddings": lambda dtype: BertEmbeddings(60, 16, 20, 2, dropout_rate=0.1, dtype=dtype,
                                                   name="e"),
    "SelfAttention": lambda dtype: SelfAttention(16, 4, dropout_rate=0.1, dtype=dtype),
    "TransformerBlock": lambda dtype: TransformerBlock(16, 4, 32, activation="gelu_new",
                                                       dropout_rate=0.1, dtype=dtype),
    "MaskedLMHead": lambda dtype: MaskedLMHead(60, 16, activation="relu", dtype=dtype),
    "ClassificationHead": lambda dtype: ClassificationHead(3, dropout_rate=0.2, dtype=dtype),
    "SpanHead": lambda dtype: SpanHead(initializer_range=0.05, dtype=dtype),
    "TransposedDense": lambda dtype: TransposedDense(5, kernel_initializer="zeros", dtype=dtype),
    "Dropout": lambda dtype: Dropout(0.3, seed=4, dtype=dtype),
    "MergeChoices": lambda dtype: MergeChoices(dtype=dtype),
    "BertEncoder": lambda dtype: BertEncoder(CONFIG, dtype=dtype),
    "BertPretrainer": lambda dtype: BertPretrainer(CONFIG, dtype=dtype),
    "BertClassifier": lambda dtype: BertClassifier(CONFIG, num_classes=3, dtype=dtype),
    "BertSpanLabeler": lambda dtype: BertSpanLabeler(CONFIG, dtype=dtype),
    "BertMultipleChoice": lambda dtype: BertMultipleChoice(CONFIG, num_choices=2, dtype=dtype),
    "BertTokenClassifier": lambda dtype: BertTokenClassifier(CONFIG, num_classes=5, dtype=dtype),
}


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", keras.DTypePolicy("mixed_float16")],
                         ids=["string", "policy"])
@pytest.mark.parametrize("name", sorted(SERIALISABLE))
def test_layers_and_models_round_trip_their_config_and_dtype_policy(name, dtype):
  layer = SERIALISABLE[name](dtype)
  policy = keras.dtype_policies.get(dtype).name
  assert layer.dtype_policy.name == policy
  assert_config_round_trips(layer)


def test_a_model_built_under_a_global_policy_keeps_it_when_rebuilt_under_another():
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    config = BertClassifier(CONFIG, num_classes=2).get_config()
  finally:
    keras.config.set_dtype_policy(previous)
  restored = BertClassifier.from_config(config)
  assert restored.dtype_policy.name == "mixed_bfloat16"
  assert restored.encoder.transformer_layers[0].compute_dtype == "bfloat16"


def _as_json(config):
  return json.loads(json.dumps(config))


@keras.saving.register_keras_serializable(package="test_models")
class TinyEncoder(keras.Model):
  """An encoder network other than BertEncoder: embeddings and one dense layer."""

  def __init__(self, vocab_size, width, **kwargs):
    inputs = encoder_inputs()
    words = keras.layers.Embedding(vocab_size, width)(inputs["input_word_ids"])
    types = keras.layers.Embedding(2, width)(inputs["input_type_ids"])
    mask = keras.ops.expand_dims(keras.ops.cast(inputs["input_mask"], "float32"), -1)
    sequence = keras.layers.Dense(width, activation="tanh")(words + types) * mask
    pooled = keras.layers.Dense(width, activation="tanh")(sequence[:, 0, :])
    super().__init__(inputs=inputs,
                     outputs={"sequence_output": sequence, "pooled_output": pooled}, **kwargs)
    self.vocab_size, self.width = vocab_size, width

  def get_config(self):
    return {"vocab_size": self.vocab_size, "width": self.width, "name": self.name,
            "trainable": self.trainable}

  @classmethod
  def from_config(cls, config):
    return cls(**config)


def test_classifier_around_a_custom_encoder_network_and_head_trains_and_round_trips():
  model = BertClassifier(CONFIG, num_classes=3, encoder=TinyEncoder(CONFIG.vocab_size, 8),
                         head=keras.layers.Dense(3, name="my_head"))
  assert model.classifier.name == "my_head"
  inputs = _inputs()
  assert tuple(model(inputs)["logits"].shape) == (3, 3)
  model.compile(optimizer="sgd",
                loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
  before = [w.numpy().copy() for w in model.trainable_weights]
  loss = model.train_on_batch(inputs, {"logits": np.array([0, 1, 2])})
  assert np.isfinite(loss)
  assert any(not np.allclose(a, b.numpy()) for a, b in zip(before, model.trainable_weights))

  config = model.get_config()
  assert config["encoder"]["class_name"].endswith("TinyEncoder")
  assert config["head"]["config"]["units"] == 3
  restored = keras.saving.deserialize_keras_object(
      json.loads(json.dumps(keras.saving.serialize_keras_object(model))))
  assert isinstance(restored.encoder, TinyEncoder) and restored.classifier.name == "my_head"
  assert _as_json(restored.get_config()) == _as_json(config)  # tuples in build configs: lists
  restored.set_weights(model.get_weights())
  np.testing.assert_allclose(restored(inputs)["logits"], model(inputs)["logits"], atol=1e-6)


def test_span_labeler_and_pretrainer_take_a_custom_encoder_network():
  span = BertSpanLabeler(CONFIG, encoder=TinyEncoder(CONFIG.vocab_size, 8))
  assert tuple(span(_inputs())["start_logits"].shape) == (3, 10)
  pretrainer = BertPretrainer(BertConfig(**{**CONFIG.to_dict(), "hidden_size": 8,
                                            "num_attention_heads": 2}),
                              encoder=TinyEncoder(CONFIG.vocab_size, 8))
  assert pretrainer.masked_lm.embedding is None
  outputs = pretrainer(_pretrainer_inputs())
  assert tuple(outputs["mlm_logits"].shape) == (3, 3, 60)


def test_an_encoder_network_without_the_needed_output_is_refused():
  inputs = encoder_inputs()
  only_sequence = keras.Model(inputs, {"sequence_output": keras.layers.Embedding(60, 8)(
      inputs["input_word_ids"])})
  with pytest.raises(ValueError, match="must return a dict with pooled_output"):
    BertClassifier(CONFIG, num_classes=2, encoder=only_sequence)
  with pytest.raises(TypeError, match="encoder must be a Keras layer"):
    BertClassifier(CONFIG, num_classes=2, encoder="bert")


def test_gelu_forms_match_their_formulas_and_gelu_is_the_originals_tanh_form():
  from math import erf, pi, sqrt
  x = np.linspace(-8, 8, 1601).astype("float32")
  wide = x.astype("float64")
  tanh_form = 0.5 * wide * (1 + np.tanh(sqrt(2 / pi) * (wide + 0.044715 * wide**3)))
  erf_form = np.array([v * 0.5 * (1 + erf(v / sqrt(2))) for v in wide])
  for name in ("gelu_tanh", "gelu", "gelu_new", "gelu_pytorch_tanh"):
    np.testing.assert_allclose(np.array(get_activation(name)(x)), tanh_form, rtol=0, atol=1e-6)
  for name in ("gelu_erf", "gelu_exact"):
    np.testing.assert_allclose(np.array(get_activation(name)(x)), erf_form, rtol=0, atol=1e-6)
  assert 1e-4 < np.max(np.abs(tanh_form - erf_form)) < 1e-3
  with pytest.raises(ValueError, match="Unknown hidden_act"):
    get_activation("gelu2")


@pytest.mark.parametrize("name, canonical", [("gelu", "gelu_tanh"), ("gelu_erf", "gelu_erf")])
def test_layers_keep_the_canonical_activation_name_in_their_config(name, canonical):
  block = TransformerBlock(8, 2, 16, activation=name)
  head = MaskedLMHead(vocab_size=20, hidden_size=8, activation=name)
  assert block.get_config()["activation"] == head.get_config()["activation"] == canonical
  assert TransformerBlock.from_config(block.get_config()).activation == canonical


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
  # The paper's 110M and 340M count the encoder (embeddings, layers, pooler). In a stateless
  # scope the variables get their shapes without drawing their 445M initial values; in a process
  # of its own, because Keras would draw them at the end of the next scope in this one.
  code = ("import keras\nfrom official_bert import BertEncoder, get_preset\n"
          "with keras.StatelessScope(initialize_variables=False):\n"
          "  print(*[BertEncoder(get_preset(name)).count_params() "
          "for name in ('bert_base', 'bert_large')])")
  result = run_python([sys.executable, "-c", code], cwd=REPOSITORY, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ["109482240", "335141888"]
