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

  def call(self, inputs, training=None, residual=None):
    """The projection of `inputs`, plus `residual` (of the outputs' shape) if given."""
    if self.lora_enabled or self.bias is None:
      outputs = super().call(inputs, training=training)
      return outputs if residual is None else outputs + residual
    return self._kernels.dense(inputs, weight_copies.read(self.kernel, self.compute_dtype),
                               weight_copies.read(self.bias, self.compute_dtype), self.activation,
                               training=bool(training), residual=residual)
