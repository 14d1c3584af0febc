"""Data-parallel training, compiled by XLA: two mirrored replicas give the weights of one device
on the same global batch, learn with dropout on (each replica drawing its own masks, with either
kernel backend), and two multi-worker processes train in step with dropout on.

The single device compiles its whole step; each replica compiles its forward and backward pass
(see `Trainer.__init__`). Strategies must be created before TensorFlow starts, so each scenario
runs in a subprocess that executes this file (`python test_training_distribution.py
mirrored|worker ...`).
"""

import concurrent.futures
import json
import os
import socket
import sys

import numpy as np
import pytest

from testing import (
  SEQ,
  make_trainer,
  pretraining_dataset_fn,
  run_script,
  tiny_bert_config,
  tiny_engine,
  train_tiny_pretrainer,
  write_full_records,
)

STEPS, GLOBAL_BATCH, VOCAB = 3, 8, 50
DROPOUT, DROPOUT_STEPS = 0.1, 12


@pytest.mark.slow
def test_two_mirrored_replicas_match_one_device(tmp_path):
  run_script(__file__, ["mirrored", tmp_path])
  results = np.load(tmp_path / "results.npz")
  for name in [n for n in results.files if n.startswith("one_device/weight")]:
    np.testing.assert_allclose(results[name.replace("one_device", "mirrored")], results[name],
                               rtol=1e-4, atol=1e-6, err_msg=name)
  # Evaluation over 13 examples: the last step leaves one replica part of a batch, one none.
  assert results["mirrored/examples"] == results["one_device/examples"] == 13
  np.testing.assert_allclose(results["mirrored/eval"], results["one_device/eval"], rtol=1e-5)
  np.testing.assert_allclose(results["mirrored/predictions"], results["one_device/predictions"],
                             rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["stock", "cpu_xla"])
def test_mirrored_replicas_learn_with_dropout(tmp_path, backend):
  # With dropout the replicas draw their own masks, so only learning is comparable with one
  # device: the loss on the training records falls, and both replicas' copies of every weight
  # stay equal.
  run_script(__file__, ["dropout", tmp_path, backend])
  results = np.load(tmp_path / "results.npz")
  before, after = results["losses"]
  assert after < before - 0.05, (before, after)
  assert results["replicas_in_sync"]
  assert results["replica_masks_differ"]


@pytest.mark.slow
def test_two_workers_train_in_step(tmp_path):
  ports = []
  for _ in range(2):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      ports.append(s.getsockname()[1])
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}

  def worker(index):
    return run_script(__file__, ["worker", tmp_path, index], env={"TF_CONFIG": json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}})})

  # The workers wait for each other, so each runs in a thread of its own; forked by `run_python`
  # (TF_CONFIG is read when used), they skip a new interpreter's imports.
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    outputs = list(pool.map(worker, range(2)))
  weights = [np.load(tmp_path / f"worker{index}.npz") for index in range(2)]
  initial = np.load(tmp_path / "worker0_initial.npz")
  assert weights[0].files == weights[1].files
  for name in weights[0].files:
    np.testing.assert_array_equal(weights[1][name], weights[0][name], err_msg=name)
  assert not np.allclose(weights[0]["arr_0"], initial["arr_0"])  # they trained
  # Only the chief (worker 0) keeps checkpoints; both logged every step of the same run.
  assert os.path.exists(tmp_path / "model" / f"ckpt-{STEPS}.index")
  assert not [name for name in os.listdir(tmp_path / "model") if name.startswith(".worker")]
  assert all(f"step {STEPS}/{STEPS}" in output for output in outputs)


# === The subprocesses ===

def _mirrored_main(directory):
  from official_bert import BertPretrainer
  _split_cpu()
  records = write_full_records(os.path.join(directory, "records.tfrecord"), 64, VOCAB)
  initial = BertPretrainer(_config()).get_weights()
  arrays = {}
  for name in ("one_device", "mirrored"):
    _, weights, results, predictions = train_tiny_pretrainer(
        name, os.path.join(directory, name), records, initial, VOCAB, steps=STEPS,
        global_batch=GLOBAL_BATCH, config=_config())
    arrays.update({f"{name}/weight{i}": w for i, w in enumerate(weights)})
    arrays[f"{name}/examples"] = results.pop("examples")
    arrays[f"{name}/eval"] = [results[key] for key in sorted(results)]
    arrays[f"{name}/predictions"] = predictions
  np.savez(os.path.join(directory, "results.npz"), **arrays)


def _dropout_main(directory, backend):
  # A process of its own: two MirroredStrategy objects over the same devices in one process draw
  # the same collective keys, and their all-reduces then meet each other's.
  _split_cpu()
  records = write_full_records(os.path.join(directory, "records.tfrecord"), 64, VOCAB)
  trainer = make_trainer(directory, _config(DROPOUT), tiny_engine(
      distribution_strategy="mirrored", enable_xla=True, kernels=backend,
      steps_per_loop=DROPOUT_STEPS, log_steps=DROPOUT_STEPS), learning_rate=3e-3,
      num_steps=DROPOUT_STEPS)
  evaluate = pretraining_dataset_fn(records, GLOBAL_BATCH, is_training=False)
  before = trainer.evaluate(evaluate)["loss"]
  trainer.train(pretraining_dataset_fn(records, GLOBAL_BATCH), DROPOUT_STEPS)
  after = trainer.evaluate(evaluate)["loss"]
  # `value` is the Keras variable's `tf.distribute` variable, one copy per replica.
  in_sync = all(np.array_equal(*[copy.numpy() for copy in
                                 trainer.strategy.experimental_local_results(variable.value)])
                for variable in trainer.model.weights)
  np.savez(os.path.join(directory, "results.npz"), losses=[before, after],
           replicas_in_sync=in_sync, replica_masks_differ=_replica_masks_differ(trainer.strategy))


def _replica_masks_differ(strategy):
  """Whether the two replicas of a mirrored Dropout layer draw different masks."""
  import tensorflow as tf

  from official_bert.layers import Dropout
  with strategy.scope():
    layer = Dropout(0.5, seed=3)
  masks = strategy.experimental_local_results(strategy.run(
      tf.function(lambda: layer(tf.ones([64]), training=True))))
  return len(masks) == 2 and not np.array_equal(masks[0], masks[1])


def _split_cpu():
  import tensorflow as tf
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def _worker_main(directory, index):
  records = os.path.join(directory, f"records{index}.tfrecord")
  write_full_records(records, 64, VOCAB)  # the same records on both machines
  # The strategy gives both workers worker 0's initial weights. Only training is compared: no
  # evaluation or prediction to compile.
  trainer = make_trainer(os.path.join(directory, "model"), _config(DROPOUT), tiny_engine(
      distribution_strategy="multi_worker_mirrored", log_steps=1, enable_xla=True))
  np.savez(os.path.join(directory, f"worker{index}_initial.npz"), *trainer.model.get_weights())
  trainer.train(pretraining_dataset_fn(records, GLOBAL_BATCH), STEPS)
  np.savez(os.path.join(directory, f"worker{index}.npz"), *trainer.model.get_weights())


def _config(dropout=0.0):
  """The pre-trainer of these runs: one layer (a second only makes each program slower to
  compile; what is compared, replicas against one device, is the same)."""
  return tiny_bert_config(VOCAB, hidden_size=32, num_hidden_layers=1,
                          max_position_embeddings=SEQ, dropout=dropout)



if __name__ == "__main__":
  from absl import logging
  logging.set_verbosity(logging.INFO)
  logging.use_python_logging()
  if sys.argv[1] == "mirrored":
    _mirrored_main(sys.argv[2])
  elif sys.argv[1] == "dropout":
    _dropout_main(sys.argv[2], sys.argv[3])
  else:
    _worker_main(sys.argv[2], int(sys.argv[3]))
