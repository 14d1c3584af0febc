"""The README's main command: the demo runs every stage end to end (here on a tiny budget)."""

import os
import re
import subprocess
import sys

import pytest

from testing import REPOSITORY, assert_no_scheme_folders, file_uri


@pytest.mark.slow
def test_demo_runs_every_stage_and_serves_raw_text(tmp_path):
  # A file:// output folder: every stage's paths are then URLs, as on gs://. Two pre-training
  # and three fine-tuning steps: the test checks that every stage runs, not what it learns.
  result = subprocess.run(
      [sys.executable, os.path.join(REPOSITORY, "demo.py"), f"--output_dir={file_uri(tmp_path)}",
       "--num_documents=150", "--vocab_size=600", "--pretraining_steps=2", "--dupe_factor=1",
       "--num_train_epochs=0.05"],
      capture_output=True, text=True, timeout=600, cwd=REPOSITORY)
  assert result.returncode == 0, result.stderr[-3000:]
  output = result.stdout
  for stage in ("1. Build", "2. Create", "3. Pre-train", "4. Fine-tune", "4b. For comparison",
                "Serving"):
    assert f"=== {stage}" in output
  assert "masked_lm_accuracy" in output and "eval_accuracy" in output
  served = [line for line in output.splitlines() if line.startswith("  '") and "-> label" in line]
  assert len(served) == 4
  # Each served line says whether the label is the one its words mean (the model here had two
  # pre-training and three fine-tuning steps, so which it is varies).
  assert all(re.search(r"-> label [01] \(p=[\d.]+, (as meant|meant [01])\)$", line)
             for line in served), served
  assert all(os.path.isdir(tmp_path / name) for name in ("pretraining", "classifier",
                                                         "saved_model"))
  assert os.listdir(tmp_path / "saved_model" / "assets")  # the vocabulary travels with the model
  assert_no_scheme_folders(tmp_path)
