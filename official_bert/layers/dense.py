"""`keras.layers.Dense` whose product goes through the kernel backend's `dense`."""

import keras

from official_bert import ops as kernel_ops
from official_bert.ops import weight_copies


@keras.saving.register_keras_serializable(package="official_bert")
class Dense(keras.layers.Dense):
  """`keras.layers.Dense` (same weights, names and config) computed by `ops.kernels().dense`.

  The `stock` and `cpu_xla` backends compute what Keras does; `cpu_onednn` writes the product
  over a 2-D view of the inputs with an explicit bias add, the form TensorFlow's graph optimizer
  fuses with the activation into one oneDNN kernel (see `official_bert.ops.cpu_onednn.dense`).
  The backend is the one current when the layer is constructed. Quantized layers run Keras' own
  quantized product.

  Args:
    units: the output width.
    **kwargs: passed to `keras.layers.Dense` (`activation`, `kernel_initializer`, ...).

  Example:

  >>> layer = Dense(3, activation="relu")
  >>> tuple(layer(keras.ops.ones((2, 4, 5))).shape)
  (2, 4, 3)
  """

  def __init__(self, units, **kwargs):
    super().__init__(units, **kwargs)
    self._kernels = kernel_ops.kernels()

  def call(self, inputs, training=None, residual=None, with_bias=True):
    """The projection of `inputs`, plus `residual` (of the outputs' shape) if given; without
    `with_bias`, the product alone (for a layer without an activation), for a caller that adds
    the bias in a fused pass of its own."""
    if not with_bias and self.activation not in (None, keras.activations.linear):
      raise ValueError(f"{self.name} has an activation, so it cannot leave its bias to the "
                       "caller.")
    if self.lora_enabled or self.bias is None:
      # `self.kernel` includes the LoRA update.
      outputs = (super().call(inputs, training=training) if with_bias
                 else keras.ops.matmul(inputs, self.kernel))
      return outputs if residual is None else outputs + residual
    bias = weight_copies.read(self.bias, self.compute_dtype) if with_bias else None
    return self._kernels.dense(inputs, weight_copies.read(self.kernel, self.compute_dtype), bias,
                               self.activation, training=bool(training), residual=residual)
