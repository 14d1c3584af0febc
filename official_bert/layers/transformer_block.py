"""One BERT transformer layer: self-attention and feed-forward, each with a post-norm residual."""

import keras
from keras import ops

from official_bert.layers.activations import canonical_activation, get_activation
from official_bert.layers.attention import SelfAttention
from official_bert.layers.dense import Dense
from official_bert.layers.dropout import Dropout
from official_bert.layers.embeddings import LAYER_NORM_EPSILON
from official_bert.layers.layer_norm import LayerNorm
from official_bert.layers.transposed_dense import TransposedDense
from official_bert.ops import weight_copies


@keras.saving.register_keras_serializable(package="official_bert")
class TransformerBlock(keras.layers.Layer):
  """`LayerNorm(x + Attention(x))`, then `LayerNorm(h + FeedForward(h))`, as in BERT.

  Args:
    hidden_size: width of inputs and outputs.
    num_heads: attention heads.
    intermediate_size: width of the feed-forward layer.
    activation: name of the feed-forward activation (see `get_activation`; a bare `gelu` is
      the original's tanh form).
    dropout_rate: dropout on the attention output and the feed-forward output.
    attention_dropout_rate: dropout on the attention probabilities.
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    inputs: `[batch, seq, hidden_size]`.
    mask: `[batch, seq]`, 1 for real tokens and 0 for padding.

  Returns:
    `[batch, seq, hidden_size]`.

  Example:

  >>> block = TransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16)
  >>> tuple(block(ops.ones((2, 5, 8)), ops.ones((2, 5))).shape)
  (2, 5, 8)
  """

  def __init__(self, hidden_size, num_heads, intermediate_size, activation="gelu_tanh",
               dropout_rate=0.0, attention_dropout_rate=0.0, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.activation = canonical_activation(activation)
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    policy = self.dtype_policy
    self.attention = SelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                   initializer_range, dtype=policy, name="attention")
    self.attention_dropout = Dropout(dropout_rate, dtype=policy, name="attention_dropout")
    # Layer norms in float32 keep mixed-precision training stable.
    self.attention_layer_norm = LayerNorm(
        epsilon=LAYER_NORM_EPSILON, dtype="float32", name="attention_layer_norm")
    self.intermediate = Dense(
        intermediate_size, activation=get_activation(activation), kernel_initializer=initializer,
        dtype=policy, name="intermediate")
    self.output_dense = TransposedDense(hidden_size, kernel_initializer=initializer,
                                        dtype=policy, name="output_dense")
    self.output_dropout = Dropout(dropout_rate, dtype=policy, name="output_dropout")
    self.output_layer_norm = LayerNorm(
        epsilon=LAYER_NORM_EPSILON, dtype="float32", name="output_layer_norm")

  def build(self, inputs_shape, mask_shape=None):
    inputs_shape = tuple(inputs_shape)
    self.attention.build(inputs_shape)
    self.attention_layer_norm.build(inputs_shape)
    self.intermediate.build(inputs_shape)
    self.output_dense.build(inputs_shape[:-1] + (self.intermediate_size,))
    self.output_layer_norm.build(inputs_shape)

  def call(self, inputs, mask, training=None):
    inputs = ops.cast(inputs, self.compute_dtype)
    if training:
      # Each sublayer's output bias is added in the fused pass that ends the sublayer.
      hidden = self._dropout_add_normalize(
          self.attention(inputs, mask, training=True, with_bias=False), inputs,
          self.attention_dropout, self.attention_layer_norm, self.attention.output_dense.bias)
      return self._dropout_add_normalize(
          self.output_dense(self.intermediate(hidden), with_bias=False), hidden,
          self.output_dropout, self.output_layer_norm, self.output_dense.bias)
    # Without dropout, each residual connection is added by the projection before it, which
    # the `cpu_onednn` kernels fuse into the product.
    attended = self.attention(inputs, mask, training=False, residual=inputs)
    hidden = ops.cast(self.attention_layer_norm(attended), self.compute_dtype)
    transformed = self.output_dense(self.intermediate(hidden), residual=hidden)
    return ops.cast(self.output_layer_norm(transformed), self.compute_dtype)

  def _dropout_add_normalize(self, outputs, residual, dropout, layer_norm, bias):
    """`layer_norm(residual + dropout(outputs + bias))` in training, by the layer norm as one
    kernel (one fused pass on the `cpu_onednn` kernels in bfloat16)."""
    seed = dropout.next_seed() if dropout.rate else None
    return ops.cast(layer_norm(outputs, training=True, residual=residual,
                               dropout_rate=dropout.rate, seed=seed,
                               bias=weight_copies.read(bias, self.compute_dtype)),
                    self.compute_dtype)

  def compute_output_shape(self, inputs_shape, mask_shape=None):
    return inputs_shape

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  intermediate_size=self.intermediate_size, activation=self.activation,
                  dropout_rate=self.dropout_rate,
                  attention_dropout_rate=self.attention_dropout_rate,
                  initializer_range=self.initializer_range)
    return config
