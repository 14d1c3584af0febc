"""One BERT transformer layer: self-attention and feed-forward, each with a post-norm residual."""

import keras
from keras import ops

from official_bert import ops as kernel_ops
from official_bert.layers.activations import canonical_activation, get_activation
from official_bert.layers.attention import SelfAttention
from official_bert.layers.dense import Dense
from official_bert.layers.dropout import Dropout
from official_bert.layers.embeddings import LAYER_NORM_EPSILON
from official_bert.layers.layer_norm import LayerNorm
from official_bert.layers.transposed_dense import TransposedDense


@keras.saving.register_keras_serializable(package="official_bert")
class TransformerBlock(keras.layers.Layer):
  """`LayerNorm(x + Attention(x))`, then `LayerNorm(h + FeedForward(h))`, as in BERT.

  Each sublayer ends in its kernels' `project_dropout_add_layer_norm`: the sublayer's last
  projection, its dropout, the residual sum and the layer norm, which the CPU kernels fuse
  (`official_bert.ops`).

  Args:
    hidden_size: width of inputs and outputs.
    num_heads: attention heads.
    intermediate_size: width of the feed-forward layer.
    activation: name of the feed-forward activation (see `get_activation`; a bare `gelu` is
      the original's tanh form).
    dropout_rate: dropout on the attention output and the feed-forward output.
    attention_dropout_rate: dropout on the attention probabilities.
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
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
               dropout_rate=0.0, attention_dropout_rate=0.0, initializer_range=0.02,
               kernels="auto", **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.activation = canonical_activation(activation)
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernel_ops.choice_name(kernels)
    self._kernels = kernel_ops.kernels(kernels)
    # The fused ends of the sublayers read the layer norms' float32 weights as they are (an
    # autocast scope would round them to the compute dtype); the sublayers cast their own.
    self.autocast = False
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    policy, kernels = self.dtype_policy, self._kernels
    self.attention = SelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                   initializer_range, kernels=kernels, dtype=policy,
                                   name="attention")
    self.attention_dropout = Dropout(dropout_rate, kernels=kernels, dtype=policy,
                                     name="attention_dropout")
    # Layer norms in float32 keep mixed-precision training stable.
    self.attention_layer_norm = LayerNorm(
        epsilon=LAYER_NORM_EPSILON, kernels=kernels, dtype="float32", name="attention_layer_norm")
    self.intermediate = Dense(
        intermediate_size, activation=get_activation(activation, kernels),
        kernel_initializer=initializer, kernels=kernels, dtype=policy, name="intermediate")
    self.output_dense = TransposedDense(hidden_size, kernel_initializer=initializer,
                                        kernels=kernels, dtype=policy, name="output_dense")
    self.output_dropout = Dropout(dropout_rate, kernels=kernels, dtype=policy,
                                  name="output_dropout")
    self.output_layer_norm = LayerNorm(
        epsilon=LAYER_NORM_EPSILON, kernels=kernels, dtype="float32", name="output_layer_norm")

  def build(self, inputs_shape, mask_shape=None):
    inputs_shape = tuple(inputs_shape)
    self.attention.build(inputs_shape)
    self.attention_layer_norm.build(inputs_shape)
    self.intermediate.build(inputs_shape)
    self.output_dense.build(inputs_shape[:-1] + (self.intermediate_size,))
    self.output_layer_norm.build(inputs_shape)

  def call(self, inputs, mask, training=None):
    x = ops.cast(inputs, self.compute_dtype)
    # x = norm(x + dropout(attention(x))), attention ending in its output projection.
    x = self._kernels.project_dropout_add_layer_norm(
        self.attention.attend(x, mask, training=training), self.attention.output_dense, x,
        self.attention_dropout, self.attention_layer_norm, training=training)
    # x = norm(x + dropout(ffn(x))), ffn ending in its output projection.
    return self._kernels.project_dropout_add_layer_norm(
        self.intermediate(x, training=training), self.output_dense, x, self.output_dropout,
        self.output_layer_norm, training=training)

  def compute_output_shape(self, inputs_shape, mask_shape=None):
    return inputs_shape

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  intermediate_size=self.intermediate_size, activation=self.activation,
                  dropout_rate=self.dropout_rate,
                  attention_dropout_rate=self.attention_dropout_rate,
                  initializer_range=self.initializer_range, kernels=self.kernels)
    return config
