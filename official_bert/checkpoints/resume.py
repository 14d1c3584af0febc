"""Resuming from the checkpoints in a run's output folder: this package's own or the original's.

A run resumes from the newest checkpoint that the output folder's `checkpoint` state file names.
Two layouts are recognised:

* this package's own: the object-based `ckpt-<step>` that `official_bert.training.Trainer`
  writes (model, optimizer, step, random state, input position), read by the trainer;
* the original google-research/bert's: the name-based `model.ckpt-<step>` that its Estimator
  wrote, with `bert/...` variables, the head of the script (`tf1.py` names them), `global_step`
  and the Adam moments `<name>/adam_m`, `<name>/adam_v`. Its weights and step are loaded by name;
  its moments go into the optimizer's when the optimizer is the original's
  (`AdamWeightDecay`, optimizer type `adamw`) and every moment found fits, else the
  optimizer starts with fresh moments (logged).

Anything else is an error naming the folder and what was found, never a silent fresh start.
"""

import os

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.checkpoints import tf1
from official_bert.training.adam_weight_decay import AdamWeightDecay

OWN, ORIGINAL = "own", "original"
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
_SLOTS = ("/adam_m", "/adam_v")
_LISTED = 10


def checkpoint_layout(prefix):
  """Returns `OWN` or `ORIGINAL`, the layout of a training checkpoint.

  Args:
    prefix: a checkpoint prefix, e.g. `output_dir/model.ckpt-343`.

  Raises:
    ValueError: the checkpoint is in neither layout; the message names its folder and
      variables.
  """
  names = sorted(name for name, _ in tf.train.list_variables(prefix))
  if _OBJECT_GRAPH in names:
    return OWN
  if any(name.startswith(tf1.ENCODER_SCOPE) for name in names):
    return ORIGINAL
  shown = ", ".join(names[:_LISTED]) + (f", ... ({len(names)} in all)"
                                        if len(names) > _LISTED else "")
  raise ValueError(
      f"{os.path.dirname(prefix) or '.'} holds the checkpoint {prefix}, which is neither this "
      f"package's (an object-based ckpt-<step> written by training) nor the original BERT's "
      f"(bert/... variables); it has {shown or 'no variables'}. Move it away or choose another "
      "output_dir.")


def restore_original(model, optimizer, prefix):
  """Loads an original training checkpoint into a model (and optimizer) to resume from it.

  Args:
    model: a `BertEncoder`, `BertPretrainer` or a task model whose head the original has
      (`tf1.names_whole_model`); every variable must be in the checkpoint.
    optimizer: the run's optimizer (its moments and iteration count are set), or None for a run
      that does not train.
    prefix: the checkpoint prefix.

  Returns:
    The checkpoint's `global_step`.

  Raises:
    ValueError: the original has no names for the model's head, the checkpoint lacks
      `global_step` or does not fit the model.
  """
  if not tf1.names_whole_model(model):
    raise ValueError(f"{prefix} is an original BERT checkpoint, but the original code has no "
                     f"variable names for the head of a {type(model).__name__}, so this run "
                     "cannot resume from it; pass it as init_checkpoint instead (the encoder).")
  reader = tf.train.load_checkpoint(prefix)
  if not reader.has_tensor("global_step"):
    raise ValueError(f"{prefix} has no global_step: it is no training checkpoint. Pass it as "
                     "init_checkpoint instead.")
  step = int(reader.get_tensor("global_step"))
  tf1.set_original_weights(model, tf1.read_tf1_checkpoint(prefix), source=prefix)
  head = tf1.head_names(model)
  logging.info("Resumed the encoder%s and global_step %d from the original checkpoint %s.",
               f" and the head ({', '.join(head)})" if head else "", step, prefix)
  if optimizer is not None:
    optimizer.iterations.assign(step)
    _restore_moments(model, optimizer, reader, prefix)
  return step


def _restore_moments(model, optimizer, reader, prefix):
  """Copies the original's Adam moments into the optimizer where they map one to one."""
  inner = getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer
  if not isinstance(inner, AdamWeightDecay):
    logging.info("The %s optimizer has no moments like the original's Adam: it starts with "
                 "fresh ones, not those of %s.", type(inner).__name__, prefix)
    return
  shapes = reader.get_variable_to_shape_map()
  loaded, absent, misfits = [], [], []
  for entry in tf1.original_entries(model):
    if not entry.variable.trainable:
      continue
    slots = [entry.for_slot(slot, suffix)
             for slot, suffix in zip(inner.slots(entry.variable), _SLOTS)]
    wanted = {name: shape for slot in slots for name, shape in slot.original_shapes().items()}
    found = [name for name in wanted if name in shapes]
    if not found:
      # The original creates no moments for variables without a gradient (the pooler of SQuAD):
      # zero moments are what it would have started with.
      absent.append(entry)
    elif len(found) < len(wanted) or any(tuple(shapes[name]) != tuple(shape)
                                         for name, shape in wanted.items()):
      misfits.append(entry.names[0])
    else:
      loaded.append(slots)
  if misfits:
    logging.info("The Adam moments of %s do not map onto the optimizer's (%s, ...): the "
                 "optimizer starts with fresh moments.", prefix, ", ".join(misfits[:3]))
    return
  for slots in loaded:
    for slot in slots:
      slot.assign({name: reader.get_tensor(name) for name in slot.names})
  for entry in absent:
    for slot in inner.slots(entry.variable):
      slot.assign(np.zeros(slot.shape, slot.dtype))
  logging.info("Loaded the Adam moments (adam_m, adam_v) of %d variables from %s%s.",
               len(loaded), prefix,
               f"; {len(absent)} variables have none there and start at zero" if absent else "")


def original_restore_fn(model, optimizer=None):
  """The `restore_fn` of a `Trainer`: reads original checkpoints, refuses unknown ones.

  Args:
    model: the run's model (see `restore_original`).
    optimizer: the run's optimizer, or None.

  Returns:
    `restore_fn(prefix)`: None for this package's own checkpoints (the trainer reads them), the
    step after loading an original one, and a `ValueError` for any other.
  """

  def restore_fn(prefix):
    try:
      layout = checkpoint_layout(prefix)
    except tf.errors.OpError:
      return None  # an unreadable index: the trainer falls back to an older checkpoint
    if layout == OWN:
      return None
    return restore_original(model, optimizer, prefix)

  return restore_fn
