"""The original BERT's AdamW step as one pass over memory, for float32 weights that a bfloat16
training step reads through copies (`ops.weight_copies`): a TensorFlow kernel of this package
(`adam_update.cc`), built by `bert-build-kernels` (`ops.native`).

Why: XLA's CPU backend writes each output of a program in a loop of its own, so the compiled
update passes over each weight four times (the moments, the weight, its bfloat16 copy) and reads
about 46 bytes a weight where one pass needs 32 (`docs/design/cpu-kernels.md`).

When: `Trainer` updates with it each weight whose gradient comes back dense in bfloat16 through
its copy (plus, for BERT's tied word embeddings, the lookup's sparse float32 rows), when the
optimizer is `AdamWeightDecay` and `kernel()` loads; the other weights, and every weight where
the kernel is not built, take the compiled update, the same arithmetic. Set
`OFFICIAL_BERT_FUSED_UPDATE=0` to use the compiled update everywhere.

Example (`sparse_rows` needs no built kernel):

>>> rows, grads = sparse_rows(tf.IndexedSlices(tf.ones([3, 2]), tf.constant([4, 1, 4])))
>>> rows.numpy().tolist(), grads.numpy().tolist()
([4, 1], [[2.0, 2.0], [1.0, 1.0]])
"""

import os

import tensorflow as tf

from official_bert.ops import native

SOURCE = "adam_update.cc"
ENABLE_VARIABLE = "OFFICIAL_BERT_FUSED_UPDATE"


def enabled():
  """Whether the kernel may be used: `OFFICIAL_BERT_FUSED_UPDATE` is not `0`."""
  return os.environ.get(ENABLE_VARIABLE, "1") != "0"


def kernel():
  """The loaded kernel's module (`adam_weight_decay_bfloat16_update`), or None where it is
  turned off (`enabled()`), or is not built for this CPU or does not load (`native.load`, which
  logs why in one line)."""
  return native.load(SOURCE) if enabled() else None


def squared_norm(gradient):
  """The float32 sum of squares of a bfloat16 `gradient`, by the kernel's library: a term of the
  global norm the update clips by, taken apart so that each gradient's term is summed as soon as
  the gradient is ready, beside the products still running, instead of in one pass over all the
  gradients at the end of the backward pass.

  Blocks of a fixed size are summed, then the blocks in order: the sum does not depend on the
  number of threads.

  Args:
    gradient: a bfloat16 tensor.

  Returns:
    A float32 scalar.

  Raises:
    RuntimeError: the kernel is unavailable (`kernel()` is None).
  """
  return _module().squared_norm_bfloat16(gradient)


def _module():
  module = kernel()
  if module is None:
    raise RuntimeError("The fused AdamW update kernel is unavailable (not built: "
                       "bert-build-kernels; or turned off); see the log.")
  return module


def sparse_rows(gradient):
  """The rows of a sparse `tf.IndexedSlices` gradient as `(rows, row_gradients)`: the distinct
  row indices (int32) and each one's summed float32 gradient, as `update` takes them (the
  module docstring has an example).

  Args:
    gradient: a `tf.IndexedSlices` of a 2-D variable.

  Returns:
    `(rows, row_gradients)`: int32 `[n]` and float32 `[n, width]`.
  """
  rows, positions = tf.unique(tf.cast(gradient.indices, tf.int32))
  summed = tf.math.unsorted_segment_sum(tf.cast(gradient.values, tf.float32), positions,
                                        tf.size(rows))
  return rows, summed


def update(variable, m, v, copy, gradient, learning_rate, gradient_scale, beta_1, beta_2,
           epsilon, weight_decay, rows=None, row_gradients=None):
  """One `AdamWeightDecay` step of `variable` in place, with its moments and bfloat16 copy.

  Per element, with `g = (gradient + the row's row_gradients) * gradient_scale` in float32:
  `m += (g - m) * (1 - beta_1)`, `v += (g * g - v) * (1 - beta_2)`, then
  `w -= (w * weight_decay) * learning_rate` and `w -= learning_rate * (m / (sqrt(v) + epsilon))`,
  and the copy becomes `w` rounded to bfloat16: each operation rounded to float32 in that order,
  as the compiled update of `AdamWeightDecay` (with Keras' decoupled decay) does.

  Args:
    variable, m, v: float32 variables of one shape (the weight and its moments).
    copy: the weight's bfloat16 copy, same shape.
    gradient: the dense bfloat16 gradient.
    learning_rate, gradient_scale: float32 scalars (the scale clips by global norm).
    beta_1, beta_2, epsilon, weight_decay: Python floats.
    rows, row_gradients: optional distinct int32 row indices of a 2-D variable and their float32
      gradients `[len(rows), width]` to add (`sparse_rows`).

  Returns:
    The kernel's operation (None when run eagerly).

  Raises:
    RuntimeError: the kernel is unavailable (`kernel()` is None).
  """
  ops = _module()
  width = variable.shape[-1] if len(variable.shape) else 1
  if rows is None:
    rows, row_gradients = tf.zeros([0], tf.int32), tf.zeros([0, width], tf.float32)
  return ops.adam_weight_decay_bfloat16_update(
      variable.handle, m.handle, v.handle, copy.handle, gradient, rows, row_gradients,
      tf.cast(learning_rate, tf.float32), tf.cast(gradient_scale, tf.float32),
      # The rates as Keras computes them, in Python floats.
      first_moment_rate=1 - beta_1, second_moment_rate=1 - beta_2, epsilon=float(epsilon),
      weight_decay=float(weight_decay))
