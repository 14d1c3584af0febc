"""Data-parallel training: two mirrored replicas and two multi-worker processes give the weights of
one device on the same global batch.

With `enable_xla` the single device compiles its step while the replicas run theirs as TensorFlow
graphs (the Trainer compiles only a single replica's step). Strategies must be created before
TensorFlow starts, so each scenario runs in a subprocess that executes this file
(`python test_distributed_training.py mirrored|worker ...`).
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, GLOBAL_BATCH, VOCAB = 3, 8, 50


def _run(args, env=None):
  return subprocess.Popen([sys.executable, __file__, *map(str, args)], cwd=HERE,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(process, timeout=240):
  output, _ = process.communicate(timeout=timeout)
  assert process.returncode == 0, output[-5000:]
  return output


@pytest.mark.slow
def test_two_mirrored_replicas_match_one_device(tmp_path):
  _finish(_run(["mirrored", tmp_path]))
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
def test_two_workers_train_in_step(tmp_path):
  ports = []
  for _ in range(2):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      ports.append(s.getsockname()[1])
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  workers = [_run(["worker", tmp_path, index], env={"TF_CONFIG": json.dumps(
      {"cluster": cluster, "task": {"type": "worker", "index": index}})}) for index in range(2)]
  outputs = [_finish(worker) for worker in workers]
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

def _train(strategy_name, directory, records, initial, **engine_kwargs):
  """Trains STEPS steps from `initial` (None: the strategy's own initialisation).

  Returns:
    (initial weights, trained weights, eval results, NSP predictions).
  """
  from test_training_loop import dataset_fn, engine, make_trainer, tiny_config
  trainer = make_trainer(directory, tiny_config(VOCAB), engine(
      distribution_strategy=strategy_name, log_steps=1, **engine_kwargs), initial_weights=initial)
  initial = trainer.model.get_weights()
  trainer.train(dataset_fn(records, GLOBAL_BATCH), STEPS)
  eval_fn = dataset_fn(records, GLOBAL_BATCH, is_training=False)
  results = trainer.evaluate(lambda context: eval_fn(context).unbatch().take(13).batch(
      context.get_per_replica_batch_size(GLOBAL_BATCH) if context else GLOBAL_BATCH))
  predictions = trainer.predict(eval_fn)["next_sentence_logits"]
  return initial, trainer.model.get_weights(), results, predictions


def _mirrored_main(directory):
  import tensorflow as tf
  from test_training_loop import tiny_config, write_full_records

  from official_bert import BertPretrainer
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  records = write_full_records(os.path.join(directory, "records.tfrecord"), 64, VOCAB)
  initial = BertPretrainer(tiny_config(VOCAB)).get_weights()
  arrays = {}
  for name in ("one_device", "mirrored"):
    # XLA on: one device compiles its whole step; the Trainer runs the two replicas' steps as
    # graphs (see `Trainer.__init__`), and both must give the same weights.
    _, weights, results, predictions = _train(name, os.path.join(directory, name), records, initial,
                                           enable_xla=True)
    arrays.update({f"{name}/weight{i}": w for i, w in enumerate(weights)})
    arrays[f"{name}/examples"] = results.pop("examples")
    arrays[f"{name}/eval"] = [results[key] for key in sorted(results)]
    arrays[f"{name}/predictions"] = predictions
  np.savez(os.path.join(directory, "results.npz"), **arrays)


def _worker_main(directory, index):
  from test_training_loop import write_full_records
  records = os.path.join(directory, f"records{index}.tfrecord")
  write_full_records(records, 64, VOCAB)  # the same records on both machines
  # The strategy gives both workers worker 0's initial weights.
  initial, weights, _, _ = _train("multi_worker_mirrored", os.path.join(directory, "model"),
                                  records, initial=None)
  np.savez(os.path.join(directory, f"worker{index}_initial.npz"), *initial)
  np.savez(os.path.join(directory, f"worker{index}.npz"), *weights)


if __name__ == "__main__":
  sys.path.insert(0, HERE)
  from absl import logging
  logging.set_verbosity(logging.INFO)
  logging.use_python_logging()
  if sys.argv[1] == "mirrored":
    _mirrored_main(sys.argv[2])
  else:
    _worker_main(sys.argv[2], int(sys.argv[3]))
