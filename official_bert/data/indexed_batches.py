"""Batches of in-memory feature arrays, gathered by index, and the input functions over them."""

import tensorflow as tf


def indexed_batches(arrays, num_examples, batch_size, is_training=False, seed=None,
                    drop_remainder=None):
  """A `tf.data.Dataset` of batches of `arrays`, each row an example.

  Gathering whole batches by index keeps one copy of the arrays instead of a shuffle buffer.

  Args:
    arrays: a nested structure of arrays (or tensors) with `num_examples` rows each.
    num_examples: the number of rows.
    batch_size: rows per batch.
    is_training: if True, shuffles (anew each pass) and repeats forever; otherwise one pass in
      row order.
    seed: shuffle seed, for a reproducible order.
    drop_remainder: drop a last, smaller batch; defaults to `is_training`.

  Returns:
    A dataset of batches with the structure of `arrays`.

  Example:

  >>> import numpy as np
  >>> dataset = indexed_batches({"x": np.arange(5)}, 5, batch_size=2)
  >>> [batch["x"].numpy().tolist() for batch in dataset]
  [[0, 1], [2, 3], [4]]
  """
  tensors = tf.nest.map_structure(tf.convert_to_tensor, arrays)
  dataset = tf.data.Dataset.range(num_examples)
  if is_training:
    dataset = dataset.shuffle(num_examples, seed=seed, reshuffle_each_iteration=True).repeat()
  dataset = dataset.batch(batch_size,
                          drop_remainder=is_training if drop_remainder is None else drop_remainder)
  dataset = dataset.map(
      lambda index: tf.nest.map_structure(lambda t: tf.gather(t, index), tensors),
      num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.prefetch(tf.data.AUTOTUNE)


def in_memory_input_fn(make_dataset):
  """An input function (`Task.build_inputs`) over features held in memory.

  Args:
    make_dataset: `make_dataset(batch_size)` -> the whole dataset in batches of `batch_size`.

  Returns:
    `input_fn(batch_size, input_context)`: each input pipeline keeps its own shard of the batches.
  """

  def input_fn(batch_size, input_context):
    dataset = make_dataset(batch_size)
    if input_context.num_input_pipelines > 1:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset

  return input_fn
