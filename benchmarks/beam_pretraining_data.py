"""The Beam path of `create_pretraining_data.py` on the DirectRunner beside the local path; a table.

    python benchmarks/beam_pretraining_data.py [--workers 2] [--rows x1]

Needs the `beam` extra (`pip install -e ".[beam]"`) and the shared data (`--data`). Rows, each
a fresh run of the script on the 17 Gutenberg books of the shared data (7.6 MB),
`--dupe_factor=1`, `--max_seq_length=128`:

* `x1`: the books once; `x10`: the books listed ten times (ten times the text and the work);
* `local`: the default path with `--num_workers=W`; `beam`: `--runner=DirectRunner
  --direct_running_mode=multi_processing --direct_num_workers=W`.

Memory is sampled every 0.1 s from `/proc` (`VmHWM`, each process's own peak resident set) for
the script's process and every process under it. `main MB` is the script's process: for the local
path it works on shards too, for Beam it is the runner, which also holds the data that passes
between the pipeline's steps (on Dataflow that is the service's). `worker MB` is the largest peak
among the worker processes. The last column checks that both paths wrote the same set of records.
"""

import argparse
import glob
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from results import recorded
import tensorflow as tf

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
_SAMPLE_S = 0.1


def _children(pid):
  """The ids of all processes under `pid`."""
  found, todo = [], [pid]
  while todo:
    parent = todo.pop()
    try:
      tasks = os.listdir(f"/proc/{parent}/task")
    except FileNotFoundError:
      continue
    for task in tasks:
      try:
        with open(f"/proc/{parent}/task/{task}/children") as f:
          kids = [int(k) for k in f.read().split()]
      except FileNotFoundError:
        continue
      found.extend(kids)
      todo.extend(kids)
  return found


def _peak_mb(pid):
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) / 1024
  except (FileNotFoundError, ProcessLookupError):
    pass
  return 0.0


def run_tool(files, output, vocab, workers, beam):
  """Runs the script once; returns (wall s, CPU s, main peak MB, worker peak MB)."""
  command = [sys.executable, str(REPO / "create_pretraining_data.py"),
             f"--input_file={','.join(files)}", f"--output_file={output}",
             f"--vocab_file={vocab}",
             "--max_seq_length=128", "--dupe_factor=1"]
  if beam:
    command += ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
                f"--direct_num_workers={workers}"]
  else:
    command.append(f"--num_workers={workers}")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  peaks = {}
  with tempfile.TemporaryFile() as log:
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    while True:
      for pid in [process.pid, *_children(process.pid)]:
        peaks[pid] = max(peaks.get(pid, 0.0), _peak_mb(pid))
      reaped, status, usage = os.wait4(process.pid, os.WNOHANG)
      if reaped:
        break
      time.sleep(_SAMPLE_S)
    wall = time.perf_counter() - start
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
  if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"create_pretraining_data.py failed:\n{text[-3000:]}")
  main_mb = peaks.pop(process.pid)
  return wall, usage.ru_utime + usage.ru_stime, main_mb, max(peaks.values(), default=0.0)


def record_digest(pattern):
  """A digest of the set of records in the files matching `pattern`, and their number."""
  records = sorted(r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(pattern))))
  return hashlib.sha256(b"".join(records)).hexdigest()[:12], len(records)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workers", type=int, default=2, help="processes for either path")
  parser.add_argument("--rows", choices=["all", "x1", "x10"], default="all")
  parser.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder")
  args = parser.parse_args()
  data = pathlib.Path(args.data)
  books = sorted(glob.glob(str(data / "corpus" / "gutenberg" / "*.txt")))
  if not books:
    sys.exit(f"{data}/corpus/gutenberg is absent: this benchmark needs the shared data.")
  vocab = data / "vocab" / "bert-base-uncased-vocab.txt"
  scales = {"all": [1, 10], "x1": [1], "x10": [10]}[args.rows]
  print(f"{'run':<16}{'input MB':>9}{'wall s':>8}{'CPU s':>8}{'MB/s':>7}{'inst/s':>8}"
        f"{'instances':>10}{'main MB':>9}{'worker MB':>10}{'same set':>9}")
  for scale in scales:
    files = books * scale
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    digests = {}
    with tempfile.TemporaryDirectory() as folder:
      for beam in (False, True):
        output = os.path.join(folder, "beam" if beam else "local", "train.tfrecord")
        wall, cpu, main_mb, worker_mb = run_tool(files, output, vocab, args.workers, beam)
        digest, instances = record_digest(output + ("-*-of-*" if beam else ""))
        digests[beam] = digest
        same = "-" if not beam else ("yes" if digests[False] == digest else "NO")
        name = f"{'beam' if beam else 'local'} x{scale}"
        print(f"{name:<16}{megabytes:>9.1f}{wall:>8.1f}{cpu:>8.1f}{megabytes / wall:>7.2f}"
              f"{instances / wall:>8.0f}{instances:>10}{main_mb:>9.0f}{worker_mb:>10.0f}"
              f"{same:>9}", flush=True)
  print(f"{args.workers} processes per path, {os.cpu_count()} cores, dupe_factor 1, "
        f"max_seq_length 128; load average at the end {os.getloadavg()[0]:.1f}.")


if __name__ == "__main__":
  with recorded("beam_pretraining_data"):
    main()
