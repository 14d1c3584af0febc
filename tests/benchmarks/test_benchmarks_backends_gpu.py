"""`benchmarks/backends_gpu.py`: TensorFlow writes the job; `--smoke` runs the model on JAX and
PyTorch without TensorFlow, on any device, and prints its table."""

import os
import pathlib
import re
import sys

import pytest

from testing import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "backends_gpu.py")


@pytest.mark.slow
def test_the_backends_benchmark_checks_jax_and_torch_without_tensorflow(tmp_path):
  env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2",
             BENCHMARK_RESULTS_DIR=str(tmp_path / "results"))
  job = tmp_path / "job"
  written = run_python([sys.executable, SCRIPT, f"--write_job={job}", "--smoke"], cwd=ROOT,
                       timeout=300, env=env)
  assert written.returncode == 0, written.stderr[-3000:]
  assert sorted(os.listdir(job)) == ["encoder.weights.h5", "expected.npz", "inputs.npz",
                                     "job.json"]
  result = run_python([sys.executable, SCRIPT, f"--job={job}", "--smoke"], cwd=ROOT, timeout=600,
                      env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  # Each backend's rows come from a process where TensorFlow cannot be imported.
  rows = re.findall(r"^\| ours, Keras on (\w+) \| keras [^|]+ \| ([\d.e+-]+) / ([\d.e+-]+) \| "
                    r"([\d.]+) -> ([\d.]+) \| (\d+) \|", result.stdout, re.MULTILINE)
  assert [row[0] for row in rows] == ["jax", "torch"], result.stdout
  for backend, _, full, first, last, speed in rows:
    assert float(full) < 1e-5, (backend, full)  # float32 agrees with TensorFlow's outputs
    assert float(last) < 0.5 * float(first), (backend, first, last)  # Model.fit learned
    assert int(speed) > 0
  # The peer's row is there, with its speed, or with the reason it did not run (transformers
  # may be absent from the test environment).
  assert re.search(r"^\| Hugging Face BertForPreTraining(, PyTorch eager \| torch .+ \| \d+ \||"
                   r" \| failed: .+)", result.stdout, re.MULTILINE), result.stdout
  assert not (tmp_path / "results").exists()  # a smoke run's figures go to no results file
