"""The original BERT's optimizer: Adam with decoupled weight decay and no bias correction.

Per variable `w` with gradient `g`, at learning rate `lr` (the schedule's value at this step):

    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g ** 2
    w = w - lr * (m / (sqrt(v) + epsilon) + weight_decay * w)

with `weight_decay * w` left out for the exempt variables (layer norms and biases). The Adam
paper divides `m` by `1 - beta_1 ** t` and `v` by `1 - beta_2 ** t`; the original BERT does not,
and its published fine-tuning recipes (2e-5 to 5e-5 for 3 epochs) were tuned that way. Without the
correction the first few hundred steps are several times larger than Adam's, because `v` (decay
`beta_2` = 0.999) starts much nearer zero than `m` (decay 0.9): in the class's example the first
step is 0.316 where Adam's is 0.1, and at step 100 it is still about three times Adam's.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="official_bert")
class AdamWeightDecay(keras.optimizers.Optimizer):
  """Adam with decoupled weight decay and without bias correction, as the original BERT.

  The decay is Keras' own decoupled decay (`w -= lr * weight_decay * w` on the variable before
  the step, which is the original's `lr * weight_decay * w` term); exempt variables by name with
  `exclude_from_weight_decay`, as for `keras.optimizers.AdamW`.

  Args:
    learning_rate: a float or a `LearningRateSchedule`.
    weight_decay: the decoupled weight decay rate.
    beta_1: decay of the first-moment estimate.
    beta_2: decay of the second-moment estimate.
    epsilon: added to `sqrt(v)`.
    name: the optimizer's name.
    **kwargs: the other arguments of `keras.optimizers.Optimizer`.

  Example:

  >>> import numpy as np
  >>> w = keras.Variable(np.array([1.0, -2.0], "float32"))
  >>> optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay=0.0)
  >>> optimizer.apply([np.array([0.5, 0.5], "float32")], [w])
  >>> # m = 0.05, v = 0.00025: the step is 0.1 * 0.05 / (0.0158 + 1e-6) = 0.316, not Adam's 0.1.
  >>> np.round(w.numpy(), 4)
  array([ 0.6838, -2.3162], dtype=float32)
  """

  def __init__(self, learning_rate=0.001, weight_decay=0.01, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, name="adam_weight_decay", **kwargs):
    super().__init__(learning_rate=learning_rate, weight_decay=weight_decay, name=name,
                     **kwargs)
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._momentums, self._velocities = self.add_optimizer_variables(
        var_list, ["momentum", "velocity"])

  def slots(self, variable):
    """The `(m, v)` moment variables of a variable the optimizer was built for (the original's
    `<name>/adam_m` and `<name>/adam_v`)."""
    index = self._get_variable_index(variable)
    return self._momentums[index], self._velocities[index]

  def update_step(self, gradient, variable, learning_rate):
    learning_rate = ops.cast(learning_rate, variable.dtype)
    gradient = ops.cast(gradient, variable.dtype)
    index = self._get_variable_index(variable)
    m, v = self._momentums[index], self._velocities[index]
    self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
    self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
    self.assign_sub(variable, ops.multiply(
        learning_rate, ops.divide(m, ops.add(ops.sqrt(v), self.epsilon))))

  def get_config(self):
    config = super().get_config()
    config.update({"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon})
    return config
