"""What `--precision=int8` costs in accuracy: MiniLM fine-tuned on GLUE, served float32 and int8.

For each task of `--tasks`, MiniLM-L6 (the test fixture's weights, as `glue_benchmark.py` loads
them) is fine-tuned by the package's classification task on GLUE from `../shared/data/glue`, then
exported in float32 and int8 (`export_model_dir_as(..., precision=...)`) in each format of
`--formats`: LiteRT files, ONNX files, OpenVINO folders. Each classifies the whole dev set from raw
text (LiteRT) or the package tokenizer's ids (ONNX, OpenVINO), and the table gives the dev
accuracy of each and the share of dev examples on which int8 gives float32's label. OpenVINO's
static int8 is calibrated on the first 300 training examples (the run's `train.tf_record`), not on
the dev set it is scored on; it runs at the CPU plugin's default precision (bfloat16 where the CPU
has AMX), its float32 row at `INFERENCE_PRECISION_HINT=f32`.

    python benchmarks/int8_accuracy.py --tasks=mrpc,sst2 --formats=litert,onnx,openvino

With several `--seeds`, each seed fine-tunes its own model (its own head's initialization and
order of batches), and a second table gives, per task and format, int8's accuracy minus
float32's over the seeds: a dev set of 408 pairs moves 0.25 points a label, so one model's
difference is mostly which few borderline pairs flip.
"""

import argparse
import csv
import os
import pathlib
import sys
import tempfile

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=wrong-import-position
from glue_benchmark import GLUE, TASKS, fine_tune, minilm_dir, sample_task
import numpy as np
import onnxruntime
from results import recorded
import tensorflow as tf

from official_bert.export import export_model_dir_as, litert
from official_bert.export.signatures import TextPacker
from official_bert.tasks.base import Modes
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

# (text columns, label column) of each dev.tsv.
_DEV_COLUMNS = {"MRPC": ((3, 4), 0), "SST-2": ((0,), 1)}


def dev_examples(task):
  """The texts (one list per segment) and integer labels of the task's dev set."""
  with open(GLUE / task / "dev.tsv", encoding="utf-8-sig") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  columns, label = _DEV_COLUMNS[task]
  return [[row[c] for row in rows] for c in columns], np.array([int(row[label]) for row in rows])


def litert_predictions(path, texts, labels, batch=32):
  runner = litert.load_interpreter(model_path=path).get_signature_runner()
  names = ["text"] if len(texts) == 1 else ["text_a", "text_b"]
  predicted = []
  for begin in range(0, len(labels), batch):
    feed = {name: np.array(column[begin:begin + batch], dtype=object)
            for name, column in zip(names, texts)}
    predicted.append(runner(**feed)["label_id"])
  return np.concatenate(predicted)


def onnx_predictions(path, packer, texts, labels, batch=32):
  session = onnxruntime.InferenceSession(path)
  predicted = []
  for begin in range(0, len(labels), batch):
    inputs = packer(*[tf.constant(column[begin:begin + batch]) for column in texts])
    predicted.append(session.run(["label_id"], {k: v.numpy() for k, v in inputs.items()})[0])
  return np.concatenate(predicted)


def openvino_predictions(path, packer, texts, labels, precision, batch=32):
  import openvino  # pylint: disable=import-outside-toplevel

  config = {"INFERENCE_PRECISION_HINT": "f32"} if precision == "float32" else {}
  compiled = openvino.Core().compile_model(os.path.join(path, "model.xml"), "CPU", config)
  predicted = []
  for begin in range(0, len(labels), batch):
    inputs = packer(*[tf.constant(column[begin:begin + batch]) for column in texts])
    predicted.append(compiled({k: v.numpy() for k, v in inputs.items()})["label_id"])
  return np.concatenate(predicted)


def _rows(task, seed, data_dir, work, model, args):
  """`(task, seed, format, precision, accuracy, agreement with float32)` of one fine-tuned model
  in each format of `args.formats`."""
  output = work / "output"
  fine_tune(task, data_dir, output, args.max_seq_length,
            TrainerConfig(train_batch_size=32, eval_batch_size=64,
                          num_train_epochs=args.num_train_epochs,
                          optimizer=OptimizerConfig(learning_rate=args.learning_rate)),
            RuntimeConfig(seed=seed), Modes(train=True, eval=False))
  texts, labels = dev_examples(task)
  packer = TextPacker(str(model / "vocab.txt"), True, args.max_seq_length, ())
  formats = [name.strip() for name in args.formats.split(",")]
  rows, float32 = [], {}
  for precision in ("float32", "int8"):
    predicted = {}
    if "litert" in formats:
      path = export_model_dir_as(output, work / f"{precision}.tflite", format="litert",
                                 precision=precision)
      predicted["LiteRT"] = litert_predictions(str(path), texts, labels)
    if "onnx" in formats:
      path = export_model_dir_as(output, work / f"{precision}.onnx", format="onnx",
                                 precision=precision)
      predicted["ONNX"] = onnx_predictions(str(path), packer, texts, labels)
    if "openvino" in formats:
      calibration = str(output / "train.tf_record") if precision == "int8" else None
      path = export_model_dir_as(output, work / f"{precision}_openvino", format="openvino",
                                 precision=precision, calibration=calibration)
      predicted["OpenVINO"] = openvino_predictions(str(path), packer, texts, labels, precision)
    for name, labels_predicted in predicted.items():
      if precision == "float32":
        float32[name] = labels_predicted
      rows.append((task, seed, name, precision, np.mean(labels_predicted == labels),
                   np.mean(labels_predicted == float32[name])))
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--tasks", default="mrpc,sst2", help="comma-separated: sst2, mrpc")
  parser.add_argument("--sst2_train_examples", type=int, default=3000)
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=3e-5)
  parser.add_argument("--max_seq_length", type=int, default=96)
  parser.add_argument("--formats", default="litert",
                      help="comma-separated: litert, onnx, openvino")
  parser.add_argument("--seeds", default="0", help="comma-separated fine-tuning seeds")
  args = parser.parse_args()
  model = minilm_dir()
  rows = []
  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    for key in args.tasks.split(","):
      task = TASKS[key.strip()]
      data_dir, _ = sample_task(task, work / "data", args.sst2_train_examples
                                if task == "SST-2" else 0, 0)
      for seed in [int(seed) for seed in args.seeds.split(",")]:
        rows += _rows(task, seed, data_dir, work / f"{task}_{seed}", model, args)
        print(f"{task}, seed {seed}: " + ", ".join(
            f"{fmt} {precision} {100 * accuracy:.1f}%" for row_task, row_seed, fmt, precision,
            accuracy, _ in rows if (row_task, row_seed) == (task, seed)), file=sys.stderr)
  print(f"\nMiniLM-L6 fine-tuned for {args.num_train_epochs:g} epochs at learning rate "
        f"{args.learning_rate:g}, batch 32, sequence {args.max_seq_length}; SST-2 on "
        f"{args.sst2_train_examples} training sentences, MRPC on all pairs; whole dev sets. "
        "Same label as float32: the share of dev examples given float32's label in that format.")
  print("\n| task | seed | format | precision | dev accuracy (%) | same label as float32 (%) |\n"
        "|---|---|---|---|---|---|")
  for task, seed, fmt, precision, accuracy, agreement in rows:
    print(f"| {task} | {seed} | {fmt} | {precision} | {100 * accuracy:.1f} | "
          f"{100 * agreement:.1f} |")
  seeds = sorted({row[1] for row in rows})
  if len(seeds) > 1:
    print(f"\nint8 minus float32 dev accuracy over seeds {', '.join(map(str, seeds))} "
          "(points): mean, and the smallest and largest of one seed.\n")
    print("| task | format | mean | min | max | mean same label as float32 (%) |\n"
          "|---|---|---|---|---|---|")
    accuracy = {row[:4]: row[4] for row in rows}
    for task, fmt in dict.fromkeys((row[0], row[2]) for row in rows):
      gaps = [100 * (accuracy[task, seed, fmt, "int8"] - accuracy[task, seed, fmt, "float32"])
              for seed in seeds]
      agreement = np.mean([row[5] for row in rows
                           if (row[0], row[2], row[3]) == (task, fmt, "int8")])
      print(f"| {task} | {fmt} | {np.mean(gaps):+.2f} | {min(gaps):+.1f} | {max(gaps):+.1f} | "
            f"{100 * agreement:.1f} |")


if __name__ == "__main__":
  with recorded("int8_accuracy", markdown=True):
    main()
