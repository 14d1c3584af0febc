"""Token classification (named-entity recognition): the library side of `run_ner.py`.

`NerTask` reads CoNLL-style files with `official_bert.data.conll` (one token a line, the tag in
the last column, a blank line between sentences), fine-tunes a `BertTokenClassifier` and writes:

* `labels.txt`: the tags of the training file, one a line in label-id order (`O` first), so that
  evaluation and prediction runs on the same `output_dir` need no training file (without one,
  they take the labels of the training file); a tag of the evaluated or predicted file that the
  labels lack stops the run before training;
* `eval_results.txt`: entity-level `eval_precision`, `eval_recall`, `eval_f1` (the CoNLL
  definition, `official_bert.evaluation.ner_metrics`), the same per entity type
  (`eval_<type>/f1`, ...), `eval_token_accuracy`, `eval_loss` and `global_step`;
* `eval_predictions.txt` and `test_predictions.txt`: the evaluated and predicted files back in
  CoNLL format, one line `token [gold] predicted` per original word;
* the fine-tuned model folder (task `token_classification`, with the tag names), and with
  `export_dir` a SavedModel.

Each word's tag is learned and predicted on its first WordPiece; the other pieces, `[CLS]`,
`[SEP]` and padding carry label id -1 and count neither in the loss nor in the scores. Sentences
longer than `max_seq_length` pieces are split between words and joined back.
"""

import os

from absl import logging
import tensorflow as tf

from official_bert.common import file_io
from official_bert.data import conll
from official_bert.data.indexed_batches import in_memory_input_fn
from official_bert.evaluation import ner_metrics
from official_bert.models import BertTokenClassifier
from official_bert.tasks import base, experiment

LABELS_FILE = "labels.txt"
EVAL_PREDICTIONS = "eval_predictions.txt"
TEST_PREDICTIONS = "test_predictions.txt"
_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


def token_classification_loss(outputs, labels):
  """Cross-entropy over the positions with a label (first pieces), averaged over them.

  Args:
    outputs: `BertTokenClassifier` outputs, `logits` `[batch, seq, num_labels]`.
    labels: int `[batch, seq]` label ids, -1 where nothing is learned.

  Returns:
    `{"loss": scalar}`; 0 for a batch without any labelled position.
  """
  labels = tf.cast(labels, tf.int32)
  weights = tf.cast(labels >= 0, tf.float32)
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.maximum(labels, 0), tf.cast(outputs["logits"], tf.float32))
  return {"loss": tf.math.divide_no_nan(tf.reduce_sum(per_position * weights),
                                        tf.reduce_sum(weights))}


def token_classification_metrics(outputs, labels):
  """Accuracy of the tags on the first pieces of a batch, for the training logs.

  Args:
    outputs: `BertTokenClassifier` outputs, `logits` `[batch, seq, num_labels]`.
    labels: int `[batch, seq]` label ids, -1 where nothing is predicted.

  Returns:
    `{"token_accuracy": (correct, count)}`.
  """
  labels = tf.cast(labels, tf.int32)
  weights = tf.cast(labels >= 0, tf.float32)
  predictions = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
  correct = tf.cast(tf.equal(predictions, labels), tf.float32) * weights
  return {"token_accuracy": (tf.reduce_sum(correct), tf.reduce_sum(weights))}


def write_labels(path, labels):
  """Writes `labels.txt` atomically.

  Args:
    path: the file.
    labels: the tags in label-id order, written one a line.
  """
  file_io.write_text(path, "".join(f"{label}\n" for label in labels))


def read_labels(path):
  """Reads `labels.txt`.

  Args:
    path: the file, one tag a line in label-id order.

  Returns:
    The list of tags.

  Raises:
    ValueError: naming the line of a blank, padded or repeated tag, or an empty file.
  """
  with tf.io.gfile.GFile(path) as f:
    labels = [line.rstrip("\n") for line in f]
  for line_number, label in enumerate(labels, start=1):
    if not label.strip() or label != label.strip():
      raise ValueError(f"{path}:{line_number}: expected a tag without spaces, got {label!r}")
    if labels.index(label) != line_number - 1:
      raise ValueError(f"{path}:{line_number}: the tag {label!r} is listed twice")
  if not labels:
    raise ValueError(f"{path} is empty; it should list the tags of the training data")
  return labels


def _split_file(split, data_dir, path):
  """The file of `split`: `path` when given, else `conll.find_split_file` in `data_dir`."""
  if path:
    return path
  if not data_dir:
    raise ValueError(f"Give data_dir or the {split} file.")
  return conll.find_split_file(data_dir, _SPLITS[split])


def _labels(output_dir, train_sentences, train_path):
  """The label list: that of the training sentences (checked against an earlier run's), else the
  one `labels.txt` of `output_dir` (if given) records, else that of the training file
  `train_path`."""
  path = os.path.join(output_dir or "<output_dir>", LABELS_FILE)
  saved = read_labels(path) if output_dir and tf.io.gfile.exists(path) else None
  if train_sentences is None and saved is not None:
    return saved
  if train_sentences is None:
    if train_path is None:
      raise FileNotFoundError(f"{path} is missing and there is no training file: evaluation and "
                              "prediction use the labels of the training data (run do_train "
                              "first in this output_dir, or give train_file or data_dir).")
    logging.info("No %s yet: the labels are those of %s.", path, train_path)
    return conll.get_label_list(conll.read_conll_file(train_path))
  labels = conll.get_label_list(train_sentences)
  if saved is not None and saved != labels:
    raise ValueError(f"{path} lists the labels {saved} of an earlier run, but {train_path} has "
                     f"{labels}; use a new output_dir for other data.")
  return labels


def _train_file_if_any(data_dir, train_file):
  """The training file when one is given or `data_dir` holds one, else None."""
  if train_file or not data_dir:
    return train_file
  try:
    return conll.find_split_file(data_dir, "train")
  except FileNotFoundError:
    return None


def _input_fn(features, is_training, seed=None):
  """An input function over token-classification features (`Task.build_inputs`)."""
  return in_memory_input_fn(
      lambda batch_size: conll.make_dataset(features, batch_size, is_training=is_training,
                                            seed=seed).map(
          lambda inputs, label_ids, label_mask: (inputs, label_ids)))


def score_predictions(sentences, predicted_tags, features, logits):
  """Entity-level scores (overall and per type), token accuracy and loss of an evaluation set.

  Args:
    sentences: the tagged `TaggedSentence`s.
    predicted_tags: one list of tags per sentence.
    features: the features the logits were computed on.
    logits: float `[num_features, seq, num_labels]`.

  Returns:
    `(metrics, report)`: a flat dict of floats (`precision`, `recall`, `f1`, `token_accuracy`,
    `<type>/precision`, ..., `loss`) and the `ner_metrics.NerReport`.
  """
  report = ner_metrics.evaluate([s.tags for s in sentences], predicted_tags)
  loss = token_classification_loss({"logits": logits}, features.label_ids)["loss"]
  return dict(report.to_dict(), loss=float(loss)), report


@base.register(experiment.NerConfig)
class NerTask(base.Task):
  """Named-entity recognition (token classification) on CoNLL-style files.

  Args:
    config: the task's settings, a `NerConfig` (where the splits are).
    bert_config: the encoder's `BertConfig`.

  The `labels.txt` of the run's output folder, written by a training run, gives the labels of
  a run that does not train, and must match the training file's when training resumes.

  Example:

    model = "cased_L-12_H-768_A-12"
    config = ExperimentConfig(
        task=NerConfig(vocab_file=f"{model}/vocab.txt", do_lower_case=False,
                       data_dir="conll2003"),
        model=BertConfig.from_json_file(f"{model}/bert_config.json"),
        output_dir="/tmp/ner_output", init_checkpoint=model)
    driver.run_experiment(config, Modes(train=True, eval=True))
  """

  name = "NER"

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    self.paths = {"train": self.config.train_file, "eval": self.config.eval_file,
                  "predict": self.config.predict_file}
    self.files, self.sentences, self.features = {}, {}, {}
    self.labels = None

  def validate(self, modes, init_checkpoint=None, *, output_dir=None, **paths):
    """Reads every split the run needs and the labels (those of `output_dir`'s `labels.txt`
    when there is one); checks every tag against the labels."""
    super().validate(modes, init_checkpoint, **paths)
    self.files = {split: _split_file(split, self.config.data_dir, self.paths[split])
                  for split in modes.names()}
    self.sentences = {split: conll.read_conll_file(path) for split, path in self.files.items()}
    self.train_files = [self.files["train"]] if "train" in self.files else []
    if modes.eval and self.sentences["eval"][0].tags is None:
      raise ValueError(f"{self.files['eval']} has no tag column; evaluation needs gold tags.")
    self.labels = _labels(output_dir, self.sentences.get("train"),
                          self.files.get("train") or _train_file_if_any(self.config.data_dir,
                                                                        self.paths["train"]))
    for sentences in self.sentences.values():
      conll.check_tags(sentences, self.labels)
    self.summary.append(f"{len(self.labels)} labels")
    for split, sentences in self.sentences.items():
      self.features[split] = features = conll.convert_sentences_to_features(
          sentences, self.labels, self.tokenizer, self.config.max_seq_length)
      self.summary.append(f"{split}: {len(sentences)} sentences from {self.files[split]} "
                          f"({features.num_split_sentences} split, "
                          f"{features.num_truncated_words} words truncated)")

  def build_model(self):
    return BertTokenClassifier(self.bert_config, num_classes=len(self.labels),
                               kernels=self.kernels)

  def loss(self, outputs, labels):
    return token_classification_loss(outputs, labels)

  def metrics(self, outputs, labels):
    return token_classification_metrics(outputs, labels)

  def num_train_examples(self):
    return len(self.features["train"])

  def build_inputs(self, split, output_dir, seed=None):
    """The split's features; training writes `labels.txt` into `output_dir` first."""
    if split == "train":
      write_labels(os.path.join(output_dir, LABELS_FILE), self.labels)
    return _input_fn(self.features[split], is_training=split == "train",
                     seed=seed if split == "train" else None)

  def postprocess(self, split, outputs, output_dir):
    """Scores the evaluation file into `eval_predictions.txt`, or tags the predicted file into
    `test_predictions.txt`."""
    features, sentences = self.features[split], self.sentences[split]
    logits = outputs["logits"]
    tags = conll.predictions_to_tags(features, logits, sentences, self.labels)
    if split == "predict":
      path = os.path.join(output_dir, TEST_PREDICTIONS)
      conll.write_predictions(path, sentences, tags)
      return None, [path]
    metrics, report = score_predictions(sentences, tags, features, logits)
    logging.info("Entity-level scores on %s:\n%s", self.files["eval"], report.format())
    path = os.path.join(output_dir, EVAL_PREDICTIONS)
    conll.write_predictions(path, sentences, tags)
    self.summary.append(f"eval predictions in {path}")
    return metrics, []

  def model_folder_fields(self):
    return {"labels": self.labels}
