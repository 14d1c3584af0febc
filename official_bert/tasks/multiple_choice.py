"""Multiple choice (SWAG): the library side of `run_swag.py`.

`run_swag` reads SWAG files (the CSV files `train.csv`, `val.csv`, `test.csv` of the release, or
JSON lines) with `official_bert.data.swag`, fine-tunes a `BertMultipleChoice` with the shared
`runner.Runner` and writes:

* `eval_results.txt`: `eval_accuracy`, `eval_loss` and `global_step`;
* `test_results.tsv`: one line per predicted example, the probabilities of its choices
  tab-separated, no header (as `run_classifier.py`'s);
* `test_predictions.jsonl`: one object per predicted example, `{"example_id": ..., "prediction":
  k, "probabilities": [...]}` with `"label"` when the file has one;
* the fine-tuned model folder (task `multiple_choice`), and with `export_dir` a SavedModel.

Each choice is packed as `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; the loss is the softmax
cross-entropy over a question's choices.
"""

import json
import os

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert import tokenization
from official_bert.configs import BertConfig
from official_bert.data import swag
from official_bert.models import BertMultipleChoice
from official_bert.tasks import runner as run_lib

TEST_RESULTS = "test_results.tsv"
TEST_PREDICTIONS = "test_predictions.jsonl"
# File names of each split in a `data_dir`: the SWAG release's CSV files, or JSON lines.
SPLIT_FILES = {
    "train": ("train.csv", "train.jsonl"),
    "eval": ("val.csv", "val.jsonl", "dev.jsonl"),
    "predict": ("test.csv", "test.jsonl"),
}


def multiple_choice_loss(outputs, labels):
  """Softmax cross-entropy over the choices, averaged over the batch.

  Args:
    outputs: `BertMultipleChoice` outputs, `logits` `[batch, num_choices]`.
    labels: int `[batch]`, the right choice.

  Returns:
    `{"loss": scalar}`.
  """
  logits = tf.cast(outputs["logits"], tf.float32)
  return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.cast(labels, tf.int32), logits))}


def multiple_choice_metrics(outputs, labels):
  """Accuracy of a batch, for the training logs.

  Args:
    outputs: `BertMultipleChoice` outputs, `logits` `[batch, num_choices]`.
    labels: int `[batch]`, the right choice.

  Returns:
    `{"accuracy": (correct, count)}`.
  """
  predictions = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
  correct = tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)
  return {"accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))}


def score_predictions(logits, labels):
  """Loss and accuracy of a whole evaluation set.

  Args:
    logits: float `[examples, num_choices]`.
    labels: int `[examples]`.

  Returns:
    `{"accuracy": float, "loss": float}`.
  """
  loss = multiple_choice_loss({"logits": logits}, labels)["loss"]
  return {"accuracy": float(np.mean(np.argmax(logits, axis=-1) == labels)), "loss": float(loss)}


def _softmax(logits):
  exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return exp / exp.sum(axis=-1, keepdims=True)


def write_predictions(output_dir, features, logits):
  """Writes `test_results.tsv` and `test_predictions.jsonl`, each atomically.

  Args:
    output_dir: the folder.
    features: the `MultipleChoiceFeatures` predicted (ids and labels).
    logits: float `[examples, num_choices]`.

  Returns:
    The two paths.
  """
  probabilities = _softmax(logits.astype(np.float64))
  results = os.path.join(output_dir, TEST_RESULTS)
  run_lib.write_file(results, "".join(
      "\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
  lines = []
  for example_id, label, row in zip(features.example_ids, features.labels, probabilities):
    record = {"example_id": example_id, "prediction": int(np.argmax(row)),
              "probabilities": [round(float(p), 6) for p in row]}
    if label != swag.NO_LABEL:
      record["label"] = int(label)
    lines.append(json.dumps(record) + "\n")
  predictions = os.path.join(output_dir, TEST_PREDICTIONS)
  run_lib.write_file(predictions, "".join(lines))
  return [results, predictions]


def _split_file(split, data_dir, path):
  """The file of `split`: `path` when given, else the one file of `SPLIT_FILES` in `data_dir`."""
  if path:
    return path
  if not data_dir:
    raise ValueError(f"Give data_dir or the {split} file.")
  found = [os.path.join(data_dir, name) for name in SPLIT_FILES[split]
           if os.path.isfile(os.path.join(data_dir, name))]
  if len(found) != 1:
    raise FileNotFoundError(f"{data_dir} holds {found or 'none'} of {list(SPLIT_FILES[split])} "
                            f"for the {split} split; pass the file explicitly.")
  return found[0]


def _read(path, require_labels):
  examples = swag.read_swag_examples(path)
  if not examples:
    raise ValueError(f"{path} holds no examples.")
  unlabelled = [e.example_id for e in examples if e.label is None]
  if require_labels and unlabelled:
    raise ValueError(f"{path}: {len(unlabelled)} examples have no label (the first: example "
                     f"{unlabelled[0]!r}); training and evaluation need labelled files.")
  return examples


def _input_fn(features, is_training, seed=None):
  """An input function over packed features, for `Runner`."""
  return run_lib.in_memory_input_fn(
      lambda batch_size: swag.make_dataset(features, batch_size, is_training=is_training,
                                           seed=seed))


def _predict(runner, features, batch_size=None):
  logits = runner.predict(_input_fn(features, is_training=False), batch_size=batch_size)["logits"]
  if len(logits) != len(features):
    raise RuntimeError(f"{len(features)} examples but {len(logits)} predictions; prediction "
                       "runs on one machine (all of its replicas) only.")
  return logits


def run_swag(*, bert_config_file, vocab_file, config, data_dir=None, train_file=None,
             eval_file=None, predict_file=None, do_lower_case=True, max_seq_length=128,
             do_train=False, do_eval=False, do_predict=False):
  """Fine-tunes, evaluates and/or predicts a multiple-choice model on SWAG-format data.

  Args:
    bert_config_file: the `bert_config.json` of the pre-trained model.
    vocab_file: its WordPiece vocabulary.
    config: the `runner.RunConfig` (output folder, init checkpoint, batch sizes,
      learning rate, epochs, warmup, export, engine).
    data_dir: a folder with `train.csv`, `val.csv`, `test.csv` (or `.jsonl` files).
    train_file: the training file, instead of `data_dir`'s (`.csv` or `.jsonl`).
    eval_file: the evaluation file (labelled).
    predict_file: the file to predict (labels optional).
    do_lower_case: lower-case the text (uncased models).
    max_seq_length: tokens per (context, ending) pair, special tokens included.
    do_train: fine-tune (resuming from `config.output_dir`).
    do_eval: evaluate into `eval_results.txt`.
    do_predict: predict into `test_results.tsv` and `test_predictions.jsonl`.

  Returns:
    The evaluation results (`eval_accuracy`, `eval_loss`, `global_step`); empty without
    `do_eval`.

  Example:

    run_swag(bert_config_file="uncased_L-12_H-768_A-12/bert_config.json",
             vocab_file="uncased_L-12_H-768_A-12/vocab.txt", data_dir="swagaf/data",
             do_train=True, do_eval=True,
             config=RunConfig(output_dir="/tmp/swag_output", learning_rate=2e-5,
                                     init_checkpoint="uncased_L-12_H-768_A-12"))
  """
  bert_config = BertConfig.from_json_file(bert_config_file)
  run_lib.validate_run(do_train=do_train, do_eval=do_eval, do_predict=do_predict,
                           bert_config=bert_config, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case, init_checkpoint=config.init_checkpoint)
  files = {split: _split_file(split, data_dir, path) for split, path, wanted in (
      ("train", train_file, do_train), ("eval", eval_file, do_eval),
      ("predict", predict_file, do_predict)) if wanted}
  tokenizer = tokenization.model_tokenizer(vocab_file, do_lower_case, bert_config.vocab_size)
  features, summary = {}, []
  for split, path in files.items():
    examples = _read(path, require_labels=split != "predict")
    features[split] = swag.convert_examples_to_features(examples, tokenizer, max_seq_length)
    summary.append(f"{split}: {len(examples)} examples from {path}, "
                   f"{features[split].num_truncated_choices} choices truncated")
  num_choices = {f.input_word_ids.shape[1] for f in features.values()}
  if len(num_choices) > 1:
    raise ValueError(f"The files have different numbers of endings {sorted(num_choices)}: "
                     f"{files}.")
  num_choices = num_choices.pop()

  runner = run_lib.Runner(
      lambda: BertMultipleChoice(bert_config, num_choices=num_choices), multiple_choice_loss,
      config, metrics_fn=multiple_choice_metrics,
      num_train_examples=len(features["train"]) if do_train else None)
  if not do_train and runner.global_step == 0:
    logging.warning("%s holds no fine-tuned checkpoint: the choice scorer is untrained.",
                    config.output_dir)
  if do_train:
    runner.train(_input_fn(features["train"], is_training=True, seed=config.engine.seed))
  results, written = {}, []
  if do_eval:
    logits = _predict(runner, features["eval"], batch_size=config.eval_batch_size)
    results = runner.eval_results(score_predictions(logits, features["eval"].labels))
    written.append(runner.write_eval_results(results))
  if do_predict:
    logits = _predict(runner, features["predict"])
    if runner.is_chief:
      written += write_predictions(config.output_dir, features["predict"], logits)
  if do_train or config.export_dir:
    written.append(runner.save(vocab_file=vocab_file, do_lower_case=do_lower_case,
                               max_seq_length=max_seq_length))
  logging.info("***** Summary *****  SWAG, %d choices, step %d; %s; wrote %s", num_choices,
               runner.global_step, "; ".join(summary), ", ".join(written))
  return results
