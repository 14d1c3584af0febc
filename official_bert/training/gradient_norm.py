"""The global norm of the gradients, summed in a form that XLA's CPU backend reduces quickly."""

import tensorflow as tf

# XLA's CPU backend rewrites a sum over more than 32 elements of a product (such as a square)
# into windowed partial sums that run at a fraction of memory speed. Sums over rows of 32 are
# left alone and fused with the squaring.
_ROW = 32


def _sum_of_squares(tensor):
  if isinstance(tensor, tf.IndexedSlices):
    tensor = tensor.values
  size = tensor.shape.num_elements()
  if size is None or size % _ROW:
    return tf.reduce_sum(tf.square(tensor))
  rows = tf.reduce_sum(tf.square(tf.reshape(tensor, [size // _ROW, _ROW])), -1)
  # `abs` (a no-op on these non-negative sums, NaN kept) stops XLA from merging the two sums
  # back into one long sum of a product, the slow form.
  return tf.reduce_sum(tf.abs(rows))


def global_norm(tensors):
  """The Euclidean norm of all `tensors` together, as `tf.linalg.global_norm` computes it.

  Args:
    tensors: a list of tensors or `tf.IndexedSlices` (their values count), None entries skipped.

  Returns:
    A float32 scalar.

  Example:

  >>> float(global_norm([tf.ones([2, 32]), tf.constant([6.0])]))
  10.0
  """
  squares = [tf.cast(_sum_of_squares(t), tf.float32) for t in tensors if t is not None]
  return tf.sqrt(tf.add_n(squares)) if squares else tf.constant(0.0)
