"""`keras.layers.Dense` whose product goes through the kernels' `dense`."""

import keras

from official_bert import ops as kernel_ops
from official_bert.ops import weight_copies


@keras.saving.register_keras_serializable(package="official_bert")
class Dense(keras.layers.Dense):
  """`keras.layers.Dense` (same weights, names and config) computed by its kernels' `dense`.

  The `stock` and `cpu_xla` kernels compute what Keras does; `cpu_onednn` writes the product
  over a 2-D view of the inputs with an explicit bias add, the form TensorFlow's graph optimizer
  fuses with the activation into one oneDNN kernel (see `official_bert.ops.cpu_onednn.dense`).
  Layers with LoRA and quantized layers run Keras' own product.

  Args:
    units: the output width.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Dense` (`activation`, `kernel_initializer`, ...).

  Example:

  >>> layer = Dense(3, activation="relu")
  >>> tuple(layer(keras.ops.ones((2, 4, 5))).shape)
  (2, 4, 3)
  """

  # The kernel is stored `[input_dim, units]`, as Keras' (`TransposedDense` keeps it the other
  # way round); a fused kernel that reads it directly looks here.
  transposed_kernel = False

  def __init__(self, units, kernels="auto", **kwargs):
    super().__init__(units, **kwargs)
    self.kernels = kernel_ops.choice_name(kernels)
    self._kernels = kernel_ops.kernels(kernels)

  def call(self, inputs, training=None):
    if self.lora_enabled or self.bias is None:
      return super().call(inputs, training=training)  # `self.kernel` includes the LoRA update
    return self._kernels.dense(inputs, weight_copies.read(self.kernel, self.compute_dtype),
                               weight_copies.read(self.bias, self.compute_dtype),
                               self.activation, training=bool(training))

  def get_config(self):
    return dict(super().get_config(), kernels=self.kernels)
