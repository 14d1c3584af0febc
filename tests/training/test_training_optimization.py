"""BERT's optimizer: the warmup + linear decay schedule, the weight-decay exemptions, LAMB and loss
scaling."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertPretrainer
from official_bert.training import WarmupLinearDecay, create_optimizer
from official_bert.training.adam_weight_decay import AdamWeightDecay

from testing import tiny_bert_config


def test_schedule_warms_up_then_decays_linearly_to_zero():
  schedule = WarmupLinearDecay(2e-5, num_train_steps=1000, num_warmup_steps=100)
  values = {step: float(schedule(step)) for step in (0, 1, 50, 99, 100, 550, 999, 1000, 5000)}
  assert values[0] == 0.0
  assert values[1] == pytest.approx(2e-7)
  assert values[50] == pytest.approx(1e-5)
  assert values[99] == pytest.approx(1.98e-5)
  # After the warmup, the decay as measured from step 0, as the original computes it.
  assert values[100] == pytest.approx(1.8e-5)
  assert values[550] == pytest.approx(9e-6)
  assert values[999] == pytest.approx(2e-8, rel=1e-3)
  assert values[1000] == 0.0 and values[5000] == 0.0


def test_schedule_without_warmup_and_its_serialisation():
  schedule = WarmupLinearDecay(1e-3, num_train_steps=10)
  assert float(schedule(0)) == pytest.approx(1e-3)
  restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
  assert isinstance(restored, WarmupLinearDecay)
  assert float(restored(5)) == pytest.approx(5e-4)
  with pytest.raises(ValueError, match="num_warmup_steps"):
    WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=-1)


def test_a_warmup_longer_than_training_trains_on_the_rising_rate(caplog):
  # The original's run_pretraining.py --num_train_steps=5000 with its default 10,000 warmup steps.
  with caplog.at_level(logging.WARNING, logger="absl"):
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=5000, num_warmup_steps=10000)
  assert "num_warmup_steps=10000 is more than num_train_steps=5000" in caplog.text
  schedule = optimizer._learning_rate
  assert float(schedule(2500)) == pytest.approx(2.5e-5)
  assert float(schedule(4999)) == pytest.approx(1e-4 * 4999 / 10000)


def tiny_pretrainer():
  return BertPretrainer(tiny_bert_config(30, hidden_size=8, num_hidden_layers=1))


def test_layer_norms_and_biases_get_no_weight_decay():
  model = tiny_pretrainer()
  optimizer = create_optimizer("adamw", 0.1, num_train_steps=100, num_warmup_steps=0)
  assert isinstance(optimizer, AdamWeightDecay)
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.999, 1e-6)
  variables = model.trainable_variables
  optimizer.build(variables)
  exempt = {v.path for v in variables if not optimizer._use_weight_decay(v)}
  expected = {v.path for v in variables
              if "layer_norm" in v.path or v.path.endswith("bias")}
  assert exempt == expected
  assert "masked_lm/output_bias" in exempt and "embeddings/layer_norm/gamma" in exempt
  assert "embeddings/word_embeddings/embeddings" not in exempt

  # A step with zero gradients: only the decay moves the weights (Adam's update is 0).
  before = {v.path: v.numpy() for v in variables}
  optimizer.apply([tf.zeros_like(v) for v in variables], variables)
  for v in variables:
    if v.path in exempt:
      np.testing.assert_array_equal(v.numpy(), before[v.path])
    else:  # decoupled decay: w -= learning_rate * weight_decay * w
      np.testing.assert_allclose(v.numpy(), before[v.path] * (1 - 0.1 * 0.01), rtol=1e-6)


def test_lamb_float16_loss_scaling_and_bad_names():
  lamb = create_optimizer("lamb", 1e-3, num_train_steps=10, num_warmup_steps=1)
  assert isinstance(lamb, keras.optimizers.Lamb) and lamb.weight_decay == 0.01
  scaled = create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1,
                            dtype="float16")
  assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)
  assert isinstance(scaled.inner_optimizer, AdamWeightDecay)
  corrected = create_optimizer("adamw_bias_corrected", 1e-3, num_train_steps=10,
                               num_warmup_steps=1)
  assert type(corrected) is keras.optimizers.AdamW and corrected.weight_decay == 0.01
  no_decay = create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1,
                              weight_decay=0.0)
  assert not no_decay.weight_decay
  with pytest.raises(ValueError, match="optimizer_type"):
    create_optimizer("sgd", 1e-3, 10, 1)
  with pytest.raises(ValueError, match="dtype"):
    create_optimizer("adamw", 1e-3, 10, 1, dtype="int8")


def _original_adam_weight_decay(weights, gradients, learning_rates, decay, exempt):
  """The original BERT update rule, written out: Adam without bias correction, with decoupled
  weight decay added to the update of every variable but the exempt ones."""
  weights = [w.astype(np.float64) for w in weights]
  m = [np.zeros_like(w) for w in weights]
  v = [np.zeros_like(w) for w in weights]
  for step, lr in enumerate(learning_rates):
    for i, w in enumerate(weights):
      g = gradients[step][i]
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      update = m[i] / (np.sqrt(v[i]) + 1e-6)
      if not exempt[i]:
        update += decay * w
      weights[i] = w - lr * update
  return weights


def test_adamw_is_the_original_update_without_bias_correction():
  model = tiny_pretrainer()
  variables = model.trainable_variables
  optimizer = create_optimizer("adamw", 1e-3, num_train_steps=8, num_warmup_steps=2)
  optimizer.build(variables)
  exempt = [not optimizer._use_weight_decay(v) for v in variables]
  rng = np.random.default_rng(0)
  gradients = [[rng.normal(size=v.shape).astype("float32") for v in variables]
               for _ in range(5)]
  before = [v.numpy() for v in variables]
  for step_gradients in gradients:
    optimizer.apply(step_gradients, variables)
  schedule = WarmupLinearDecay(1e-3, num_train_steps=8, num_warmup_steps=2)
  rates = [float(schedule(step)) for step in range(5)]  # 0, 5e-4, 7.5e-4, 6.25e-4, 5e-4
  expected = _original_adam_weight_decay(before, gradients, rates, 0.01, exempt)
  for variable, want in zip(variables, expected):
    np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-7,
                               err_msg=variable.path)
  # Keras' bias-corrected AdamW takes a step of the learning rate's size at step one, where the
  # original's is sqrt(1000) / 10 = 3.16 times larger for any gradient.
  first = [np.full((3,), 0.5, "float32")]
  original = keras.Variable(np.zeros(3, "float32"))
  corrected = keras.Variable(np.zeros(3, "float32"))
  AdamWeightDecay(learning_rate=1e-3, weight_decay=None).apply(first, [original])
  keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-6).apply(first, [corrected])
  np.testing.assert_allclose(original.numpy() / corrected.numpy(), np.sqrt(1000) / 10, rtol=1e-3)


def test_adam_weight_decay_round_trips_its_config():
  optimizer = AdamWeightDecay(learning_rate=WarmupLinearDecay(1e-4, 10, 2), weight_decay=0.02,
                              epsilon=1e-7)
  restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
  assert isinstance(restored, AdamWeightDecay)
  assert (restored.weight_decay, restored.epsilon, restored.beta_2) == (0.02, 1e-7, 0.999)
  assert isinstance(restored._learning_rate, WarmupLinearDecay)
