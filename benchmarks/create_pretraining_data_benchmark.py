"""Speed and memory of `create_pretraining_data.py` on real text; prints a table.

    python benchmarks/create_pretraining_data_benchmark.py [--repeats 3] [--rows x1] \
        [--original_dir=/path/to/google-research/bert]

Rows:

* `gutenberg x1`: the 17 Gutenberg books beside the repository (7.6 MB), `--dupe_factor=1`,
  `--max_seq_length=128`.
* `gutenberg x10, dupe 10`: the same files listed ten times (76 MB), `--dupe_factor=10`.
* `original tool, x1`: with `--original_dir`, a checkout of google-research/bert, its
  `create_pretraining_data.py` on the first row's input with the same settings, its runs
  interleaved with ours so that both see the same machine. It is TensorFlow 1 code: it runs here
  with `tensorflow.compat.v1` in place of `tensorflow`, which its calls (`tf.gfile`, `tf.flags`,
  `tf.python_io`, `tf.logging`) all have. It is single-process and holds every instance in memory,
  so the 10x row is ours alone.

Each run is a fresh process, so the wall time includes Python start-up and the TensorFlow import
(both tools import TensorFlow; that alone takes seconds, and more on some CPUs than on others).
`work s` is the time after the import, as each run reports it, and `work vs orig` compares
it. CPU is user + system time of the run's process tree; peak RSS its largest resident set
(`ru_maxrss` of the reaped run, which covers the workers it waited for).
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

from results import recorded

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
# Runs the original script with TensorFlow 1's API under the name `tensorflow`.
_ORIGINAL_LAUNCHER = """
import runpy, sys, time
import tensorflow.compat.v1 as tf
sys.modules["tensorflow"] = tf
script = sys.argv[1]
sys.path.insert(0, script.rsplit("/", 1)[0])
sys.argv = sys.argv[1:]
start = time.monotonic()
try:
  runpy.run_path(script, run_name="__main__")
except SystemExit:  # absl's app.run ends with sys.exit(main(...))
  pass
print(f"Worked for {time.monotonic() - start:.2f} s", flush=True)
"""


def run_tool(inputs, output, dupe_factor, num_workers, original_dir=None):
  """Runs ours (or, given `original_dir`, the original) once.

  Returns:
    (wall s, work s, CPU s, peak RSS in MB, instances written); the work is the time after the
    TensorFlow import, as the run itself reports it.
  """
  flags = [f"--input_file={inputs}", f"--output_file={output}",
           f"--vocab_file={DATA / 'vocab' / 'bert-base-uncased-vocab.txt'}",
           "--max_seq_length=128", f"--dupe_factor={dupe_factor}"]
  if original_dir:
    script = os.path.join(original_dir, "create_pretraining_data.py")
    command = [sys.executable, "-c", _ORIGINAL_LAUNCHER, script, *flags]
  else:
    command = [sys.executable, str(REPO / "create_pretraining_data.py"), *flags]
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
    tool = "the original tool" if original_dir else "create_pretraining_data.py"
    sys.exit(f"{tool} failed:\n{text[-3000:]}")
  # Ours logs "Wrote N instances", the original "Wrote N total instances".
  instances = int(re.search(r"Wrote (\d+) (?:total )?instances", text).group(1))
  # Ours logs "Wrote N instances to ... in X s", timed from the start of its work; the launcher
  # times the original's script after its TensorFlow import.
  work = float(re.search(r"Worked for ([\d.]+) s" if original_dir
                         else r"Wrote \d+ instances to .* in ([\d.]+) s", text).group(1))
  return wall, work, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, instances


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=3, help="runs per row; the median is shown")
  parser.add_argument("--num_workers", type=int, default=None,
                      help="passed to the script (default: its own choice)")
  parser.add_argument("--rows", choices=["all", "x1", "x10"], default="all",
                      help="which rows to run")
  parser.add_argument("--original_dir", default=None,
                      help="a checkout of google-research/bert: adds the original tool's x1 row")
  args = parser.parse_args()
  books = sorted(glob.glob(str(DATA / "corpus" / "gutenberg" / "*.txt")))
  if not books:
    sys.exit(f"{DATA}/corpus/gutenberg is absent: this benchmark needs the shared data.")
  if args.original_dir and not os.path.exists(
      os.path.join(args.original_dir, "create_pretraining_data.py")):
    sys.exit(f"--original_dir={args.original_dir} has no create_pretraining_data.py.")
  rows = [("gutenberg x1, dupe 1", books, 1, False), ("gutenberg x10, dupe 10", books * 10, 10,
                                                       False)]
  rows = {"all": rows, "x1": rows[:1], "x10": rows[1:]}[args.rows]
  if args.original_dir and args.rows != "x10":
    rows.insert(1, ("original tool, x1", books, 1, True))
  print(f"{'run':<24}{'input MB':>9}{'wall s':>8}{'work s':>8}{'CPU s':>8}{'MB/s':>7}"
        f"{'inst/s':>9}{'instances':>10}{'peak RSS MB':>12}{'vs original':>12}{'work vs orig':>13}")
  results = {}
  with tempfile.TemporaryDirectory() as folder:
    # Interleaved repeats: each row's runs are spread over the same stretch of time.
    for _ in range(args.repeats):
      for name, files, dupe_factor, original in rows:
        results.setdefault(name, []).append(run_tool(
            ",".join(files), os.path.join(folder, "out.tfrecord"), dupe_factor, args.num_workers,
            args.original_dir if original else None))
  medians = {name: [statistics.median(r[i] for r in runs) for i in range(3)]
             for name, runs in results.items()}
  original = medians.get("original tool, x1")
  for name, files, _, is_original in rows:
    runs = results[name]
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    wall, work, cpu = medians[name]
    rss = max(r[3] for r in runs)
    instances = runs[0][4]
    same_input = files is books and not is_original and original
    speedup = f"{original[0] / wall:.1f}x" if same_input else "-"
    work_speedup = f"{original[1] / work:.1f}x" if same_input else "-"
    print(f"{name:<24}{megabytes:>9.1f}{wall:>8.2f}{work:>8.2f}{cpu:>8.2f}{megabytes / wall:>7.2f}"
          f"{instances / wall:>9.0f}{instances:>10}{rss:>12.0f}{speedup:>12}{work_speedup:>13}")
  print(f"Walls are medians of {args.repeats} interleaved runs on {os.cpu_count()} cores; load "
        f"average at the end {os.getloadavg()[0]:.1f} (other processes slow the runs down)."
        + ("" if args.original_dir else " --original_dir adds the original tool's row."))

if __name__ == "__main__":
  with recorded("create_pretraining_data_benchmark"):
    main()
