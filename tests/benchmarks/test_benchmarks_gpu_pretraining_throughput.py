"""`benchmarks/gpu_pretraining_throughput.py --smoke` runs on any device and prints its table."""

import os
import pathlib
import re
import sys

import pytest

from testing import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_benchmark_prints_every_workload_in_its_smoke_setting(tmp_path):
  result = run_python(
      [sys.executable, str(ROOT / "benchmarks" / "gpu_pretraining_throughput.py"), "--smoke",
       "--nokerashub"], cwd=ROOT, timeout=600,
      env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2",
               BENCHMARK_RESULTS_DIR=str(tmp_path / "results")))
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r"bfloat16 matmul peak [\d.]+ TFLOP/s", result.stdout), result.stdout
  rows = re.findall(r"^smoke L1/H64\s+(.+?)\s+ours\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%$",
                    result.stdout, re.MULTILINE)
  assert [workload for workload, *_ in rows] == [
      "pretrain seq 16", "squad seq 24", "inference seq 16"], result.stdout
  assert all(float(speed) > 0 for _, speed, _, _ in rows)
  assert not (tmp_path / "results").exists()  # a smoke run's figures go to no results file
