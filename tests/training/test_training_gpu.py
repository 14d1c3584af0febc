"""Training on a GPU gives the CPU's result: one GPU and two mirrored replicas on one GPU split in
two logical GPUs, XLA on, dropout on, in float32, bfloat16 and float16.

The `cpu_xla` dropout hashes each element's position, so the CPU and the GPU draw the same masks
from the same seed and their weights can be compared; TensorFloat-32 is turned off so that
float32 products are float32 on both. Skipped when no GPU is visible. Logical GPUs must be
configured before TensorFlow starts, so the runs happen in a subprocess that executes this file.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from testing import (
  finish,
  start_script,
  tiny_pretraining_config,
  train_tiny_pretrainer,
  write_full_records,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not tf.config.list_physical_devices("GPU"),
                       reason="no GPU visible (tf.config.list_physical_devices('GPU') is empty)"),
]
DTYPES = ("float32", "bfloat16", "float16")
VOCAB, DROPOUT = 50, 0.1


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  # One MirroredStrategy per process: two over the same devices share collective keys.
  arrays = {}
  for scenario in ("devices", "mirrored_bfloat16"):
    directory = tmp_path_factory.mktemp(scenario)
    finish(start_script(__file__, [scenario, directory]), timeout=900)
    arrays.update(np.load(directory / "results.npz"))
  return arrays


def test_one_gpu_trains_the_weights_of_the_cpu(results):
  for name in [n for n in results if n.startswith("cpu/float32/weight")]:
    np.testing.assert_allclose(results[name.replace("cpu/", "gpu/")], results[name], rtol=1e-4,
                               atol=1e-5, err_msg=name)
  np.testing.assert_allclose(results["gpu/float32/eval"], results["cpu/float32/eval"], rtol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_on_a_gpu_keeps_to_the_cpu_and_float32(results, dtype):
  assert results[f"gpu/{dtype}/weights_float32"]
  # Half-precision rounding differs between the devices' fusions; the losses agree to 2%.
  np.testing.assert_allclose(results[f"gpu/{dtype}/eval"], results[f"cpu/{dtype}/eval"],
                             rtol=2e-2)
  np.testing.assert_allclose(results[f"gpu/{dtype}/eval"], results["gpu/float32/eval"], rtol=5e-2)


def test_two_logical_gpus_train_the_weights_of_one(results):
  for name in [n for n in results if n.startswith("gpu_no_dropout/weight")]:
    np.testing.assert_allclose(results[name.replace("gpu_no_dropout", "mirrored")],
                               results[name], rtol=1e-4, atol=1e-5, err_msg=name)
  assert results["mirrored_bfloat16/in_sync"] and np.all(
      np.isfinite(results["mirrored_bfloat16/eval"]))


# === The subprocess ===

def _gpu_main(scenario, directory):
  gpu = tf.config.list_physical_devices("GPU")[0]
  tf.config.set_logical_device_configuration(
      gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=4096)] * 2)
  tf.config.experimental.enable_tensor_float_32_execution(False)
  from official_bert import BertPretrainer
  records = write_full_records(os.path.join(directory, "records.tfrecord"), 64, VOCAB)
  initial = BertPretrainer(tiny_pretraining_config(VOCAB)).get_weights()
  arrays = {}

  def train(name, strategy, num_gpus, dropout, dtype):
    _, weights, results, _, trainer = train_tiny_pretrainer(
        strategy, os.path.join(directory, name), records, initial, VOCAB, dropout=dropout,
        dtype=dtype, num_gpus=num_gpus, kernels="cpu_xla", return_trainer=True)
    results.pop("examples")
    arrays.update({f"{name}/weight{i}": w for i, w in enumerate(weights)})
    arrays[f"{name}/eval"] = [results[key] for key in sorted(results)]
    arrays[f"{name}/weights_float32"] = all(v.dtype == "float32" for v in trainer.model.weights)
    copies = [trainer.strategy.experimental_local_results(v.value) for v in trainer.model.weights]
    arrays[f"{name}/in_sync"] = all(np.array_equal(c[0].numpy(), other.numpy())
                                    for c in copies for other in c[1:])

  if scenario == "devices":
    for dtype in DTYPES:
      train(f"cpu/{dtype}", "one_device", 0, DROPOUT, dtype)
      train(f"gpu/{dtype}", "one_device", 1, DROPOUT, dtype)
    train("gpu_no_dropout", "one_device", 1, 0.0, "float32")
    train("mirrored", "mirrored", 2, 0.0, "float32")
  else:
    train("mirrored_bfloat16", "mirrored", 2, DROPOUT, "bfloat16")
  np.savez(os.path.join(directory, "results.npz"), **arrays)


if __name__ == "__main__":
  _gpu_main(sys.argv[1], sys.argv[2])
