"""Checkpoints of a training run: where each worker writes them, what they hold, which one resumes.

A run resumes from the newest checkpoint that can be read. One whose files are damaged (a
truncated `.data` file after a full disk, a lost `.index`) is named in a warning and the one
before it restored instead; when none can be read, the run stops with an error naming the files,
rather than starting again from step 0 over the checkpoints of the interrupted run.
"""

import os

from absl import logging
import tensorflow as tf

from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.training import distribution

CHECKPOINT_NAME = "ckpt"
ITERATOR_KEY = "data_iterator"


class UnreadableCheckpointError(UserError):
  """No checkpoint of a run's folder can be read: the tools say so in one line naming the files."""


def checkpoint_manager(checkpoint, model_dir, strategy, max_to_keep):
  """A `tf.train.CheckpointManager` writing `model_dir/ckpt-<step>`.

  Every worker of a multi-worker run takes part in saving, but only the chief's copy is kept:
  the others write to a temporary folder of their own that `save` removes.
  """
  directory = model_dir
  if not distribution.is_chief(strategy):
    task_type, task_id = distribution.worker_id(strategy)
    directory = os.path.join(model_dir, f".worker-{task_type}-{task_id}")
  return tf.train.CheckpointManager(checkpoint, directory, max_to_keep,
                                    checkpoint_name=CHECKPOINT_NAME)


def save(manager, step, strategy):
  """Saves the checkpoint of `step`; on a full disk, removes what it wrote and says so in one line.

  Raises:
    UserError: the disk (or quota, or file size limit) is full; the checkpoints before are kept.
  """
  try:
    path = manager.save(checkpoint_number=step)
  except (OSError, tf.errors.OpError) as error:
    # TensorFlow writes `ckpt-N_temp/` first and leaves it behind when a write fails.
    prefix = os.path.join(manager.directory, f"{CHECKPOINT_NAME}-{step}")
    for partial in tf.io.gfile.glob(f"{prefix}_temp*"):
      if tf.io.gfile.isdir(partial):
        tf.io.gfile.rmtree(partial)
      else:
        tf.io.gfile.remove(partial)
    file_io.raise_if_disk_full(error, f"saving the checkpoint of step {step} in "
                               f"{manager.directory}")
    raise
  if distribution.is_chief(strategy):
    logging.info("Saved checkpoint %s.", path)
  else:
    tf.io.gfile.rmtree(manager.directory)


def holds_iterator(path):
  """Whether the checkpoint at `path` holds the position of the training input."""
  return any(name.startswith(ITERATOR_KEY) for name, _ in tf.train.list_variables(path))


def restore_newest(checkpoint, model_dir):
  """Restores the newest checkpoint of `model_dir` that can be read.

  Args:
    checkpoint: the `tf.train.Checkpoint` to restore into.
    model_dir: the folder the `CheckpointManager` wrote.

  Returns:
    The prefix of the checkpoint restored, or None when `model_dir` holds none.

  Raises:
    UnreadableCheckpointError: there are checkpoints but none can be read; the message names the
      damaged files.
  """
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    return None
  paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
  problems = []
  for path in reversed(paths):
    try:
      checkpoint.read(path).expect_partial()
    except tf.errors.InvalidArgumentError:
      raise  # shapes or types that do not fit the model: not a damaged file
    except (tf.errors.OpError, IndexError) as error:
      # A truncated `.data` file fails with a bare IndexError("Read less bytes than requested").
      problem = f"{_culprit(path)} ({type(error).__name__}: {_first_line(error)})"
      logging.warning("Checkpoint %s cannot be read: %s; trying the checkpoint before it.",
                      path, problem)
      problems.append(problem)
      continue
    if problems:
      logging.warning("Restored %s, not the newest checkpoint %s, which cannot be read.", path,
                      paths[-1])
    return path
  raise UnreadableCheckpointError(
      f"no checkpoint in {model_dir} can be read, so the run cannot resume: "
      f"{'; '.join(problems)}. Restore the files, or remove them and the file "
      f"{os.path.join(model_dir, 'checkpoint')} to start again from step 0.")


def _culprit(path):
  """The damaged file(s) of an unreadable checkpoint: its index, or else its data files."""
  try:
    tf.train.load_checkpoint(path)
  except tf.errors.OpError:
    return f"{path}.index is damaged or missing"
  data = tf.io.gfile.glob(f"{path}.data-*")
  return (f"{', '.join(sorted(data))} damaged or incomplete" if data
          else f"{path}.data-* missing")


def _first_line(error):
  lines = str(error).strip().splitlines()
  return lines[-1] if lines else "no message"
