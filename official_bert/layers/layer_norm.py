"""`keras.layers.LayerNormalization` whose normalization goes through the kernels."""

import keras

from official_bert import ops as kernel_ops


@keras.saving.register_keras_serializable(package="official_bert")
class LayerNorm(keras.layers.LayerNormalization):
  """Layer norm over the last axis (same weights, names and config as Keras'), by its kernels.

  The statistics are float32 whatever the dtype of the inputs: the `stock` and `cpu_xla`
  kernels normalize in float32, as Keras does for a float32 layer, and return float32; the
  `cpu_onednn` kernels, in inference, normalize the inputs in their own dtype with oneDNN's
  layer norm (float32 statistics) and return that dtype, without casts around it
  (`official_bert.ops.cpu_onednn.layer_norm`).

  Args:
    epsilon: added to the variance.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.LayerNormalization`: the default last axis, center, scale
      and no RMS scaling are the only form supported.

  Example:

  >>> layer = LayerNorm(epsilon=1e-12)
  >>> outputs = keras.ops.convert_to_numpy(layer(keras.ops.array([[1.0, 3.0]])))
  >>> [round(v, 3) for v in outputs[0].tolist()]
  [-1.0, 1.0]
  """

  def __init__(self, epsilon=1e-3, kernels="auto", **kwargs):
    super().__init__(epsilon=epsilon, **kwargs)
    if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
      raise ValueError("LayerNorm normalizes over the last axis with gamma and beta only.")
    self.kernels = kernel_ops.choice_name(kernels)
    self._kernels = kernel_ops.kernels(kernels)
    # The kernels cast the inputs themselves (oneDNN's form keeps bfloat16 inputs as they are);
    # the weights are float32 whatever the policy.
    self.autocast = False

  def call(self, inputs, training=None):
    return self._kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon,
                                    training=bool(training))

  def get_config(self):
    return dict(super().get_config(), kernels=self.kernels)
