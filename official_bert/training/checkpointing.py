"""Checkpoints of a training run: where each worker writes them and what they hold."""

import os

from absl import logging
import tensorflow as tf

from official_bert.training import distribution

CHECKPOINT_NAME = "ckpt"
ITERATOR_KEY = "data_iterator"


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
  path = manager.save(checkpoint_number=step)
  if distribution.is_chief(strategy):
    logging.info("Saved checkpoint %s.", path)
  else:
    tf.io.gfile.rmtree(manager.directory)


def holds_iterator(path):
  """Whether the checkpoint at `path` holds the position of the training input."""
  return any(name.startswith(ITERATOR_KEY) for name, _ in tf.train.list_variables(path))
