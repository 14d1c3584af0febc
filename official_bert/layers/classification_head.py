"""Dropout + a dense projection to class logits: the output layer of every fine-tuning task."""

import keras
from keras import ops

from official_bert import ops as kernel_ops
from official_bert.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="official_bert")
class ClassificationHead(keras.layers.Layer):
  """Projects the last axis of its input onto `num_classes` float32 logits.

  One layer serves every task head of the paper: on the pooled `[CLS]` vector it is the
  next-sentence head (2 classes), the sentence(-pair) classifier (`num_classes=1` for regression) or
  the per-choice scorer of multiple choice (1 class); on the sequence output it is the token
  classifier.

  Args:
    num_classes: number of logits per input vector.
    dropout_rate: dropout before the projection.
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    kernels: the kernels of its dropout (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Layer`.

  Example:

  >>> head = ClassificationHead(num_classes=3)
  >>> tuple(head(ops.ones((2, 8))).shape)
  (2, 3)
  """

  def __init__(self, num_classes, dropout_rate=0.0, initializer_range=0.02, kernels="auto",
               **kwargs):
    super().__init__(**kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernel_ops.choice_name(kernels)
    self.dropout = Dropout(dropout_rate, kernels=kernels, dtype=self.dtype_policy,
                           name="dropout")
    self.dense = keras.layers.Dense(
        num_classes, kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=initializer_range), dtype=self.dtype_policy, name="dense")

  def build(self, inputs_shape):
    self.dense.build(inputs_shape)

  def call(self, inputs, training=None):
    return ops.cast(self.dense(self.dropout(inputs, training=training)), "float32")

  def compute_output_shape(self, inputs_shape):
    return tuple(inputs_shape[:-1]) + (self.num_classes,)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, kernels=self.kernels)
    return config


@keras.saving.register_keras_serializable(package="official_bert")
class SpanHead(keras.layers.Layer):
  """Start and end logits for every position of the sequence output (SQuAD-style span labelling).

  Args:
    initializer_range: standard deviation of the truncated-normal kernel initializer.
    **kwargs: passed to `keras.layers.Layer`.

  Returns:
    A pair of float32 `[batch, seq]` tensors: start logits and end logits.

  Example:

  >>> start, end = SpanHead()(ops.ones((2, 5, 8)))
  >>> tuple(start.shape)
  (2, 5)
  """

  def __init__(self, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(
        2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
        dtype=self.dtype_policy, name="dense")

  def build(self, inputs_shape):
    self.dense.build(inputs_shape)

  def call(self, inputs):
    logits = ops.cast(self.dense(inputs), "float32")
    return logits[..., 0], logits[..., 1]

  def compute_output_shape(self, inputs_shape):
    return tuple(inputs_shape[:-1]), tuple(inputs_shape[:-1])

  def get_config(self):
    config = super().get_config()
    config.update(initializer_range=self.initializer_range)
    return config
