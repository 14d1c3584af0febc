"""The pre-training convergence benchmark end to end, on a tiny model and a generated corpus: its
tables' rows and numbers, and a Hugging Face row that starts from ours' weights.

The Hugging Face row runs when this Python has torch and transformers, or with
`BERT_TORCH_PYTHON` set to the Python of an environment that has them; otherwise the run must say
that it left the row out.
"""

import json
import math
import os
import pathlib
import re
import sys

import pytest

from official_bert.data import synthetic

from testing import run_python, write_synthetic_corpus

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import hf_bridge  # noqa: E402  (a module of benchmarks/, not of the package)

STEPS, EVAL_EVERY = 8, 4


def _table(lines, first_cell):
  """The body rows of the markdown table whose header starts with `first_cell`, as cells."""
  start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
  rows = []
  for line in lines[start + 2:]:
    if not line.startswith("|"):
      break
    rows.append([cell.strip() for cell in line.strip("|").split("|")])
  return rows


@pytest.mark.slow
def test_a_tiny_run_tables_every_row_with_sane_numbers(tmp_path):
  torch_python = hf_bridge.find_torch_python(os.environ.get("BERT_TORCH_PYTHON"))
  corpus, vocab, _ = write_synthetic_corpus(str(tmp_path), num_documents=80)
  held_out = tmp_path / "held_out.txt"
  synthetic.write_pretraining_corpus(str(held_out), num_documents=20, seed=5)
  work_dir, results = tmp_path / "work", tmp_path / "results.md"
  # Without XLA: the tiny model's compilation would take most of the test's time.
  command = [sys.executable, str(BENCHMARKS / "pretraining_convergence.py"),
             "--rows=ours_float32,hf_float32", "--enable_xla=false",
             f"--train_input={corpus}", f"--eval_input={held_out}", f"--vocab_file={vocab}",
             f"--work_dir={work_dir}", f"--results_file={results}", "--num_layers=2",
             "--hidden_size=32", "--num_heads=2", "--intermediate_size=64",
             f"--train_steps={STEPS}", f"--eval_every={EVAL_EVERY}", "--batch_size=8",
             "--max_seq_length=32", "--max_predictions_per_seq=5", "--eval_batches=2",
             "--dupe_factor=2", "--learning_rate=5e-3"]
  if torch_python:
    command.append(f"--torch_python={torch_python}")
  env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "TF_CPP_MIN_LOG_LEVEL": "2",
         "BENCHMARK_RESULTS_DIR": str(tmp_path / "generated")}
  run = run_python(command, env=env, timeout=900)
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.splitlines()
  expected = [["ours", "float32"]] + ([["Hugging Face", "float32"]] if torch_python else [])
  if not torch_python:
    assert "Row hf_float32 left out: no Python with torch and transformers" in run.stdout
  assert re.search(r"Pre-training convergence, \d{4}-\d\d-\d\d, .*flags: ", run.stdout)
  target = float(re.search(r"Target: held-out masked-LM accuracy ([\d.]+)", run.stdout)[1])

  rows = _table(lines, "implementation")
  assert [row[:2] for row in rows] == expected
  for row in rows:
    steps, seconds, per_step = int(row[2]), float(row[3]), float(row[4])
    mlm_accuracy, mlm_loss, nsp_accuracy, nsp_loss = map(float, row[5:9])
    assert steps == STEPS and seconds > 0 and 0 < per_step < seconds, row
    assert 0 <= mlm_accuracy <= 1 and 0 <= nsp_accuracy <= 1, row
    assert 0 < mlm_loss < 10 and 0 < nsp_loss < 10, row
    # The default target is 90% of the lowest final accuracy: every row reaches it.
    assert mlm_accuracy >= target > 0, row
    assert int(row[9]) in (EVAL_EVERY, STEPS) and 0 < float(row[10]) <= seconds, row

  curves = _table(lines, "step")
  assert [int(row[0]) for row in curves] == [0, EVAL_EVERY, STEPS]
  for row in curves:
    assert len(row) == 1 + len(expected)
    for cell in row[1:]:
      accuracy, seconds = re.fullmatch(r"([\d.]+) \((\d+) s\)", cell).groups()
      assert 0 <= float(accuracy) <= 1 and int(seconds) >= 0, cell
  assert results.read_text(encoding="utf-8").splitlines() == lines[lines.index(
      next(line for line in lines if line.startswith("Pre-training convergence"))):]
  # The generated results file holds the same tables, under its header.
  generated = (tmp_path / "generated" / "pretraining_convergence.md").read_text(encoding="utf-8")
  assert generated.startswith("# Results of `benchmarks/pretraining_convergence.py`")
  assert results.read_text(encoding="utf-8").strip() in generated

  # The records are cached: a second run would read them (the name covers the options).
  assert len(list(work_dir.glob("train-*.tfrecord"))) == 1
  if torch_python:
    saved = json.loads((work_dir / "last_run.json").read_text(encoding="utf-8"))["curves"]
    ours, hf = saved["ours_float32"], saved["hf_float32"]
    # The same initial weights scored on the same held-out batches (no dropout there).
    for name, value in ours[0][2].items():
      assert math.isclose(value, hf[0][2][name], rel_tol=1e-4, abs_tol=1e-4), name
    # The same batches and recipe: only the dropout masks differ.
    assert math.isclose(ours[-1][2]["masked_lm_loss"], hf[-1][2]["masked_lm_loss"],
                        rel_tol=0.05)
