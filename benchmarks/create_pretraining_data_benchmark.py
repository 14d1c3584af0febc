"""Speed and memory of `create_pretraining_data.py` on real text; prints a table.

    python benchmarks/create_pretraining_data_benchmark.py [--repeats 3] [--rows x1]

Rows:

* `gutenberg x1`: the 17 Gutenberg books beside the repository (7.6 MB), `--dupe_factor=1`,
  `--max_seq_length=128`; the original tool takes about 38 s and 700 MB here.
* `gutenberg x10, dupe 10`: the same files listed ten times (76 MB), `--dupe_factor=10`.

Each run is a fresh process, so the time includes Python start-up and the TensorFlow import. CPU is
user + system time of the run's process tree; peak RSS its largest resident set (`ru_maxrss` of
the reaped run, which covers the workers it waited for).
"""

import argparse
import glob
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
ORIGINAL = {"wall_s": 38.0, "rss_mb": 700.0}


def run_tool(inputs, output, dupe_factor, num_workers):
  """Runs the script once; returns (wall s, CPU s, peak RSS in MB, instances written)."""
  command = [sys.executable, str(REPO / "create_pretraining_data.py"), f"--input_file={inputs}",
             f"--output_file={output}",
             f"--vocab_file={DATA / 'vocab' / 'bert-base-uncased-vocab.txt'}",
             "--max_seq_length=128", f"--dupe_factor={dupe_factor}"]
  if num_workers:
    command.append(f"--num_workers={num_workers}")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  with tempfile.TemporaryFile() as log:
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    # wait4 gives the rusage of this run's process tree alone (RUSAGE_CHILDREN would mix runs).
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
  if process.returncode != 0:
    sys.exit(f"create_pretraining_data.py failed:\n{text[-3000:]}")
  instances = int(re.search(r"Wrote (\d+) instances", text).group(1))
  return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, instances


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=3, help="runs per row; the median is shown")
  parser.add_argument("--num_workers", type=int, default=None,
                      help="passed to the script (default: its own choice)")
  parser.add_argument("--rows", choices=["all", "x1", "x10"], default="all",
                      help="which rows to run")
  args = parser.parse_args()
  books = sorted(glob.glob(str(DATA / "corpus" / "gutenberg" / "*.txt")))
  if not books:
    sys.exit(f"{DATA}/corpus/gutenberg is absent: this benchmark needs the shared data.")
  rows = [("gutenberg x1, dupe 1", books, 1), ("gutenberg x10, dupe 10", books * 10, 10)]
  rows = {"all": rows, "x1": rows[:1], "x10": rows[1:]}[args.rows]
  print(f"{'run':<24}{'input MB':>9}{'wall s':>8}{'CPU s':>8}{'MB/s':>7}{'inst/s':>9}"
        f"{'instances':>10}{'peak RSS MB':>12}{'vs original':>12}")
  for name, files, dupe_factor in rows:
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    with tempfile.TemporaryDirectory() as folder:
      runs = [run_tool(",".join(files), os.path.join(folder, "out.tfrecord"), dupe_factor,
                       args.num_workers) for _ in range(args.repeats)]
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    rss = max(r[2] for r in runs)
    instances = runs[0][3]
    # The original's figures are known for the first row only.
    speedup = f"{ORIGINAL['wall_s'] / wall:.1f}x" if files is books else "-"
    print(f"{name:<24}{megabytes:>9.1f}{wall:>8.2f}{cpu:>8.2f}{megabytes / wall:>7.2f}"
          f"{instances / wall:>9.0f}{instances:>10}{rss:>12.0f}{speedup:>12}")
  print(f"original tool, gutenberg x1: {ORIGINAL['wall_s']:.0f} s, {7.6 / ORIGINAL['wall_s']:.2f} "
        f"MB/s, about {ORIGINAL['rss_mb']:.0f} MB (figures from the issue). Walls are medians of "
        f"{args.repeats} runs on {os.cpu_count()} cores; load average at the end "
        f"{os.getloadavg()[0]:.1f} (other processes slow the runs down).")


if __name__ == "__main__":
  main()
