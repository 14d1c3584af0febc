"""BERT's optimizer: the warmup + linear decay schedule, the weight-decay exemptions, LAMB and loss
scaling."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertPretrainer
from official_bert.training import WarmupLinearDecay, create_optimizer


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
    WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=11)


def tiny_pretrainer():
  return BertPretrainer(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=16))


def test_layer_norms_and_biases_get_no_weight_decay():
  model = tiny_pretrainer()
  optimizer = create_optimizer("adamw", 0.1, num_train_steps=100, num_warmup_steps=0)
  assert isinstance(optimizer, keras.optimizers.AdamW)
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
  assert isinstance(scaled.inner_optimizer, keras.optimizers.AdamW)
  no_decay = create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1,
                              weight_decay=0.0)
  assert not no_decay.weight_decay
  with pytest.raises(ValueError, match="optimizer_type"):
    create_optimizer("sgd", 1e-3, 10, 1)
  with pytest.raises(ValueError, match="dtype"):
    create_optimizer("adamw", 1e-3, 10, 1, dtype="int8")
