"""Softmax cross-entropy over a large vocabulary with a gradient that costs one pass.

`tf.nn.sparse_softmax_cross_entropy_with_logits` computes the softmax's gradient already in the
forward pass and keeps it, so an XLA-compiled training step reads and writes the whole
`[predictions, vocab]` logits block more often than it needs: at BERT-Tiny that block (640 x
30,522 floats, 78 MB) was touched about ten times per step, a sixth of the step's time. Here the
forward pass keeps only each row's maximum and sum of exponentials, and the backward pass
recomputes the softmax in the one pass that writes the gradient. The masked-LM metrics reuse the
same maximum and label logit, which XLA computes once for both.
"""

import tensorflow as tf


def sparse_softmax_cross_entropy(labels, logits):
  """Per-row `-log softmax(logits)[label]`, the value of the TensorFlow op of the same name.

  Args:
    labels: int `[...]`, each in `[0, classes)`.
    logits: float `[..., classes]`; computed in float32.

  Returns:
    float32 `[...]`, the cross-entropy of each row.

  Example:

  >>> import numpy as np
  >>> loss = sparse_softmax_cross_entropy(np.array([1]), np.log(np.array([[1.0, 3.0]])))
  >>> round(float(loss[0]), 4)  # -log(3 / 4)
  0.2877
  """
  logits = tf.cast(logits, tf.float32)
  labels = tf.cast(labels, tf.int32)
  return _cross_entropy(logits, labels)


def label_logits(labels, logits):
  """The logit of each row's label: `logits[..., label]`, float32 `[...]`."""
  labels = tf.cast(labels, tf.int32)
  return tf.gather(tf.cast(logits, tf.float32), labels[..., None],
                   batch_dims=labels.shape.rank)[..., 0]


@tf.custom_gradient
def _cross_entropy(logits, labels):
  max_logit = tf.reduce_max(logits, axis=-1, keepdims=True)
  sum_exp = tf.reduce_sum(tf.exp(logits - max_logit), axis=-1, keepdims=True)
  loss = (max_logit + tf.math.log(sum_exp))[..., 0] - label_logits(labels, logits)

  def gradient(upstream):
    probabilities = tf.exp(logits - max_logit) * (1.0 / sum_exp)
    one_hot = tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype)
    return (probabilities - one_hot) * upstream[..., None], None

  return loss, gradient
