"""`keras.layers.LayerNormalization` whose normalization goes through the kernel backend."""

import keras

from official_bert import ops as kernel_ops


@keras.saving.register_keras_serializable(package="official_bert")
class LayerNorm(keras.layers.LayerNormalization):
  """Layer norm over the last axis (same weights, names and config as Keras'), by the backend.

  The statistics are float32 whatever the dtype of the inputs: the `stock` and `cpu_xla`
  backends normalize in float32, as Keras does for a float32 layer, and return float32; the
  `cpu_onednn` backend, in inference, normalizes the inputs in their own dtype with oneDNN's
  layer norm (float32 statistics) and returns that dtype, without casts around it
  (`official_bert.ops.cpu_onednn.layer_norm`). The backend is the one current when the layer is
  constructed.

  Args:
    epsilon: added to the variance.
    **kwargs: passed to `keras.layers.LayerNormalization`: the default last axis, center, scale
      and no RMS scaling are the only form supported.

  Example:

  >>> layer = LayerNorm(epsilon=1e-12)
  >>> [round(v, 3) for v in layer(keras.ops.array([[1.0, 3.0]]))[0].numpy().tolist()]
  [-1.0, 1.0]
  """

  def __init__(self, epsilon=1e-3, **kwargs):
    super().__init__(epsilon=epsilon, **kwargs)
    if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
      raise ValueError("LayerNorm normalizes over the last axis with gamma and beta only.")
    self._kernels = kernel_ops.kernels()
    # The kernels cast the inputs themselves (oneDNN's form keeps bfloat16 inputs as they are);
    # the weights are float32 whatever the policy.
    self.autocast = False

  def call(self, inputs, training=None, residual=None, dropout_rate=0.0, seed=None, bias=None):
    """The norm of `inputs`, or of `residual + dropout(inputs + bias)` given a `residual`.

    The bias (if given), the dropout (at `dropout_rate`, with the int32 `[2]` `seed`, in
    training only), the sum and the norm are then one kernel, `dropout_add_layer_norm`: one
    fused pass forward and one backward in a `cpu_onednn` bfloat16 training step.
    """
    if residual is None:
      return self._kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon,
                                      training=bool(training))
    if not training:
      inputs = inputs if bias is None else inputs + bias
      return self._kernels.layer_norm(residual + inputs, self.gamma, self.beta, self.epsilon)
    return self._kernels.dropout_add_layer_norm(inputs, residual, self.gamma, self.beta,
                                                self.epsilon, dropout_rate, seed, bias=bias)
