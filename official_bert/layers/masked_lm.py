"""The masked-LM head: predicts the original token at each masked position."""

import keras
from keras import ops

from official_bert import ops as kernel_ops
from official_bert.layers.activations import canonical_activation, get_activation
from official_bert.layers.dense import Dense
from official_bert.layers.embeddings import LAYER_NORM_EPSILON
from official_bert.ops import weight_copies


@keras.saving.register_keras_serializable(package="official_bert")
class MaskedLMHead(keras.layers.Layer):
  """Dense + activation + layer norm, then a projection onto the vocabulary plus an output bias.

  BERT ties the projection to the word-embedding table: pass the encoder's word `embedding` layer
  and the head multiplies by its transposed table. Without one, the head owns an untied
  `[hidden, vocab]` kernel. The tie is not part of `get_config`; the model that owns both layers
  restores it. The tied product is the kernels' `project_onto_table` (see `official_bert.ops`).

  Args:
    vocab_size: number of output classes (tokens).
    hidden_size: width of the encoder's sequence output.
    activation: name of the transform's activation (see `get_activation`; BERT's is
      `gelu_tanh`, which a bare `gelu` also names).
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    embedding: optional `keras.layers.Embedding` whose table the output projection shares.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    sequence_output: `[batch, seq, hidden_size]`.
    positions: int `[batch, predictions]`, the masked positions to predict.

  Returns:
    float32 logits `[batch, predictions, vocab_size]`.

  Example:

  >>> head = MaskedLMHead(vocab_size=20, hidden_size=8)
  >>> tuple(head(ops.ones((2, 5, 8)), ops.zeros((2, 3), "int32")).shape)
  (2, 3, 20)
  """

  def __init__(self, vocab_size, hidden_size, activation="gelu_tanh", initializer_range=0.02,
               embedding=None, kernels="auto", **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.activation = canonical_activation(activation)
    self.initializer_range = initializer_range
    self.embedding = embedding
    self._initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    self.kernels = kernel_ops.choice_name(kernels)
    self._kernels = kernel_ops.kernels(kernels)
    self.transform = Dense(hidden_size, activation=get_activation(activation, self._kernels),
                           kernel_initializer=self._initializer, kernels=self._kernels,
                           dtype=self.dtype_policy, name="transform")
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=LAYER_NORM_EPSILON, dtype="float32", name="layer_norm")

  def build(self, sequence_output_shape, positions_shape=None):
    self.transform.build((None, self.hidden_size))
    self.layer_norm.build((None, self.hidden_size))
    if self.embedding is None:
      self.output_kernel = self.add_weight(shape=(self.hidden_size, self.vocab_size),
                                           initializer=self._initializer, name="output_kernel")
    self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                       name="output_bias")

  def call(self, sequence_output, positions):
    selected = ops.take_along_axis(sequence_output, ops.cast(positions, "int32")[..., None],
                                   axis=1)
    hidden = ops.cast(self.layer_norm(self.transform(selected)), self.compute_dtype)
    if self.embedding is None:
      kernel = weight_copies.read(self.output_kernel, self.compute_dtype)
      logits = ops.matmul(hidden, kernel) + weight_copies.read(self.output_bias, self.compute_dtype)
      return ops.cast(logits, "float32")
    logits = self._kernels.project_onto_table(
        ops.reshape(hidden, (-1, self.hidden_size)),
        weight_copies.read(self.embedding.embeddings, self.compute_dtype),
        weight_copies.read(self.output_bias, self.compute_dtype))
    logits = ops.reshape(logits, (*ops.shape(hidden)[:-1], self.vocab_size))
    return ops.cast(logits, "float32")

  def compute_output_shape(self, sequence_output_shape, positions_shape):
    return tuple(positions_shape) + (self.vocab_size,)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                  activation=self.activation, initializer_range=self.initializer_range,
                  kernels=self.kernels)
    return config

