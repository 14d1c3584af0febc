"""The stock forms of the backend-specific kernels: plain TensorFlow and Keras, autodiff gradients.

These define each kernel's contract; `cpu_xla.py` computes the same functions another way.
"""

import keras
import tensorflow as tf


def dropout(inputs, rate, seed):
  """Zeroes each element with probability `rate` and scales the others by `1 / (1 - rate)`.

  Args:
    inputs: a float tensor.
    rate: a Python float in `(0, 1)`.
    seed: an int32 tensor of shape `[2]`; the mask is a function of it.

  Returns:
    A tensor like `inputs`.
  """
  return tf.nn.experimental.stateless_dropout(inputs, rate=rate, seed=seed)


def label_logits(labels, logits):
  """The logit of each row's label: `logits[..., label]`, float32 `[...]`.

  Example:

  >>> float(label_logits(tf.constant([1]), tf.constant([[0.5, 2.0]]))[0])
  2.0
  """
  labels = tf.cast(labels, tf.int32)
  return tf.gather(tf.cast(logits, tf.float32), labels[..., None],
                   batch_dims=labels.shape.rank)[..., 0]


def sparse_softmax_cross_entropy(labels, logits):
  """Per-row `-log softmax(logits)[label]`, computed in float32.

  Args:
    labels: int `[...]`, each in `[0, classes)`.
    logits: float `[..., classes]`.

  Returns:
    float32 `[...]`.

  Example:

  >>> import numpy as np
  >>> loss = sparse_softmax_cross_entropy(np.array([1]), np.log(np.array([[1.0, 3.0]])))
  >>> round(float(loss[0]), 4)  # -log(3 / 4)
  0.2877
  """
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.cast(labels, tf.int32), tf.cast(logits, tf.float32))


def project_onto_table(hidden, table, bias):
  """`hidden @ table^T + bias`: a 2-D `[rows, hidden]` input onto a `[classes, hidden]` table."""
  return tf.matmul(hidden, table, transpose_b=True) + bias


def matmul_transposed(inputs, kernel):
  """`inputs @ kernel^T` over the last axis of `inputs`, with `kernel` of shape `[out, in]`."""
  # One 2-D product over all leading axes. (`tf.einsum("...i,oi->...o")`, the same function,
  # compiled under XLA for CPU about 200 times slower than this at BERT's shapes.)
  return tf.tensordot(inputs, kernel, [[inputs.shape.rank - 1], [1]])


def dense(inputs, kernel, bias, activation=None, transpose_kernel=False, training=False):
  """`activation(inputs @ kernel + bias)` over the last axis of `inputs`, as `keras.layers.Dense`.

  Args:
    inputs: float `[..., in]`.
    kernel: `[in, out]`, or `[out, in]` with `transpose_kernel`.
    bias: `[out]`.
    activation: a function of one tensor, or None.
    transpose_kernel: the kernel is stored `[out, in]` (see `TransposedDense`).
    training: whether the gradient will be taken (a backend may then choose another form).

  Example:

  >>> float(dense(tf.ones((1, 2)), tf.ones((2, 1)), tf.constant([0.5]))[0, 0])
  2.5
  """
  if transpose_kernel:
    outputs = matmul_transposed(inputs, kernel)
  else:
    outputs = keras.ops.matmul(inputs, kernel)
  outputs = outputs + bias
  return outputs if activation is None else activation(outputs)


def gelu(x):
  """The exact (erf) GELU, `x * Phi(x)`."""
  return keras.activations.gelu(x, approximate=False)


def global_norm(tensors):
  """The Euclidean norm of all `tensors` together (float32); None entries are skipped.

  Args:
    tensors: a list of tensors or `tf.IndexedSlices` (their values count).

  Example:

  >>> float(global_norm([tf.ones([2, 32]), tf.constant([6.0])]))
  10.0
  """
  values = [tf.cast(t.values if isinstance(t, tf.IndexedSlices) else t, tf.float32)
            for t in tensors if t is not None]
  return tf.linalg.global_norm(values) if values else tf.constant(0.0)
