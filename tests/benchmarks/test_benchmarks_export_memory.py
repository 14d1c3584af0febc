"""The export memory benchmark end to end on a tiny classifier: one row per export it ran, with
the peak memory of the export's own process, and its results file."""

import os
import pathlib
import sys

import pytest

from testing import run_python

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "export_memory.py"


@pytest.mark.slow
def test_each_export_runs_in_its_own_process_and_is_tabled(tmp_path):
  pytest.importorskip("openvino")
  run = run_python(
      [sys.executable, str(SCRIPT), "--layers=1", "--hidden=32", "--vocab_size=300",
       "--max_seq_length=16", "--exports=saved_model:float32,openvino:int8",
       "--calibration_examples=4"],
      timeout=600, cwd=SCRIPT.parent, env={**os.environ, "BENCHMARK_RESULTS_DIR": str(tmp_path)})
  assert run.returncode == 0, run.stderr[-3000:]
  rows = [[cell.strip() for cell in line.strip("|").split("|")]
          for line in run.stdout.splitlines() if line.startswith("| ") and "---" not in line]
  assert [row[:2] for row in rows[1:]] == [["saved_model", "float32"], ["openvino", "int8"]]
  for _, _, seconds, peak, _ in rows[1:]:
    # A process that imported TensorFlow holds more than 100 MiB.
    assert float(seconds) > 0 and 0.1 < float(peak) < 20
  assert "openvino | int8" in (tmp_path / "export_memory.md").read_text()
