"""The pre-training benchmark: its Hugging Face rows (PyTorch steps in a process of their own)
and its rows of the fused element-wise kernels against the compiled programs.

The Hugging Face rows run when this Python has torch and transformers, or with
`BERT_TORCH_PYTHON` set to the Python of an environment that has them; otherwise the run must
say that it left them out.
"""

import os
import pathlib
import re
import sys

import pytest

from testing import run_python

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import hf_bridge  # noqa: E402  (a module of benchmarks/, not of the package)


@pytest.mark.slow
def test_hugging_face_rows_run_or_are_left_out_by_name(tmp_path):
  torch_python = hf_bridge.find_torch_python(os.environ.get("BERT_TORCH_PYTHON"))
  command = [sys.executable, str(BENCHMARKS / "pretraining_throughput.py"), "--configs=smoke",
             "--dtypes=float32,bfloat16", "--variants=hf_eager,hf_compile", "--repeats=1"]
  if torch_python:
    command.append(f"--torch_python={torch_python}")
  env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "TF_CPP_MIN_LOG_LEVEL": "2",
         "BENCHMARK_RESULTS_DIR": str(tmp_path / "results")}
  run = run_python(command, env=env, timeout=900)
  assert run.returncode == 0, run.stderr[-3000:]
  rows = [line.split() for line in run.stdout.splitlines() if line.startswith("smoke ")]
  if not torch_python:
    assert "Hugging Face rows left out: no Python with torch and transformers" in run.stdout
    assert rows == []
    return
  assert sorted((row[3], row[4]) for row in rows) == sorted(
      (dtype, variant) for dtype in ("float32", "bfloat16")
      for variant in ("hf_eager", "hf_compile"))
  for row in rows:
    assert float(row[5]) > 0 and re.fullmatch(r"[\d.]+%", row[7]), row
    # No KerasHub row to compare with; bfloat16 against the same variant's float32 row.
    assert row[8] == "-" and re.fullmatch(r"\d+\.\d\dx", row[9]), row
  assert re.search(r"Hugging Face rows: PyTorch \S+ \(\d+ threads\), transformers \S+",
                   run.stdout)


def test_torch_process_reports_a_failed_peer_with_its_last_words(tmp_path):
  script = tmp_path / "peer.py"
  script.write_text("import sys\nsys.stdin.readline()\nsys.exit('no model here')\n")
  process = hf_bridge.TorchProcess(sys.executable, script)
  with pytest.raises(RuntimeError, match="no model here"):
    process.ask({"config": {}})


@pytest.mark.slow
def test_the_fused_element_wise_kernels_are_timed_against_the_compiled_programs(tmp_path):
  command = [sys.executable, str(BENCHMARKS / "pretraining_throughput.py"), "--configs=smoke",
             "--dtypes=bfloat16", "--variants=ours,ours_compiled_elementwise", "--repeats=1"]
  env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "TF_CPP_MIN_LOG_LEVEL": "2",
         "BENCHMARK_RESULTS_DIR": str(tmp_path / "results")}
  run = run_python(command, env=env, timeout=900)
  assert run.returncode == 0, run.stderr[-3000:]
  rows = [line.split() for line in run.stdout.splitlines() if line.startswith("smoke ")]
  assert sorted(row[4] for row in rows) == ["ours", "ours_compiled_elementwise"]
  for row in rows:
    assert row[3] == "bfloat16" and float(row[5]) > 0 and re.fullmatch(r"[\d.]+%", row[7]), row
    # Neither KerasHub nor float32 was timed: nothing to compare with.
    assert row[8:] == ["-", "-"], row
