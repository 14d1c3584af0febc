"""The BERT input embedding: word + position + segment, then layer norm and dropout."""

import keras
from keras import ops

from official_bert import ops as kernel_ops
from official_bert.layers.dropout import Dropout
from official_bert.layers.layer_norm import LayerNorm

LAYER_NORM_EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="official_bert")
class BertEmbeddings(keras.layers.Layer):
  """Sums word, position and segment embeddings, then normalises and drops out.

  Args:
    vocab_size: rows of the word-embedding table.
    hidden_size: embedding width.
    max_position_embeddings: rows of the position table; longer inputs are an error.
    type_vocab_size: rows of the segment table.
    dropout_rate: dropout after the layer norm.
    initializer_range: standard deviation of the truncated-normal initializer.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Layer`.

  Call args:
    word_ids: int `[batch, seq]`.
    type_ids: int `[batch, seq]`.

  Returns:
    `[batch, seq, hidden_size]`.

  Example:

  >>> layer = BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=16,
  ...                        type_vocab_size=2)
  >>> tuple(layer(ops.ones((2, 5), "int32"), ops.zeros((2, 5), "int32")).shape)
  (2, 5, 8)
  """

  def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
               dropout_rate=0.0, initializer_range=0.02, kernels="auto", **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernel_ops.choice_name(kernels)
    kernels = kernel_ops.kernels(kernels)
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    self.word_embeddings = keras.layers.Embedding(
        vocab_size, hidden_size, embeddings_initializer=initializer, dtype=self.dtype_policy,
        name="word_embeddings")
    self.position_embeddings = keras.layers.Embedding(
        max_position_embeddings, hidden_size, embeddings_initializer=initializer,
        dtype=self.dtype_policy, name="position_embeddings")
    self.token_type_embeddings = keras.layers.Embedding(
        type_vocab_size, hidden_size, embeddings_initializer=initializer, dtype=self.dtype_policy,
        name="token_type_embeddings")
    # Layer norm statistics in float32 keep mixed-precision training stable.
    self.layer_norm = LayerNorm(
        epsilon=LAYER_NORM_EPSILON, kernels=kernels, dtype="float32", name="layer_norm")
    self.dropout = Dropout(dropout_rate, kernels=kernels, dtype=self.dtype_policy,
                           name="dropout")

  def build(self, word_ids_shape, type_ids_shape=None):
    self.word_embeddings.build(word_ids_shape)
    self.position_embeddings.build((None,))
    self.token_type_embeddings.build(word_ids_shape)
    self.layer_norm.build(tuple(word_ids_shape) + (self.hidden_size,))

  def call(self, word_ids, type_ids, training=None):
    seq_length = ops.shape(word_ids)[1]
    positions = self.position_embeddings.embeddings[:seq_length]
    embeddings = (self.word_embeddings(word_ids) + self.token_type_embeddings(type_ids)
                  + ops.cast(positions, self.compute_dtype)[None])
    embeddings = self.layer_norm(embeddings, training=training)
    return self.dropout(ops.cast(embeddings, self.compute_dtype), training=training)

  def compute_output_shape(self, word_ids_shape, type_ids_shape=None):
    return tuple(word_ids_shape) + (self.hidden_size,)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                  max_position_embeddings=self.max_position_embeddings,
                  type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, kernels=self.kernels)
    return config
