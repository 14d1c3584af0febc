"""Where training runs: one device, several GPUs, several machines or a TPU, as a `tf.distribute`
strategy, and how datasets are split among the strategy's replicas.

The same training code runs under every strategy: the loop calls `strategy.run` on per-replica
batches that `strategy.distribute_datasets_from_function(dataset_fn)` makes, calling `dataset_fn`
once per input pipeline (one per worker) with a `tf.distribute.InputContext`, so that each worker
reads its shard of the files and batches `input_context.get_per_replica_batch_size(global_batch)`
examples.
"""

import json
import os

from absl import logging
import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(distribution_strategy="one_device", num_gpus=0, tpu_address=None,
                 tpu_zone=None, gcp_project=None):
  """Creates a `tf.distribute.Strategy`; call it first, before any other TensorFlow work.

  Args:
    distribution_strategy: `one_device` (the CPU, or the first GPU when `num_gpus` is 1),
      `mirrored` (synchronous data parallelism over `num_gpus` GPUs, or over every logical CPU
      device when `num_gpus` is 0), `multi_worker_mirrored` (the same over the machines listed
      in the `TF_CONFIG` environment variable) or `tpu`.
    num_gpus: GPUs to use.
    tpu_address: the TPU's name or `grpc://` address (for `tpu`); empty or None for a local TPU.
    tpu_zone: GCE zone of a named TPU.
    gcp_project: Cloud project of a named TPU.

  Returns:
    The strategy.

  Example:

  >>> strategy = get_strategy("one_device")
  >>> strategy.num_replicas_in_sync
  1
  """
  if distribution_strategy == "one_device":
    if num_gpus > 1:
      raise ValueError(f"one_device uses at most one GPU, got num_gpus={num_gpus}; use "
                       "distribution_strategy=mirrored for several.")
    strategy = tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
  elif distribution_strategy == "mirrored":
    devices = ([f"/gpu:{i}" for i in range(num_gpus)] if num_gpus
               else [device.name for device in tf.config.list_logical_devices("CPU")])
    strategy = tf.distribute.MirroredStrategy(devices)
  elif distribution_strategy == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise ValueError("multi_worker_mirrored needs the TF_CONFIG environment variable: "
                       '{"cluster": {"worker": ["host1:port", ...]}, '
                       '"task": {"type": "worker", "index": i}} on each machine.')
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  elif distribution_strategy == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu_address or "", zone=tpu_zone, project=gcp_project)
    if tpu_address not in (None, "", "local"):
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
  else:
    raise ValueError(f"Unknown distribution_strategy {distribution_strategy!r}; choose one of "
                     f"{', '.join(STRATEGIES)}.")
  logging.info("Distribution strategy %s with %d replicas.", distribution_strategy,
               strategy.num_replicas_in_sync)
  return strategy


def device_type(strategy):
  """`CPU`, `GPU` or `TPU`: the type of the devices that the strategy's replicas run on.

  Example:

  >>> device_type(tf.distribute.OneDeviceStrategy("/cpu:0"))
  'CPU'
  """
  return tf.DeviceSpec.from_string(strategy.extended.worker_devices[0]).device_type


def is_multi_worker(strategy):
  return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def is_tpu(strategy):
  return isinstance(strategy, tf.distribute.TPUStrategy)


def worker_id(strategy):
  """This machine's `(task_type, task_id)`, `(None, None)` outside multi-worker training."""
  if not is_multi_worker(strategy):
    return None, None
  resolver = strategy.cluster_resolver
  return resolver.task_type, resolver.task_id


def is_chief(strategy):
  """True on the machine that writes checkpoints, summaries and exports.

  That is the `chief` task when `TF_CONFIG` names one, else worker 0, and the only machine outside
  multi-worker training.
  """
  task_type, task_id = worker_id(strategy)
  if task_type is None:
    return True
  return _is_chief_task(task_type, task_id)


def is_chief_before_setup(distribution_strategy):
  """`is_chief` before the strategy exists: from the strategy's name and `TF_CONFIG`."""
  if distribution_strategy != "multi_worker_mirrored":
    return True
  task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
  return _is_chief_task(task.get("type"), task.get("index", 0))


def _is_chief_task(task_type, task_id):
  cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
  if "chief" in cluster:
    return task_type == "chief"
  return task_type == "worker" and task_id == 0
