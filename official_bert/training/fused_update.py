"""`FusedUpdate`: a bfloat16 step's optimizer update, with `ops.adam_update`'s one-pass kernel
for the weights read through bfloat16 copies.

The weights whose gradient is a dense bfloat16 tensor from their copy (each transformer layer's
kernels and biases, the masked-LM head's) and the tied word embeddings (that gradient plus the
lookup's sparse float32 rows) are updated by the kernel; the rest (layer norms, the other
embeddings, the pooler) by the compiled update, after the kernel's. Both clip by the global norm
of all the gradients. The kernel's library sums the squares of each of its gradients as soon as
that gradient is ready (`adam_update.squared_norm`), beside the backward pass's products, and one
XLA program adds the rest's before either update runs: as one program over all the gradients,
the norm would be a pass at the step's end with nothing beside it. A sparse part enters
the norm exactly without a dense float32 table: `|D + S|^2 = |D|^2 + sum over S's rows r of
(|D_r + S_r|^2 - |D_r|^2)`.
"""

import tensorflow as tf

from official_bert.ops import adam_update
from official_bert.training import optimization, updates
from official_bert.training.adam_weight_decay import AdamWeightDecay


class FusedUpdate(updates.CopiesUpdate):
  """`updates.CopiesUpdate` with the fused kernel for the weights whose gradients come back in
  bfloat16 through their copies, and the compiled update, after it, for the rest.

  Args:
    optimizer: an `AdamWeightDecay` built for `variables`.
    variables: the trained float32 variables, in the order of the gradients.
    clip_norm: the global norm the gradients are clipped to, or None.
    dtype: the copies' dtype, bfloat16.
  """

  def __init__(self, optimizer, variables, clip_norm, dtype):
    super().__init__(optimizer, variables, clip_norm, dtype)
    self._norm = tf.function(self._rest_norm, jit_compile=True, autograph=False)
    self._rest = tf.function(self._apply_rest, jit_compile=True, autograph=False)

  @staticmethod
  def supports(optimizer, dtype):
    """Whether steps that read `dtype` copies can use the kernel with `optimizer` (this loads
    it where it is built)."""
    return (isinstance(optimizer, AdamWeightDecay) and tf.as_dtype(dtype) == tf.bfloat16
            and adam_update.kernel() is not None)

  def __call__(self, gradients):
    """Applies the gradients' two parts (`WeightCopies.gradients`); returns their global norm."""
    direct, through_copies = gradients
    fused = [i for i, (own, copied) in enumerate(zip(direct, through_copies))
             if _dense_bfloat16(copied) and (own is None or isinstance(own, tf.IndexedSlices))]
    rest = [i for i in range(len(self.variables)) if i not in fused]
    rows = {i: adam_update.sparse_rows(direct[i]) for i in fused if direct[i] is not None}
    squares = ([adam_update.squared_norm(through_copies[i]) for i in fused]
               + [_rows_correction(through_copies[i], *rows[i]) for i in rows])
    norm = self._norm([direct[i] for i in rest], [through_copies[i] for i in rest],
                      tf.add_n(squares + [0.0]))
    # `tf.clip_by_global_norm`'s factor.
    scale = (self.clip_norm * tf.minimum(1.0 / norm, 1.0 / self.clip_norm) if self.clip_norm
             else tf.constant(1.0))
    learning_rate = tf.cast(self.optimizer.learning_rate, tf.float32)
    kernel_updates = []
    for i in fused:
      variable = self.variables[i]
      m, v = self.optimizer.slots(variable)
      # Keras' own test of the exemptions (`exclude_from_weight_decay`).
      decays = self.optimizer._use_weight_decay(variable)  # pylint: disable=protected-access
      kernel_updates.append(adam_update.update(
          variable, m, v, self.copies.copy_of(variable), through_copies[i], learning_rate,
          scale, self.optimizer.beta_1, self.optimizer.beta_2, self.optimizer.epsilon,
          (self.optimizer.weight_decay or 0.0) if decays else 0.0, *rows.get(i, (None, None))))
    with tf.control_dependencies(kernel_updates):
      # The compiled update also counts the step (`optimizer.iterations`), after the kernel
      # has read the learning rate of this one.
      self._rest(tuple(rest), [direct[i] for i in rest], [through_copies[i] for i in rest],
                 norm)
    return norm

  def _rest_norm(self, rest_direct, rest_copied, fused_squares):
    norm = self._global_norm(self.copies.combine(rest_direct, rest_copied))
    return tf.sqrt(tf.square(norm) + fused_squares) / optimization.loss_scale(self.optimizer)

  def _apply_rest(self, indices, direct, through_copies, norm):
    """The compiled update of the variables at `indices` (a tuple of ints), clipped by the
    global `norm` of all the gradients, and their copies written afresh."""
    variables = [self.variables[i] for i in indices]
    self._apply(self.copies.combine(direct, through_copies), norm, variables)
    self.copies.refresh(variables)


def _dense_bfloat16(gradient):
  return (gradient is not None and not isinstance(gradient, tf.IndexedSlices)
          and gradient.dtype == tf.bfloat16)


def _rows_correction(dense, rows, row_gradients):
  """What the sparse `row_gradients` at distinct `rows` add to the squared norm of `dense`."""
  base = tf.cast(tf.gather(dense, rows), tf.float32)
  return tf.reduce_sum(tf.square(base + row_gradients)) - tf.reduce_sum(tf.square(base))
