"""Multiple choice (SWAG): the library side of `run_swag.py`.

`SwagTask` reads SWAG files (the CSV files `train.csv`, `val.csv`, `test.csv` of the release, or
JSON lines) with `official_bert.data.swag`, fine-tunes a `BertMultipleChoice` and writes:

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

import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.data import swag
from official_bert.data.indexed_batches import in_memory_input_fn
from official_bert.models import BertMultipleChoice
from official_bert.tasks import base, experiment

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

  Example:

  >>> scores = score_predictions(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([0, 0]))
  >>> scores["accuracy"], round(scores["loss"], 3)
  (0.5, 0.72)
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
  file_io.write_text(results, "".join(
      "\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
  lines = []
  for example_id, label, row in zip(features.example_ids, features.labels, probabilities):
    record = {"example_id": example_id, "prediction": int(np.argmax(row)),
              "probabilities": [round(float(p), 6) for p in row]}
    if label != swag.NO_LABEL:
      record["label"] = int(label)
    lines.append(json.dumps(record) + "\n")
  predictions = os.path.join(output_dir, TEST_PREDICTIONS)
  file_io.write_text(predictions, "".join(lines))
  return [results, predictions]


def _split_file(split, data_dir, path):
  """The file of `split`: `path` when given, else the one file of `SPLIT_FILES` in `data_dir`."""
  if path:
    return path
  if not data_dir:
    raise ValueError(f"Give data_dir or the {split} file.")
  found = [os.path.join(data_dir, name) for name in SPLIT_FILES[split]
           if file_io.is_file(os.path.join(data_dir, name))]
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
  """An input function over packed features (`Task.build_inputs`)."""
  return in_memory_input_fn(
      lambda batch_size: swag.make_dataset(features, batch_size, is_training=is_training,
                                           seed=seed))


@base.register(experiment.SwagConfig)
class SwagTask(base.Task):
  """Multiple choice on SWAG-format data: which ending follows a context.

  Args:
    config: the task's settings, a `SwagConfig` (where the splits are).
    bert_config: the encoder's `BertConfig`.

  Example:

    model = "uncased_L-12_H-768_A-12"
    config = ExperimentConfig(
        task=SwagConfig(vocab_file=f"{model}/vocab.txt", data_dir="swagaf/data"),
        trainer=TrainerConfig(optimizer=OptimizerConfig(learning_rate=2e-5)),
        model=BertConfig.from_json_file(f"{model}/bert_config.json"),
        output_dir="/tmp/swag_output", init_checkpoint=model)
    driver.run_experiment(config, Modes(train=True, eval=True))
  """

  name = "SWAG"

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    self.paths = {"train": self.config.train_file, "eval": self.config.eval_file,
                  "predict": self.config.predict_file}
    self.features = {}
    self.num_choices = None

  def validate(self, modes, init_checkpoint=None, **paths):
    """Reads and packs every split the run needs; checks labels and the number of endings."""
    super().validate(modes, init_checkpoint, **paths)
    self.check_segments(2, "The (context, ending) pairs of multiple choice")
    files = {split: _split_file(split, self.config.data_dir, self.paths[split])
             for split in modes.names()}
    for split, path in files.items():
      examples = _read(path, require_labels=split != "predict")
      self.features[split] = swag.convert_examples_to_features(examples, self.tokenizer,
                                                               self.config.max_seq_length)
      self.summary.append(f"{split}: {len(examples)} examples from {path}, "
                          f"{self.features[split].num_truncated_choices} choices truncated")
    self.train_files = [files["train"]] if "train" in files else []
    num_choices = {f.input_word_ids.shape[1] for f in self.features.values()}
    if len(num_choices) > 1:
      raise ValueError(f"The files have different numbers of endings {sorted(num_choices)}: "
                       f"{files}.")
    self.num_choices = num_choices.pop()
    self.summary.insert(0, f"{self.num_choices} choices")

  def build_model(self):
    return BertMultipleChoice(self.bert_config, num_choices=self.num_choices,
                              kernels=self.kernels)

  def loss(self, outputs, labels):
    return multiple_choice_loss(outputs, labels)

  def metrics(self, outputs, labels):
    return multiple_choice_metrics(outputs, labels)

  def num_train_examples(self):
    return len(self.features["train"])

  def build_inputs(self, split, output_dir, seed=None):
    del output_dir  # the features are held in memory
    is_training = split == "train"
    return _input_fn(self.features[split], is_training, seed=seed if is_training else None)

  def postprocess(self, split, outputs, output_dir):
    """Scores the evaluation file, or writes the predicted one's `test_results.tsv` and
    `test_predictions.jsonl`."""
    features = self.features[split]
    if split == "eval":
      return score_predictions(outputs["logits"], features.labels), []
    return None, write_predictions(output_dir, features, outputs["logits"])
