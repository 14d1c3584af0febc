"""Bidirectional multi-head self-attention with a padding mask."""

import math

import keras
from keras import ops

from official_bert.layers.dense import Dense
from official_bert.layers.dropout import Dropout

# Added to the scores of padding positions; large enough that their softmax weight is exactly zero
# in float32, where the scores are computed.
_MASKED_SCORE = -1e9


@keras.saving.register_keras_serializable(package="official_bert")
class SelfAttention(keras.layers.Layer):
  """Multi-head self-attention over every non-padding position (no causal mask).

  Queries, keys and values come from one fused projection (`qkv`, kernel `[hidden, 3 * hidden]`,
  the three blocks in that order), which is one large matrix product instead of three small ones.
  Scores and softmax run in float32 whatever the compute dtype.

  Args:
    hidden_size: width of the inputs and outputs.
    num_heads: number of attention heads; must divide `hidden_size`.
    dropout_rate: dropout on the attention probabilities.
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    inputs: `[batch, seq, hidden]`.
    mask: `[batch, seq]`, 1 for real tokens and 0 for padding.

  Returns:
    `[batch, seq, hidden]`, before the output projection's residual and layer norm.

  Example:

  >>> layer = SelfAttention(hidden_size=8, num_heads=2)
  >>> tuple(layer(ops.ones((2, 5, 8)), ops.ones((2, 5))).shape)
  (2, 5, 8)
  """

  def __init__(self, hidden_size, num_heads, dropout_rate=0.0, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}.")
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    self.qkv = Dense(3 * hidden_size, kernel_initializer=initializer,
                                  dtype=self.dtype_policy, name="qkv")
    self.output_dense = Dense(hidden_size, kernel_initializer=initializer,
                              dtype=self.dtype_policy, name="output_dense")
    self.probs_dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="probs_dropout")

  def build(self, inputs_shape, mask_shape=None):
    self.qkv.build(inputs_shape)
    self.output_dense.build(inputs_shape)

  def call(self, inputs, mask, training=None):
    batch, seq = ops.shape(inputs)[0], ops.shape(inputs)[1]
    head_size = self.hidden_size // self.num_heads
    qkv = ops.reshape(self.qkv(inputs), (batch, seq, 3, self.num_heads, head_size))
    # Unstacked rather than sliced: the gradient is then one stack, where three slices' gradients
    # are three zero-padded copies of the block summed (a tenth of a bfloat16 step on CPU).
    query, key, value = ops.unstack(qkv, 3, axis=2)
    query = query * ops.cast(1.0 / math.sqrt(head_size), query.dtype)
    scores = ops.cast(ops.einsum("bqnd,bknd->bnqk", query, key), "float32")
    padding = 1.0 - ops.cast(mask, "float32")
    scores = scores + padding[:, None, None, :] * _MASKED_SCORE
    probs = ops.softmax(scores, axis=-1)
    probs = self.probs_dropout(ops.cast(probs, self.compute_dtype), training=training)
    context = ops.einsum("bnqk,bknd->bqnd", probs, value)
    return self.output_dense(ops.reshape(context, (batch, seq, self.hidden_size)))

  def compute_output_shape(self, inputs_shape, mask_shape=None):
    return inputs_shape

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
