"""The optimizer update of a training step: one interface, its forms, and the one place that
picks among them.

`Trainer` traces each step's forward pass inside `update.reading()`, takes the gradients with
`update.gradients(tape, loss, variables)` (`update.missing` says which variables got none),
sums them over the replicas, and calls
`update(gradients)`, which clips them to their global norm, applies them and returns that norm.
The forms differ in how the same arithmetic runs:

* `Update`: the ops traced into the step. XLA compiles them with the rest where it compiles the
  step whole (one device); with several replicas they run as a graph around the compiled
  replicas' passes (the update is a synchronisation point).
* `CompiledUpdate`: compiled by XLA on its own, for a step that runs without XLA on one device
  (`accelerators.Choice.compile_update`): the clipping and the optimizer's float32 element-wise
  work, a few fused passes per variable instead of a dozen graph ops.
* `CopiesUpdate`: compiled on its own too, under a mixed policy: it keeps low-precision copies of
  the float32 weights (`ops.weight_copies`), which the step's layers read instead of casting
  each weight, and writes them as it updates.
* `fused_update.FusedUpdate`: `CopiesUpdate` whose bfloat16 weights are updated by the one-pass
  kernel of `ops.adam_update` where it is built.

`choose` picks one when the trained variables are known.

Example:

>>> import keras
>>> layer = keras.layers.Dense(2)
>>> layer.build((None, 3))
>>> optimizer = keras.optimizers.SGD(0.1)
>>> optimizer.build(layer.trainable_variables)
>>> update = choose(optimizer, layer.trainable_variables, clip_norm=1.0, replicas=1,
...                 compile_update=True, accumulation_steps=1, dtype_policy=layer.dtype_policy,
...                 global_norm=tf.linalg.global_norm)
>>> type(update).__name__
'CompiledUpdate'
>>> norm = update([tf.ones([3, 2]), tf.ones([2])])
>>> round(float(norm), 4)
2.8284
"""

import contextlib

from absl import logging
import tensorflow as tf

from official_bert import ops
from official_bert.ops import weight_copies
from official_bert.training import optimization


class Update:
  """Clips the gradients of all replicas to their global norm and applies them.

  Args:
    optimizer: a Keras optimizer built for `variables`.
    variables: the trained variables, in the order of the gradients.
    clip_norm: the global norm to clip to, or None for no clipping.
    replicas: the replicas whose gradients are summed (`num_replicas_in_sync`).
    global_norm: `global_norm(gradients)`, the norm's form for the kernels in use.
  """

  def __init__(self, optimizer, variables, clip_norm, replicas, global_norm):
    self.optimizer, self.variables = optimizer, list(variables)
    self.clip_norm, self.replicas, self._global_norm = clip_norm, replicas, global_norm

  def reading(self):
    """A context for the trace of the step's forward pass (the weights' copies, where kept)."""
    return contextlib.nullcontext()

  def gradients(self, tape, target, variables):
    """The gradients of `target` for `variables`, in the form `__call__` takes."""
    # A table that is both looked up and multiplied (BERT's tied word embeddings) gets a sparse
    # gradient with repeated rows, which `global_norm` would misread; densify.
    return [None if g is None else tf.convert_to_tensor(g)
            for g in tape.gradient(target, variables)]

  def missing(self, gradients):
    """For each variable, whether `gradients` (of `gradients()`) hold none for it."""
    return [g is None for g in gradients]

  def restored(self):
    """Called after the weights were set (restored or initialised) and before the first step."""

  def __call__(self, gradients):
    """Applies the summed `gradients`; returns their global norm (before clipping)."""
    norm = self._global_norm(gradients) / optimization.loss_scale(self.optimizer)
    self._apply(gradients, norm)
    return norm

  def _apply(self, gradients, norm, variables=None):
    """Clips `gradients` by their global `norm` and applies them to `variables` (by default all
    the trained ones)."""
    if self.clip_norm:
      gradients, _ = tf.clip_by_global_norm(gradients, self.clip_norm, use_norm=norm)
    if self.replicas > 1:
      # Keras' `apply` sums the gradients over replicas once more; each hands in its share of
      # the (already summed and clipped) total.
      gradients = [g / self.replicas for g in gradients]
    self.optimizer.apply(gradients, self.variables if variables is None else variables)


class CompiledUpdate(Update):
  """`Update` with the clipping and the optimizer's work compiled by XLA apart from the step
  (same arguments)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._apply = tf.function(self._apply, jit_compile=True, autograph=False)


class CopiesUpdate(Update):
  """`CompiledUpdate` for steps that read copies of the weights in the compute dtype.

  The gradients come in two parts (`WeightCopies.gradients`: of each weight's own reads and of
  its copy's); one XLA program combines them, takes their norm, applies them and writes the
  copies afresh.

  Args:
    optimizer, variables, clip_norm: as for `Update` (on one replica).
    dtype: the copies' dtype, the compute dtype of the model's layers.
  """

  def __init__(self, optimizer, variables, clip_norm, dtype):
    # The form of the norm that XLA's CPU backend reduces quickly.
    super().__init__(optimizer, variables, clip_norm, 1, ops.kernels("cpu_xla").global_norm)
    self.copies = weight_copies.WeightCopies(self.variables, dtype)
    self._compiled = tf.function(self._apply_from_copies, jit_compile=True, autograph=False)

  def reading(self):
    return self.copies.reading()

  def gradients(self, tape, target, variables):
    return self.copies.gradients(tape, target, variables)

  def missing(self, gradients):
    return [own is None and copied is None for own, copied in zip(*gradients)]

  def restored(self):
    self.copies.refresh()

  def __call__(self, gradients):
    return self._compiled(*gradients)

  def _apply_from_copies(self, direct, through_copies):
    gradients = self.copies.combine(direct, through_copies)
    norm = self._global_norm(gradients) / optimization.loss_scale(self.optimizer)
    self._apply(gradients, norm)
    self.copies.refresh()
    return norm


def choose(optimizer, variables, *, clip_norm, replicas, compile_update, accumulation_steps,
           dtype_policy, global_norm):
  """The update form for a step; logs which, where it is not the plain one.

  Args:
    optimizer: the Keras optimizer, built for `variables`.
    variables: the trained variables.
    clip_norm: the global norm to clip to, or None.
    replicas: the replicas in sync; with more than one the update stays in the step's graph.
    compile_update: whether the step leaves the update to be compiled apart
      (`accelerators.Choice.compile_update`).
    accumulation_steps: micro-batches per step; with more than one the gradients sum in
      float32, without copies.
    dtype_policy: the model's Keras dtype policy.
    global_norm: the norm's form for the kernels in use (`ops.kernels().global_norm`).

  Returns:
    An `Update`.
  """
  if not compile_update or replicas > 1:
    return Update(optimizer, variables, clip_norm, replicas, global_norm)
  dtype = dtype_policy.compute_dtype
  if accumulation_steps > 1 or dtype == dtype_policy.variable_dtype:
    return CompiledUpdate(optimizer, variables, clip_norm, replicas, global_norm)
  # Imported here: the fused form loads the kernel's library, which only this case needs.
  from official_bert.training import fused_update  # pylint: disable=import-outside-toplevel

  if fused_update.FusedUpdate.supports(optimizer, dtype):
    update = fused_update.FusedUpdate(optimizer, variables, clip_norm, dtype)
    logging.info("The steps read %s copies of the %d float32 weights; the fused AdamW kernel "
                 "(official_bert.ops.adam_update) updates those whose gradients come back "
                 "through them, the compiled update the others.", dtype,
                 len(update.copies.copies))
    return update
  update = CopiesUpdate(optimizer, variables, clip_norm, dtype)
  logging.info("The steps read %s copies of the %d float32 weights, which the compiled update "
               "writes.", dtype, len(update.copies.copies))
  return update
