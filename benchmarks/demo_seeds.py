"""The demo over several seeds: does pre-training help in every run, and by how much?

    python benchmarks/demo_seeds.py                    # seeds 0 to 4, the README's defaults
    python benchmarks/demo_seeds.py --seeds=0,1 --output_dir=/tmp/demo_seeds

Runs `demo.py` with its defaults once per seed, as `python3 dev.py demo --seed=N` would: the
first run makes the corpus, vocabulary and pre-training records, the later ones reuse them
(`--reuse_data`; the data do not depend on the seed). For each seed it prints the dev accuracy of
the classifier fine-tuned from the pre-trained tiny BERT, the same fine-tuning from random
weights, the gain, and how many of the four raw-text requests the exported SavedModel served with
the label their words mean. `tests/test_demo.py` checks the README's own run (seed 0) in the
suite; this script measures how the result holds across seeds.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app, flags
from results import recording

FLAGS = flags.FLAGS

DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo.py")
PRETRAINED = "Fine-tuned from the pre-trained tiny BERT"
RANDOM = "Fine-tuned from random weights"


def summary(output):
  """The figures of one demo run, from what it printed.

  Args:
    output: the demo's standard output.

  Returns:
    A dict: `pretrained` and `random` (dev accuracies), `served` (requests served as meant) and
    `requests` (requests served).

  Raises:
    ValueError: the output lacks one of them (the run did not finish).
  """
  found = {}
  for key, pattern in {"pretrained": rf"^{re.escape(PRETRAINED)}[^:\n]*: eval_accuracy ([\d.]+)",
                       "random": rf"^{re.escape(RANDOM)}[^:\n]*: eval_accuracy ([\d.]+)",
                       "served": r"^Served as meant: (\d+) of (\d+)\.$"}.items():
    match = re.search(pattern, output, re.MULTILINE)
    if not match:
      raise ValueError(f"The demo's output has no line matching {pattern!r}.")
    found[key] = match.groups()
  return {"pretrained": float(found["pretrained"][0]), "random": float(found["random"][0]),
          "served": int(found["served"][0]), "requests": int(found["served"][1])}


def table(rows):
  """The printed table of `(seed, summary, seconds)` rows, with the smallest gain below it."""
  lines = [f"{'seed':>4}  {'from pre-trained':>16}  {'from random':>11}  {'gain':>6}  "
           f"{'served as meant':>15}  {'s':>5}"]
  for seed, row, seconds in rows:
    lines.append(f"{seed:>4}  {row['pretrained']:16.4f}  {row['random']:11.4f}  "
                 f"{row['pretrained'] - row['random']:+6.3f}  "
                 f"{row['served']:>10} of {row['requests']}  {seconds:5.0f}")
  gains = [row["pretrained"] - row["random"] for _, row, _ in rows]
  lines.append(f"\nPre-training helped in {sum(gain > 0 for gain in gains)} of {len(rows)} runs; "
               f"the smallest gain {min(gains):+.3f}.")
  return "\n".join(lines)


def main(argv):
  del argv
  with tempfile.TemporaryDirectory(prefix="demo_seeds-") as scratch:
    output_dir = FLAGS.output_dir or scratch
    rows = []
    for i, seed in enumerate(FLAGS.seeds):
      command = [sys.executable, DEMO, f"--output_dir={output_dir}", f"--seed={seed}"]
      started = time.time()
      run = subprocess.run(command + (["--reuse_data"] if i else []), capture_output=True,
                           text=True, check=False)
      if run.returncode:
        sys.exit(f"The demo failed for seed {seed}:\n{run.stderr[-3000:]}")
      rows.append((seed, summary(run.stdout), time.time() - started))
      print(f"seed {seed} done in {rows[-1][2]:.0f} s", flush=True)
  print()
  print(table(rows))


if __name__ == "__main__":
  # Defined here, not on import: `tests/test_demo.py` imports `summary` beside other flags.
  flags.DEFINE_list("seeds", ["0", "1", "2", "3", "4"], "Seeds of the demo's training runs.")
  flags.DEFINE_string("output_dir", None,
                      "Where the demo runs write (kept); default: a temporary folder, removed.")
  app.run(recording("demo_seeds", main))
