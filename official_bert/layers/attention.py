"""Bidirectional multi-head self-attention with a padding mask."""

import keras

from official_bert import ops as kernel_ops
from official_bert.layers.dense import Dense
from official_bert.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="official_bert")
class SelfAttention(keras.layers.Layer):
  """Multi-head self-attention over every non-padding position (no causal mask).

  Queries, keys and values come from one fused projection (`qkv`, kernel `[hidden, 3 * hidden]`,
  the three blocks in that order), which is one large matrix product instead of three small ones.
  Scores and softmax run in float32 whatever the compute dtype, except in inference on the
  `cpu_onednn` kernels (`official_bert.ops.cpu_onednn.attention`).

  Args:
    hidden_size: width of the inputs and outputs.
    num_heads: number of attention heads; must divide `hidden_size`.
    dropout_rate: dropout on the attention probabilities.
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    inputs: `[batch, seq, hidden]`.
    mask: `[batch, seq]`, 1 for real tokens and 0 for padding.

  Returns:
    `[batch, seq, hidden]`: `output_dense(attend(inputs, mask))`.

  Example:

  >>> layer = SelfAttention(hidden_size=8, num_heads=2)
  >>> tuple(layer(keras.ops.ones((2, 5, 8)), keras.ops.ones((2, 5))).shape)
  (2, 5, 8)
  """

  def __init__(self, hidden_size, num_heads, dropout_rate=0.0, initializer_range=0.02,
               kernels="auto", **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}.")
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernel_ops.choice_name(kernels)
    self._kernels = kernel_ops.kernels(kernels)
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    self.qkv = Dense(3 * hidden_size, kernel_initializer=initializer, kernels=self._kernels,
                     dtype=self.dtype_policy, name="qkv")
    self.output_dense = Dense(hidden_size, kernel_initializer=initializer, kernels=self._kernels,
                              dtype=self.dtype_policy, name="output_dense")
    self.probs_dropout = Dropout(dropout_rate, kernels=self._kernels, dtype=self.dtype_policy,
                                 name="probs_dropout")

  def build(self, inputs_shape, mask_shape=None):
    self.qkv.build(inputs_shape)
    self.output_dense.build(inputs_shape)

  def call(self, inputs, mask, training=None):
    return self.output_dense(self.attend(inputs, mask, training=training))

  def attend(self, inputs, mask, training=None):
    """The heads' contexts side by side, `[batch, seq, hidden]`, before `output_dense` (which a
    transformer block may fuse with what follows it)."""
    return self._kernels.attention(self.qkv(inputs), mask, self.num_heads, self.probs_dropout,
                                   training=training)

  def compute_output_shape(self, inputs_shape, mask_shape=None):
    return inputs_shape

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                  kernels=self.kernels)
    return config
