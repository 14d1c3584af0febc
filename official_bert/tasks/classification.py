"""Sentence and sentence-pair classification (and regression): the library side of
`run_classifier.py`.

`run_classifier` reads a GLUE task, the user's own files (`task_name="custom"`) or a TFDS `glue/*`
dataset, writes the features to `train.tf_record`, `eval.tf_record` and `predict.tf_record` in the
output folder as the original did, fine-tunes a `BertClassifier` with the shared
`fine_tuning.FineTuningRunner` and writes, like the original:

* `eval_results.txt`: `eval_loss`, `eval_accuracy` and the task's GLUE metrics (`eval_f1` for MRPC
  and QQP, `eval_matthews_corrcoef` for CoLA, `eval_pearson` / `eval_spearman` for STS-B), and
  `global_step`. MNLI evaluates its matched and mismatched dev sets; the mismatched results are
  named `eval_mismatched_*`.
* `test_results.tsv`: one line per test example, the class probabilities tab-separated (the
  predicted score for regression), no header.
* the GLUE submission file `<TASK>.tsv` (`index<TAB>prediction` with label names; `MNLI-m.tsv`
  and `MNLI-mm.tsv` for MNLI, whose mismatched test probabilities go to
  `test_results_mismatched.tsv`); `test_predictions.tsv` in that format for custom data.

The diagnostic set AX has only a test split and is predicted with an MNLI model: run
`task_name="AX"`, `do_predict=True` with the `output_dir` of an MNLI run, which writes `AX.tsv` and
`test_results_ax.tsv` beside the MNLI files.

Loss: softmax cross-entropy (mean squared error for regression) averaged over the real examples
(`is_real_example`); evaluation scores the predictions of the whole set.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import tokenization
from official_bert.configs import BertConfig
from official_bert.data import classifier_data, classifier_features
from official_bert.evaluation import glue_metrics
from official_bert.models import BertClassifier
from official_bert.tasks import fine_tuning

TEST_RESULTS = "test_results{suffix}.tsv"
CUSTOM_PREDICTIONS = "test_predictions.tsv"
_CUSTOM_FILES = {"train_file": "train", "dev_file": "dev", "test_file": "test"}


@dataclasses.dataclass(frozen=True)
class _Split:
  """An evaluated or predicted split: its processor name and how its outputs are named."""
  name: str
  suffix: str = ""
  submission: str = None


def classification_loss(is_regression):
  """The loss of `BertClassifier` outputs, averaged over the real examples of a batch.

  Args:
    is_regression: mean squared error of `logits[:, 0]` instead of softmax cross-entropy.

  Returns:
    `loss_fn(outputs, labels)` -> `{"loss": scalar}`; `labels` is a dict of `labels` (class ids,
    or float scores) and `weights` (1.0 for real examples, 0.0 for padding rows).
  """

  def loss_fn(outputs, labels):
    logits = tf.cast(outputs["logits"], tf.float32)
    weights = tf.cast(labels["weights"], tf.float32)
    if is_regression:
      per_example = tf.square(logits[:, 0] - tf.cast(labels["labels"], tf.float32))
    else:
      per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
          tf.cast(labels["labels"], tf.int32), logits)
    return {"loss": tf.math.divide_no_nan(tf.reduce_sum(per_example * weights),
                                          tf.reduce_sum(weights))}

  return loss_fn


def classification_metrics(outputs, labels):
  """Accuracy over the real examples, as `(correct, count)` for the training logs."""
  weights = tf.cast(labels["weights"], tf.float32)
  predictions = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
  correct = tf.cast(tf.equal(predictions, tf.cast(labels["labels"], tf.int32)), tf.float32)
  return {"accuracy": (tf.reduce_sum(correct * weights), tf.reduce_sum(weights))}


def score_predictions(task_name, logits, label_ids, is_regression):
  """Scores a whole evaluation set: loss, accuracy and the task's GLUE metrics.

  Args:
    task_name: the GLUE task name (`MRPC`, ...), or None for custom data (accuracy, or Pearson
      and Spearman correlations for regression).
    logits: float `[examples, num_classes]` (`[examples, 1]` for regression).
    label_ids: the gold class ids (float scores for regression), `[examples]`.
    is_regression: whether the task is regression.

  Returns:
    Dict of floats: `loss`, and `accuracy` and/or the GLUE metrics.
  """
  loss = classification_loss(is_regression)(
      {"logits": logits}, {"labels": label_ids, "weights": np.ones(len(label_ids))})["loss"]
  metrics = {"loss": float(loss)}
  if is_regression:
    scores = logits[:, 0]
    metrics["pearson"] = glue_metrics.pearson_correlation(label_ids, scores)
    metrics["spearman"] = glue_metrics.spearman_correlation(label_ids, scores)
    return metrics
  predictions = np.argmax(logits, axis=-1)
  metrics["accuracy"] = glue_metrics.accuracy(label_ids, predictions)
  if task_name:
    metrics.update(glue_metrics.glue_metrics(task_name, label_ids, predictions))
  return metrics


def _processor(task_name, data_dir, tfds_name, custom_options, skip_malformed_rows):
  """The data processor for the run, checking that the options fit the kind of data."""
  options = dict(custom_options or {})
  is_custom = not tfds_name and (task_name or "").lower() == "custom"
  if options and not is_custom:
    raise ValueError(f"{', '.join(sorted(options))} apply only to task_name='custom' (your own "
                     "files), not to a GLUE task or a TFDS dataset.")
  if not tfds_name and not task_name:
    raise ValueError("Name the data: task_name (a GLUE task or 'custom') or tfds_name.")
  if skip_malformed_rows is not None:
    options["skip_malformed_rows"] = skip_malformed_rows
  if is_custom:
    missing = [name for name in ("text_a_column", "label_column") if options.get(name) is None]
    if missing:
      raise ValueError(f"task_name='custom' needs {' and '.join(missing)}: which columns of "
                       "your files hold the text and the label.")
    files = {split: options.pop(name) for name, split in _CUSTOM_FILES.items()
             if options.get(name)}
    options = {name: value for name, value in options.items() if name not in _CUSTOM_FILES}
    options["files"] = files
  return classifier_data.get_processor(task_name, data_dir, tfds_name=tfds_name, **options)


class _Reader:
  """Reads splits, logging and recording how many examples and skipped rows each had."""

  def __init__(self, processor):
    self.processor = processor
    self.summary = []
    self.sentence_pair = False

  def __call__(self, split):
    processor = self.processor
    if split not in processor.splits:
      raise ValueError(f"The data has no {split!r} split (it has {list(processor.splits)}).")
    examples = processor.get_examples(split)
    key = (processor.tfds_split(split) if hasattr(processor, "tfds_split")
           else processor.split_file(split))
    skipped = processor.skipped_rows.get(key, 0)
    logging.info("Read %d %s examples (%d malformed row(s) skipped).", len(examples), split,
                 skipped)
    self.summary.append(f"{split}: {len(examples)} examples, {skipped} malformed row(s) skipped")
    self.sentence_pair = examples[0].text_b is not None
    return examples


def _splits(processor, task_name):
  """The `(eval splits, predict splits)` of the data, with the names of their outputs."""
  if task_name == "AX":
    return [], [_Split("test", "_ax", "AX")]
  if "dev_mismatched" in processor.splits:
    return ([_Split("dev_matched"), _Split("dev_mismatched", "_mismatched")],
            [_Split("test_matched", "", "MNLI-m"), _Split("test_mismatched", "_mismatched",
                                                          "MNLI-mm")])
  if task_name == "MNLI":  # TFDS glue/mnli_matched or glue/mnli_mismatched: one of the two
    mismatched = processor.tfds_name.endswith("_mismatched")
    return [_Split("dev")], [_Split("test", "", "MNLI-mm" if mismatched else "MNLI-m")]
  return [_Split("dev")], [_Split("test", "", task_name)]


def _input_fn(path, max_seq_length, is_training, is_regression, seed=None, for_predict=False):
  """An input function over classifier TFRecords, for `FineTuningRunner`."""

  def input_fn(batch_size, input_context):
    dataset = classifier_features.create_classifier_dataset(
        path, max_seq_length, batch_size, is_training, is_regression, seed=seed,
        input_context=input_context)
    if for_predict:
      return dataset.map(lambda inputs, labels, weights: dict(
          inputs, label_ids=labels, is_real_example=weights))
    return dataset.map(lambda inputs, labels, weights: (
        inputs, {"labels": labels, "weights": weights}))

  return input_fn


def _predict(runner, examples, split, label_list, tokenizer, max_seq_length, is_regression,
             output_dir, mode):
  """Writes `<mode><suffix>.tf_record`, runs the model; returns `(logits, label_ids)` of the
  real examples, in order."""
  path = os.path.join(output_dir, f"{mode}{split.suffix}.tf_record")
  classifier_features.file_based_convert_examples_to_features(
      examples, label_list, max_seq_length, tokenizer, path, is_regression)
  batch_size = runner.config.eval_batch_size if mode == "eval" else None
  outputs = runner.predict(_input_fn(path, max_seq_length, False, is_regression, for_predict=True),
                           keep=("label_ids", "is_real_example"), batch_size=batch_size)
  real = outputs["is_real_example"] > 0
  logits, label_ids = outputs["logits"][real].astype(np.float64), outputs["label_ids"][real]
  if len(logits) != len(examples):
    raise RuntimeError(f"{len(examples)} {split.name} examples but {len(logits)} predictions; "
                       "prediction runs on one machine (all of its replicas) only.")
  return logits, label_ids


def _softmax(logits):
  exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return exp / exp.sum(axis=-1, keepdims=True)


def _write_predictions(output_dir, split, examples, logits, label_list, is_regression):
  """Writes `test_results<suffix>.tsv` and the submission file; returns their paths."""
  values = logits if is_regression else _softmax(logits)
  results = os.path.join(output_dir, TEST_RESULTS.format(suffix=split.suffix))
  fine_tuning.write_file(results, "".join(
      "\t".join(str(float(value)) for value in row) + "\n" for row in values))
  if is_regression:
    predictions = [str(float(score)) for score in logits[:, 0]]
  else:
    predictions = [label_list[index] for index in np.argmax(logits, axis=-1)]
  submission = os.path.join(output_dir, f"{split.submission}.tsv" if split.submission
                            else CUSTOM_PREDICTIONS)
  rows = [f"{example.guid.split('-', 1)[1]}\t{prediction}\n"
          for example, prediction in zip(examples, predictions)]
  fine_tuning.write_file(submission, "index\tprediction\n" + "".join(rows))
  return [results, submission]


def run_classifier(*, bert_config_file, vocab_file, config, task_name=None, data_dir=None,
                   tfds_name=None, custom_options=None, skip_malformed_rows=None,
                   do_lower_case=True, max_seq_length=128, do_train=False, do_eval=False,
                   do_predict=False):
  """Fine-tunes, evaluates and/or predicts a sentence(-pair) classifier.

  Args:
    bert_config_file: the `bert_config.json` of the pre-trained model.
    vocab_file: its WordPiece vocabulary.
    config: the `fine_tuning.FineTuningConfig` (output folder, init checkpoint, batch sizes,
      learning rate, epochs, warmup, export, engine).
    task_name: a GLUE task (`CoLA`, `SST-2`, `MRPC`, `STS-B`, `QQP`, `MNLI`, `QNLI`, `RTE`,
      `WNLI`, `AX`) or `custom`; not needed with `tfds_name`.
    data_dir: the task's folder of files (for TFDS, optionally its data folder).
    tfds_name: read a TFDS dataset such as `glue/sst2` instead of files.
    custom_options: for `custom`: `text_a_column`, `label_column` (required), `text_b_column`,
      `is_regression`, `has_header` (see `custom_data.CustomProcessor`) and `train_file`,
      `dev_file`, `test_file` for files not named `<split>.<csv|tsv|jsonl>` in `data_dir`.
    skip_malformed_rows: skip (and count) malformed rows instead of stopping at the first;
      None keeps the data's default (skip for QQP only).
    do_lower_case: lower-case the text (uncased models).
    max_seq_length: tokens per example after WordPiece, `[CLS]` and `[SEP]`s included.
    do_train: fine-tune on the train split (resuming from `config.output_dir`).
    do_eval: evaluate on the dev split(s) into `eval_results.txt`.
    do_predict: predict the test split(s) into `test_results.tsv` and the submission file.

  Returns:
    The evaluation results (dict of floats with `global_step`); empty without `do_eval`.

  Example:

    run_classifier(bert_config_file="uncased_L-12_H-768_A-12/bert_config.json",
                   vocab_file="uncased_L-12_H-768_A-12/vocab.txt", task_name="MRPC",
                   data_dir="glue_data/MRPC", do_train=True, do_eval=True,
                   config=FineTuningConfig(output_dir="/tmp/mrpc_output", learning_rate=2e-5,
                                           init_checkpoint="uncased_L-12_H-768_A-12"))
  """
  bert_config = BertConfig.from_json_file(bert_config_file)
  fine_tuning.validate_run(do_train=do_train, do_eval=do_eval, do_predict=do_predict,
                           bert_config=bert_config, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case, init_checkpoint=config.init_checkpoint)
  processor = _processor(task_name, data_dir, tfds_name, custom_options, skip_malformed_rows)
  glue_name = processor.task.name if hasattr(processor, "task") else None
  if glue_name == "AX" and (do_train or do_eval):
    raise ValueError("AX has only a test set, predicted with an MNLI model: run do_predict with "
                     "the output_dir of an MNLI run.")
  tokenizer = tokenization.model_tokenizer(vocab_file, do_lower_case, bert_config.vocab_size)
  is_regression = processor.is_regression
  label_list = processor.get_labels()
  if not is_regression and len(label_list) < 2:
    raise ValueError(f"The training data has only the label(s) {label_list}; a classifier needs "
                     "two or more (or is_regression for numeric targets).")
  output_dir, read = config.output_dir, _Reader(processor)
  train_examples = read("train") if do_train else None
  loss_fn = classification_loss(is_regression)
  runner = fine_tuning.FineTuningRunner(
      lambda: BertClassifier(bert_config, 1 if is_regression else len(label_list)), loss_fn,
      config, metrics_fn=None if is_regression else classification_metrics,
      num_train_examples=len(train_examples) if do_train else None)
  if not do_train and runner.global_step == 0:
    if glue_name == "AX":
      raise ValueError(f"{output_dir} holds no fine-tuned checkpoint: AX is predicted with an "
                       "MNLI model, so give the output_dir of an MNLI run.")
    logging.warning("%s holds no fine-tuned checkpoint: the classification layer is untrained.",
                    output_dir)

  if do_train:
    train_file = os.path.join(output_dir, "train.tf_record")
    classifier_features.file_based_convert_examples_to_features(
        train_examples, label_list, max_seq_length, tokenizer, train_file, is_regression)
    runner.train(_input_fn(train_file, max_seq_length, True, is_regression,
                           seed=config.engine.seed))
  eval_splits, predict_splits = _splits(processor, glue_name)
  results, files = {}, []
  for split in eval_splits if do_eval else []:
    examples = read(split.name)
    logits, label_ids = _predict(runner, examples, split, label_list, tokenizer, max_seq_length,
                                 is_regression, output_dir, "eval")
    results.update(runner.eval_results(
        score_predictions(glue_name, logits, label_ids, is_regression), f"eval{split.suffix}"))
  if results:
    files.append(runner.write_eval_results(results))
  for split in predict_splits if do_predict else []:
    examples = read(split.name)
    logits, _ = _predict(runner, examples, split, label_list, tokenizer, max_seq_length,
                         is_regression, output_dir, "predict")
    if runner.is_chief:
      files += _write_predictions(output_dir, split, examples, logits, label_list, is_regression)
  if do_train or config.export_dir:
    files.append(runner.save(
        vocab_file=vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
        labels=None if is_regression else label_list, is_regression=is_regression,
        extra={"sentence_pair": read.sentence_pair}))
  logging.info("***** Summary *****  %s, step %d; %s; wrote %s",
               glue_name or tfds_name or "custom data", runner.global_step, "; ".join(read.summary),
               ", ".join(files))
  return results
