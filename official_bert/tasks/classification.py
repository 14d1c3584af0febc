"""Sentence and sentence-pair classification (and regression): the library side of
`run_classifier.py`.

`ClassificationTask` reads a GLUE task, the user's own files (`task_name="custom"`) or a TFDS
`glue/*` dataset, writes the features to `train.tf_record`, `eval.tf_record` and
`predict.tf_record` in the output folder as the original did, fine-tunes a `BertClassifier` and
writes, like the original:

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

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.data import classifier_features, classifier_processors
from official_bert.evaluation import glue_metrics
from official_bert.models import BertClassifier
from official_bert.tasks import base, experiment

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


def _processor(task_name, data_dir, tfds_name, custom_options, skip_malformed_rows,
               xnli_language=None):
  """The data processor for the run, checking that the options fit the kind of data."""
  options = dict(custom_options or {})
  if xnli_language is not None:
    if tfds_name or (task_name or "").lower() != "xnli":
      raise ValueError("xnli_language applies only to task_name='XNLI'.")
    options["language"] = xnli_language
  is_custom = not tfds_name and (task_name or "").lower() == "custom"
  if set(options) - {"language"} and not is_custom:
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
  return classifier_processors.get_processor(task_name, data_dir, tfds_name=tfds_name,
                                             **options)


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
  """An input function over classifier TFRecords, for `Runner`."""

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


def _softmax(logits):
  exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return exp / exp.sum(axis=-1, keepdims=True)


def _write_predictions(output_dir, split, examples, logits, label_list, is_regression):
  """Writes `test_results<suffix>.tsv` and the submission file; returns their paths."""
  values = logits if is_regression else _softmax(logits)
  results = os.path.join(output_dir, TEST_RESULTS.format(suffix=split.suffix))
  file_io.write_text(results, "".join(
      "\t".join(str(float(value)) for value in row) + "\n" for row in values))
  if is_regression:
    predictions = [str(float(score)) for score in logits[:, 0]]
  else:
    predictions = [label_list[index] for index in np.argmax(logits, axis=-1)]
  submission = os.path.join(output_dir, f"{split.submission}.tsv" if split.submission
                            else CUSTOM_PREDICTIONS)
  rows = [f"{example.guid.split('-', 1)[1]}\t{prediction}\n"
          for example, prediction in zip(examples, predictions)]
  file_io.write_text(submission, "index\tprediction\n" + "".join(rows))
  return [results, submission]


@base.register(experiment.ClassificationConfig)
class ClassificationTask(base.Task):
  """Sentence(-pair) classification or regression on GLUE, TFDS `glue/*` or the user's files.

  Args:
    config: the task's settings, a `ClassificationConfig` (the GLUE task, TFDS dataset or your
      own files, and how to read them).
    bert_config: the encoder's `BertConfig`.

  Example:

    config = ExperimentConfig(
        task=ClassificationConfig(vocab_file="vocab.txt", task_name="MRPC",
                                  data_dir="glue/MRPC"),
        trainer=TrainerConfig(optimizer=OptimizerConfig(learning_rate=2e-5)),
        model=BertConfig.from_json_file("bert_config.json"),
        output_dir="/tmp/mrpc_output", init_checkpoint="uncased_L-12_H-768_A-12")
    driver.run_experiment(config, Modes(train=True, eval=True))
  """

  name = "classification"
  output_features = ("label_ids", "is_real_example")

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    config = self.config
    self.processor = _processor(config.task_name, config.data_dir, config.tfds_name,
                                config.custom_options, config.skip_malformed_rows,
                                config.xnli_language)
    self.glue_name = getattr(getattr(self.processor, "task", None), "name", None)
    self.is_regression = self.processor.is_regression
    self.label_list = self.processor.get_labels()
    self.name = self.glue_name or config.tfds_name or "custom data"
    self.examples = {}
    self.sentence_pair = False

  def _read(self, split):
    processor = self.processor
    if split not in processor.splits:
      raise ValueError(f"The data has no {split!r} split (it has {list(processor.splits)}).")
    examples = processor.get_examples(split)
    key = (processor.tfds_split(split) if hasattr(processor, "tfds_split")
           else processor.split_file(split))
    skipped = processor.skipped_rows.get(key, 0)
    if split == "train":
      self.train_files = [f"tfds:{processor.tfds_name}/{key}" if hasattr(processor, "tfds_split")
                          else key]
    logging.info("Read %d %s examples (%d malformed row(s) skipped).", len(examples), split,
                 skipped)
    summary = f"{split}: {len(examples)} examples, {skipped} malformed row(s) skipped"
    dropped = getattr(processor, "dropped_bytes", {}).get(key, 0)
    if dropped:
      summary += f", {dropped} byte(s) that are not UTF-8 dropped (as the original did)"
    self.summary.append(summary)
    self.sentence_pair = examples[0].text_b is not None
    if self.sentence_pair:
      self.check_segments(2, f"The sentence pairs of {self.name}")
    self.examples[split] = examples
    return examples

  def validate(self, modes, init_checkpoint=None, **paths):
    super().validate(modes, init_checkpoint, **paths)
    if self.glue_name == "AX" and (modes.train or modes.eval):
      raise ValueError("AX has only a test set, predicted with an MNLI model: run do_predict "
                       "with the output_dir of an MNLI run.")
    if not self.is_regression and len(self.label_list) < 2:
      raise ValueError(f"The training data has only the label(s) {self.label_list}; a "
                       "classifier needs two or more (or is_regression for numeric targets).")
    self._eval_splits, self._predict_splits = _splits(self.processor, self.glue_name)
    self._splits = {split.name: split for split in self._eval_splits + self._predict_splits}
    if modes.train:
      self._read("train")
    for split in self._eval_splits if modes.eval else []:
      self._check_labels(split.name, self._read(split.name))
    for split in self._predict_splits if modes.predict else []:
      self._read(split.name)

  def _check_labels(self, split, examples):
    if self.is_regression:
      return
    known = set(self.label_list)
    unknown = sorted({str(e.label) for e in examples if e.label not in known})
    if unknown:
      raise ValueError(f"The {split} split has label(s) {unknown} that the task's labels "
                       f"{self.label_list} do not include.")

  def build_model(self):
    return BertClassifier(self.bert_config, 1 if self.is_regression else len(self.label_list),
                          kernels=self.kernels)

  def loss(self, outputs, labels):
    return classification_loss(self.is_regression)(outputs, labels)

  def metrics(self, outputs, labels):
    return {} if self.is_regression else classification_metrics(outputs, labels)

  def untrained(self, output_dir):
    if self.glue_name == "AX":
      raise ValueError(f"{output_dir} holds no fine-tuned checkpoint: AX is predicted with an "
                       "MNLI model, so give the output_dir of an MNLI run.")
    super().untrained(output_dir)

  def num_train_examples(self):
    return len(self.examples["train"])

  def eval_splits(self):
    return [(split.name, f"eval{split.suffix}") for split in self._eval_splits]

  def predict_splits(self):
    return [split.name for split in self._predict_splits]

  def build_inputs(self, split, output_dir, seed=None):
    """Writes the split's features to `<mode><suffix>.tf_record` in `output_dir` (as the
    original: `train.tf_record`, `eval.tf_record`, `predict.tf_record`) and reads them."""
    if split == "train":
      path, is_training = os.path.join(output_dir, "train.tf_record"), True
    else:
      mode = "eval" if split in dict(self.eval_splits()) else "predict"
      path = os.path.join(output_dir, f"{mode}{self._splits[split].suffix}.tf_record")
      is_training, seed = False, None
    classifier_features.file_based_convert_examples_to_features(
        self.examples[split], self.label_list, self.config.max_seq_length, self.tokenizer, path,
        self.is_regression)
    return _input_fn(path, self.config.max_seq_length, is_training, self.is_regression, seed=seed,
                     for_predict=not is_training)

  def postprocess(self, split, outputs, output_dir):
    """Scores an evaluation split; writes a prediction split's `test_results<suffix>.tsv` and
    submission file."""
    real = outputs["is_real_example"] > 0
    logits = outputs["logits"][real].astype(np.float64)
    if split in dict(self.eval_splits()):
      return score_predictions(self.glue_name, logits, outputs["label_ids"][real],
                               self.is_regression), []
    return None, _write_predictions(output_dir, self._splits[split], self.examples[split],
                                    logits, self.label_list, self.is_regression)

  def model_folder_fields(self):
    return {"labels": None if self.is_regression else self.label_list,
            "is_regression": self.is_regression,
            "extra": {"sentence_pair": self.sentence_pair}}
