"""What an export needs of a machine: the peak memory and time of `export_saved_model.py`.

A BERT classifier of the chosen size, with random weights, is saved as a model folder; then
`export_saved_model.py` exports it once per `--exports` entry (`format:precision`), each in a
process of its own, as a user runs it. The table gives each export's wall time and the peak
resident memory of its process (the kernel's `ru_maxrss`, read with `os.wait4`), beside the size
of what it wrote. The OpenVINO int8 export calibrates on `--calibration_examples` lines of text.

    python benchmarks/export_memory.py                  # BERT-Base, sequence 128
    python benchmarks/export_memory.py --layers=2 --hidden=128 --exports=openvino:float32
"""

import argparse
import dataclasses
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=wrong-import-position
from results import recorded
import tensorflow as tf
from throughput import bert_config

from official_bert import BertClassifier
from official_bert.checkpoints import save_model_dir

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "export_saved_model.py"
_WORDS = "the cat sat on a mat while it rained over the old city and nobody saw".split()


def _size(path):
  path = pathlib.Path(path)
  if path.is_file():
    return path.stat().st_size
  return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _vocab(path, size):
  """A vocabulary of `size` entries that holds the calibration text's words."""
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(_WORDS)]
  tokens += [f"w{i}" for i in range(size - len(tokens))]
  path.write_text("\n".join(tokens) + "\n")


def _export(model_dir, target, fmt, precision, calibration):
  """Runs the script; returns `(seconds, peak resident bytes)`."""
  command = [sys.executable, str(SCRIPT), f"--model_dir={model_dir}", f"--export_dir={target}",
             f"--format={fmt}", f"--precision={precision}"]
  if (fmt, precision) == ("openvino", "int8"):
    command.append(f"--calibration_file={calibration}")
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  _, status, usage = os.wait4(process.pid, 0)
  seconds = time.perf_counter() - start
  stderr = process.stderr.read().decode(errors="replace")
  process.stderr.close()
  if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"{fmt}:{precision} failed ({os.waitstatus_to_exitcode(status)}):\n{stderr[-3000:]}")
  return seconds, usage.ru_maxrss * 1024  # Linux gives kilobytes


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--layers", type=int, default=12)
  parser.add_argument("--hidden", type=int, default=768)
  parser.add_argument("--vocab_size", type=int, default=30522)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--exports", default="saved_model:float32,onnx:float32,openvino:float32,"
                      "openvino:int8", help="comma-separated format:precision")
  parser.add_argument("--calibration_examples", type=int, default=300)
  args = parser.parse_args()
  config = dataclasses.replace(bert_config(args.layers, args.hidden), vocab_size=args.vocab_size)
  rows = []
  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    model = BertClassifier(config, num_classes=2)
    model({name: tf.ones((1, 8), tf.int32)
           for name in ("input_word_ids", "input_mask", "input_type_ids")})
    _vocab(work / "vocab.txt", config.vocab_size)
    save_model_dir(model, work / "model", vocab_file=str(work / "vocab.txt"), do_lower_case=True,
                   max_seq_length=args.max_seq_length, labels=["no", "yes"],
                   extra={"sentence_pair": True})
    del model
    calibration = work / "calibration.txt"
    calibration.write_text("".join(
        " ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(40)) + "\t"
        + " ".join(_WORDS[(i * 3 + j) % len(_WORDS)] for j in range(40)) + "\n"
        for i in range(args.calibration_examples)))
    for entry in args.exports.split(","):
      fmt, precision = entry.strip().split(":")
      suffix = {"litert": ".tflite", "onnx": ".onnx"}.get(fmt, "")
      target = work / f"{fmt}_{precision}{suffix}"
      seconds, peak = _export(work / "model", target, fmt, precision, calibration)
      rows.append((fmt, precision, seconds, peak, _size(target)))
      print(f"{fmt} {precision}: {seconds:.0f} s, peak {peak / 2**30:.1f} GiB", file=sys.stderr)
  print(f"\nBERT classifier, {args.layers} layers, hidden {args.hidden}, vocabulary "
        f"{config.vocab_size}, sequence {args.max_seq_length}; each export a process of its own "
        f"(`export_saved_model.py`).\n")
  print("| format | precision | seconds | peak resident memory (GiB) | written (MiB) |\n"
        "|---|---|---:|---:|---:|")
  for fmt, precision, seconds, peak, size in rows:
    print(f"| {fmt} | {precision} | {seconds:.0f} | {peak / 2**30:.1f} | {size / 2**20:.0f} |")


if __name__ == "__main__":
  with recorded("export_memory", markdown=True):
    main()
