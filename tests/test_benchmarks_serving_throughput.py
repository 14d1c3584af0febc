"""The serving benchmark runs end to end on a tiny model and prints its table."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "serving_throughput.py"


@pytest.mark.slow
def test_smoke_run_prints_every_cell():
  env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1]), "TF_CPP_MIN_LOG_LEVEL": "2"}
  run = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], env=env, capture_output=True,
                       text=True, timeout=600, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  out = run.stdout
  assert re.search(r"start: load average [\d.]+ on \d+ CPUs", out)
  rows = [line.split() for line in out.splitlines() if line.startswith("smoke ")]
  # Two models x two signatures x XLA off/on x batch 1 and 4, the Keras model, Hugging Face.
  saved = [row for row in rows if row[4] == "SavedModel"]
  assert len(saved) == 16
  assert {(row[3], row[5], row[6]) for row in saved} == {
      (kind, xla, signature) for kind in ("classifier", "encoder") for xla in ("on", "off")
      for signature in ("serving_default", "serve_token_ids")}
  for row in saved:
    fields = row[7:]
    # The tokenizer's share closes each raw-text row.
    share = fields.pop() if row[6] == "serving_default" else "0%"
    *latency, rate, gflops, peak = fields
    # The first call (tracing, XLA compilation), then p50 and p99 at batch 1.
    assert len(latency) == (3 if row[2] == "1" else 1)
    assert float(rate) > 0 and float(gflops) > 0
    assert re.fullmatch(r"[\d.]+%", peak) and re.fullmatch(r"\d+%", share)
  keras = [row for row in rows if row[4] == "Keras"]
  assert [row[2] for row in keras] == ["1", "4"]
  torch = [" ".join(row) for row in rows if row[3] == "HF"]
  assert len(torch) == 2
  installed = all(importlib.util.find_spec(name) for name in ("torch", "transformers"))
  assert all(("not installed" in line) != installed for line in torch)
  assert re.search(r"float32 matmul peak in the serving processes: \d+ to \d+ GFLOP/s", out)
