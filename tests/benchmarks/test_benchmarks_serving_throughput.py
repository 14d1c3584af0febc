"""The serving benchmark runs end to end on a tiny model and prints its table.

The Hugging Face rows run when this Python has torch and transformers, or with
`BERT_TORCH_PYTHON` set to the Python of an environment that has them; otherwise they must say
"not installed". Likewise the OpenVINO rows (`--formats=openvino`) when this Python has the
`[openvino]` extra (openvino and nncf, which the export needs); otherwise the run says it left
them out.
"""

import importlib.util
import os
import pathlib
import re
import sys

import pytest

from official_bert.common import cpuinfo
from official_bert.training import accelerators

from testing import run_python

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "serving_throughput.py"
DTYPES = ("float32", "bfloat16")


@pytest.mark.slow
def test_smoke_run_prints_every_cell(tmp_path):
  env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1]), "TF_CPP_MIN_LOG_LEVEL": "2",
         "BENCHMARK_RESULTS_DIR": str(tmp_path / "results")}
  torch_python = os.environ.get("BERT_TORCH_PYTHON")
  # XLA off only: with it on, each cell runs the same lines of the script (only `jit_compile`
  # differs), and compiling doubles the exports and calls; test_export.py serves both. The
  # classifier only, likewise: the encoder's cells run the same lines on another export function.
  command = [sys.executable, str(SCRIPT), "--smoke", "--xla=off", "--kinds=classifier",
             "--formats=openvino"]
  if torch_python:
    command.append(f"--torch_python={torch_python}")
  run = run_python(command, env=env, timeout=1800)
  assert run.returncode == 0, run.stderr[-3000:]
  out = run.stdout
  assert not (tmp_path / "results").exists()  # a smoke run's figures go to no results file
  assert re.search(r"start: load average [\d.]+ on \d+ CPUs", out)
  # The servers run with TensorFlow's default for this CPU, as one started without the variable,
  # whatever the benchmark's own process set (official_bert.cli sets it).
  onednn = "on" if accelerators.onednn_by_default(cpuinfo.flags()) else "off"
  assert f"serving processes: TF_ENABLE_ONEDNN_OPTS unset, oneDNN {onednn};" in out
  assert "the serving process saw TF_ENABLE_ONEDNN_OPTS unset" in out
  rows = [line.split() for line in out.splitlines() if line.startswith("smoke ")]
  # Two dtypes x two signatures x batch 1 and 4.
  saved = [row for row in rows if row[4] == "SavedModel"]
  assert len(saved) == 8
  assert {(row[3], row[5], row[6], row[7]) for row in saved} == {
      ("classifier", dtype, "off", signature) for dtype in DTYPES
      for signature in ("serving_default", "serve_token_ids")}
  for row in saved:
    fields = row[8:]
    # The tokenizer's share closes each raw-text row.
    share = fields.pop() if row[7] == "serving_default" else "0%"
    *latency, rate, gflops, peak = fields
    # The first call (tracing, XLA compilation), then p50 and p99 at batch 1.
    assert len(latency) == (3 if row[2] == "1" else 1)
    assert float(rate) > 0 and float(gflops) > 0
    assert re.fullmatch(r"[\d.]+%", peak) and re.fullmatch(r"\d+%", share)
  keras = [row for row in rows if row[4] == "Keras"]
  assert sorted((row[5], row[2]) for row in keras) == sorted(
      (dtype, batch) for dtype in DTYPES for batch in ("1", "4"))
  torch = [row for row in rows if row[3] == "HF"]
  assert sorted((row[4], row[5], row[2]) for row in torch) == sorted(
      (mode, dtype, batch) for mode in ("eager", "torch.compile") for dtype in DTYPES
      for batch in ("1", "4"))
  installed = bool(torch_python) or all(
      importlib.util.find_spec(name) for name in ("torch", "transformers"))
  for row in torch:
    line = " ".join(row)
    assert ("not installed" in line) != installed, line
    if installed:
      assert float(row[-3]) > 0 and re.fullmatch(r"[\d.]+%", row[-1])
  if installed:
    same = re.search(r"same weights, max \|HF - ours\| ([\d.e+-]+)", out)
    assert same and float(same.group(1)) < 1e-3
  for dtype in DTYPES:
    assert re.search(rf"{dtype} tf.matmul peak in the serving processes: \d+ to \d+ GFLOP/s",
                     out)
  openvino = [row for row in rows if row[4] == "OpenVINO"]
  if all(importlib.util.find_spec(name) for name in ("openvino", "nncf")):
    assert sorted((row[5], row[2]) for row in openvino) == sorted(
        (dtype, batch) for dtype in ("float32", "bfloat16", "int8") for batch in ("1", "4"))
    assert all(float(row[-2]) > 0 for row in openvino)
    assert re.search(r"OpenVINO \S+; the exports took \d+ s \(float32\) and \d+ s \(int8, "
                     r"calibrated\)", out)
  else:
    assert not openvino
    assert re.search(r"OpenVINO rows left out: --format=openvino needs .*official_bert\[openvino\]",
                     out)


def test_the_serving_processes_run_with_the_asked_onednn_setting():
  # In a process of its own (forked: run_python): importing the script defines its flags and sets
  # the environment.
  check = """
import serving_throughput as s
environ = {"TF_ENABLE_ONEDNN_OPTS": "1", "PATH": "/bin"}
assert s.server_environment("default", environ) == {"PATH": "/bin"}
assert s.server_environment("on", {}) == {"TF_ENABLE_ONEDNN_OPTS": "1"}
assert s.server_environment("off", environ) == {"TF_ENABLE_ONEDNN_OPTS": "0", "PATH": "/bin"}
"""
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, SCRIPT.parents[:2]))}
  run = run_python([sys.executable, "-c", check], env=env, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
