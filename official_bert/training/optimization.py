"""BERT's optimizers: AdamW (or LAMB) on a linear warmup + linear decay learning-rate schedule.

The original recipe (Devlin et al., 2018): Adam with beta 0.9 / 0.999, epsilon 1e-6, decoupled
weight decay 0.01 that skips layer-norm and bias variables, the learning rate rising linearly from
zero over `num_warmup_steps` and then falling linearly to zero at `num_train_steps`, gradients
clipped to global norm 1.0 (the clipping is the training loop's job, after the gradients of all
replicas are summed; see `official_bert.training.trainer`).

`adamw` is the original's update (`adam_weight_decay.AdamWeightDecay`: no bias correction), so
the published recipes (learning rates 2e-5 to 5e-5, 3 epochs) mean what they meant there;
`adamw_bias_corrected` is Keras' AdamW, whose bias correction makes the first few hundred steps
several times larger. Keras' LAMB applies the weight decay outside the trust ratio and adapts every
variable, layer norms and biases included.
"""

from absl import logging
import keras
from keras import ops

from official_bert.training.adam_weight_decay import AdamWeightDecay

# Variables that get no weight decay, matched against Keras' short variable names: `gamma` and
# `beta` are every layer norm's scale and offset, `bias` matches every dense layer's bias and the
# masked-LM head's `output_bias`. (The original matched "LayerNorm", "layer_norm" and "bias" in
# its TF1 variable paths; these are the same variables in this package's layers.)
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")

OPTIMIZERS = ("adamw", "adamw_bias_corrected", "lamb")


@keras.saving.register_keras_serializable(package="official_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup from 0 to `learning_rate`, then linear decay to 0 at `num_train_steps`.

  As in the original BERT: for `step < num_warmup_steps` the rate is
  `learning_rate * step / num_warmup_steps`; after it, the polynomial (power 1) decay
  `learning_rate * (1 - min(step, num_train_steps) / num_train_steps)`, so the decay is measured
  from step 0, not from the end of the warmup. A warmup longer than the training (the original
  `run_pretraining.py --num_train_steps=5000` keeps its default 10,000 warmup steps) trains on the
  warmup's rising rate throughout, as the original did.

  Args:
    learning_rate: the peak learning rate.
    num_train_steps: the step at which the rate reaches zero.
    num_warmup_steps: steps of linear warmup; 0 for none.

  Example:

  >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
  >>> [round(float(schedule(step)), 7) for step in (0, 5, 10, 55, 100)]
  [0.0, 5e-05, 9e-05, 4.5e-05, 0.0]
  """

  def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0):
    if num_train_steps <= 0:
      raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
    if num_warmup_steps < 0:
      raise ValueError(f"num_warmup_steps must not be negative, got {num_warmup_steps}.")
    self.learning_rate = float(learning_rate)
    self.num_train_steps = int(num_train_steps)
    self.num_warmup_steps = int(num_warmup_steps)

  def __call__(self, step):
    step = ops.cast(step, "float32")
    decayed = self.learning_rate * (
        1.0 - ops.minimum(step, float(self.num_train_steps)) / self.num_train_steps)
    if not self.num_warmup_steps:
      return decayed
    warmup = self.learning_rate * step / self.num_warmup_steps
    return ops.where(step < self.num_warmup_steps, warmup, decayed)

  def get_config(self):
    return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps}


def create_optimizer(optimizer_type, learning_rate, num_train_steps, num_warmup_steps,
                     weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6, dtype="float32"):
  """Builds BERT's optimizer with its learning-rate schedule.

  Create it inside `strategy.scope()`, beside the model. Gradient clipping is not set here: the
  `Trainer` clips the summed gradients of all replicas (Keras would clip each replica's own).

  Args:
    optimizer_type: `adamw` (the original's: no bias correction), `adamw_bias_corrected`
      (Keras' AdamW) or `lamb` (You et al., 2019, for large batches).
    learning_rate: peak learning rate.
    num_train_steps: total optimizer steps; the rate reaches zero there.
    num_warmup_steps: steps of linear warmup.
    weight_decay: decoupled weight decay rate; layer norms and biases (`NO_WEIGHT_DECAY`) are
      exempt.
    beta_1: decay of the first-moment estimate.
    beta_2: decay of the second-moment estimate.
    epsilon: added to the denominator.
    dtype: the compute dtype (`float32`, `float16` or `bfloat16`); `float16` wraps the optimizer
      in `keras.optimizers.LossScaleOptimizer` (dynamic loss scaling).

  Returns:
    A `keras.optimizers.Optimizer`.

  Example:

  >>> optimizer = create_optimizer("adamw", 5e-5, num_train_steps=1000, num_warmup_steps=100)
  >>> type(optimizer).__name__, optimizer.weight_decay
  ('AdamWeightDecay', 0.01)
  """
  if num_warmup_steps > num_train_steps:
    logging.warning("num_warmup_steps=%d is more than num_train_steps=%d: the learning rate "
                    "rises throughout training and reaches %.3g of its peak, as in the original.",
                    num_warmup_steps, num_train_steps, num_train_steps / num_warmup_steps)
  schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps)
  kwargs = dict(learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
  if optimizer_type == "adamw":
    optimizer = AdamWeightDecay(weight_decay=weight_decay or None, **kwargs)
  elif optimizer_type == "adamw_bias_corrected":
    optimizer = (keras.optimizers.AdamW(weight_decay=weight_decay, **kwargs) if weight_decay
                 else keras.optimizers.Adam(**kwargs))
  elif optimizer_type == "lamb":
    optimizer = keras.optimizers.Lamb(weight_decay=weight_decay or None, **kwargs)
  else:
    raise ValueError(f"Unknown optimizer_type {optimizer_type!r}; choose one of {OPTIMIZERS}.")
  if weight_decay:
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
  if dtype == "float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  elif dtype not in ("float32", "bfloat16"):
    raise ValueError(f"Unknown dtype {dtype!r}; choose float32, float16 or bfloat16.")
  return optimizer


def loss_scale(optimizer):
  """The factor the optimizer multiplies the loss by (1.0 without loss scaling)."""
  if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
    return ops.cast(optimizer.dynamic_scale, "float32")
  return optimizer.loss_scale_factor or 1.0

