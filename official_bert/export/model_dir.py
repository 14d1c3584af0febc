"""The fine-tuned model folder: what a fine-tuning script leaves behind, and loading it back.

A fine-tuned folder holds, beside whatever training wrote there (checkpoints, `eval_results.txt`):

    bert_config.json     the encoder's shape, in the original format
    vocab.txt            the WordPiece vocabulary the model was trained with (a copy)
    model.weights.h5     Keras weights of the whole task model, encoder and head
                         (`encoder.weights.h5` for task "encoder", the converted-folder name)
    task.json            the task and how to feed it; written last, so it marks a complete folder

`task.json` holds `task` (one of `TASKS`), `max_seq_length`, `do_lower_case`, and as the task needs
them `num_classes` with optional `labels` (label names by id), `num_choices`, and `extra` (free-form
JSON; the exports read `sentence_pair` for classification and `max_query_length`,
`max_answer_length` for span). A pre-trained folder (a converted one with `encoder.weights.h5`, an
original TF1 `bert_model.ckpt` or a Hugging Face folder, each with its `vocab.txt`) loads as task
"encoder".
"""

import dataclasses
import json
import os
import shutil
import tempfile

from absl import logging

from official_bert import checkpoints
from official_bert.configs import BertConfig
from official_bert.models import (
  BertClassifier,
  BertMultipleChoice,
  BertSpanLabeler,
  BertTokenClassifier,
)
from official_bert.networks import BertEncoder
from official_bert.tokenization import load_vocab

TASK_FILE = "task.json"
WEIGHTS_FILE = "model.weights.h5"
CONFIG_FILE = checkpoints.CONFIG_NAME
VOCAB_FILE = checkpoints.VOCAB_NAME
TASKS = ("classification", "regression", "span", "multiple_choice", "token_classification",
         "encoder")
_MODEL_CLASSES = {
    "classification": BertClassifier,
    "regression": BertClassifier,
    "span": BertSpanLabeler,
    "multiple_choice": BertMultipleChoice,
    "token_classification": BertTokenClassifier,
    "encoder": BertEncoder,
}


@dataclasses.dataclass(frozen=True)
class TaskInfo:
  """How a saved model is fed and what its outputs mean (the content of `task.json`).

  Args:
    task: one of `TASKS`.
    config: the encoder's `BertConfig`.
    vocab_file: path of the folder's `vocab.txt`.
    do_lower_case: whether text is lower-cased; None when a pre-trained folder does not say.
    max_seq_length: the sequence length of training; None for a pre-trained folder.
    num_classes: classes of a classifier (1 for regression) or tags of a token classifier.
    labels: optional label names, indexed by class id.
    num_choices: candidates per question of a multiple-choice model.
    extra: task-specific settings, e.g. `{"sentence_pair": True}`.
  """

  task: str
  config: BertConfig
  vocab_file: str
  do_lower_case: bool | None = None
  max_seq_length: int | None = None
  num_classes: int | None = None
  labels: tuple[str, ...] | None = None
  num_choices: int | None = None
  extra: dict = dataclasses.field(default_factory=dict)

  def to_json_dict(self):
    """The `task.json` content (the config and vocabulary live in files of their own)."""
    values = {"task": self.task, "max_seq_length": self.max_seq_length,
              "do_lower_case": self.do_lower_case}
    for name in ("num_classes", "num_choices"):
      if getattr(self, name) is not None:
        values[name] = getattr(self, name)
    if self.labels is not None:
      values["labels"] = list(self.labels)
    values["extra"] = dict(self.extra)
    return values


def _task_fields(model, task):
  """Checks that `model` fits `task`; returns its `num_classes` and `num_choices`."""
  expected = _MODEL_CLASSES[task]
  if task == "encoder" and not isinstance(model, BertEncoder):
    model = getattr(model, "encoder", model)
  if not isinstance(model, expected):
    raise TypeError(f"Task {task!r} needs a {expected.__name__}, got {type(model).__name__}.")
  num_classes = getattr(model, "num_classes", None)
  if task == "regression" and num_classes != 1:
    raise ValueError(f"Task 'regression' needs a BertClassifier with num_classes=1, got "
                     f"{num_classes}.")
  if task == "classification" and num_classes < 2:
    raise ValueError("Task 'classification' needs num_classes >= 2; use task 'regression' for a "
                     "one-output BertClassifier.")
  return model, num_classes, getattr(model, "num_choices", None)


def _check_vocab(vocab_file, config):
  size = len(load_vocab(vocab_file))
  if size > config.vocab_size:
    raise ValueError(f"{vocab_file} has {size} tokens but the model's vocab_size is "
                     f"{config.vocab_size}: it is not the vocabulary of this model.")


def save_task_model(model, output_dir, *, task, vocab_file, do_lower_case, max_seq_length,
                    labels=None, extra=None):
  """Writes a fine-tuned model folder (see the module docstring for its files).

  The files are written in a temporary folder inside `output_dir` and moved into place with
  `task.json` last; an earlier `task.json` is removed first, so an interrupted save never leaves a
  folder that looks complete with mismatched files.

  Args:
    model: the trained task model (`BertClassifier`, `BertSpanLabeler`, `BertMultipleChoice`,
      `BertTokenClassifier`), or a `BertEncoder` (or any of them) for task "encoder".
    output_dir: the folder; created if needed. Other files in it are left alone.
    task: one of `TASKS`.
    vocab_file: the `vocab.txt` the model was trained with; copied in.
    do_lower_case: whether the text was lower-cased.
    max_seq_length: the sequence length used in training.
    labels: optional label names in class-id order (classification, token classification).
    extra: optional JSON-serialisable dict of task settings.

  Returns:
    `output_dir`.

  Example:

    save_task_model(classifier, "/tmp/mrpc_output", task="classification",
                    vocab_file="vocab.txt", do_lower_case=True, max_seq_length=128,
                    labels=["0", "1"], extra={"sentence_pair": True})
    model, info = load_task_model("/tmp/mrpc_output")
  """
  if task not in TASKS:
    raise ValueError(f"task must be one of {TASKS}, got {task!r}.")
  model, num_classes, num_choices = _task_fields(model, task)
  if labels is not None:
    labels = tuple(str(label) for label in labels)
    if len(labels) != num_classes:
      raise ValueError(f"{len(labels)} labels given for a model with {num_classes} classes.")
  vocab_file = os.fspath(vocab_file)
  _check_vocab(vocab_file, model.config)
  info = TaskInfo(task=task, config=model.config, vocab_file=vocab_file,
                  do_lower_case=bool(do_lower_case), max_seq_length=int(max_seq_length),
                  num_classes=num_classes, labels=labels, num_choices=num_choices,
                  extra=dict(extra or {}))
  task_json = json.dumps(info.to_json_dict(), indent=2, sort_keys=True) + "\n"

  output_dir = os.fspath(output_dir)
  os.makedirs(output_dir, exist_ok=True)
  weights_name = checkpoints.ENCODER_WEIGHTS if task == "encoder" else WEIGHTS_FILE
  staging = tempfile.mkdtemp(prefix=".tmp-task-model-", dir=output_dir)
  try:
    model.save_weights(os.path.join(staging, weights_name))
    vocab_copy = os.path.join(output_dir, VOCAB_FILE)
    if not (os.path.exists(vocab_copy) and os.path.samefile(vocab_file, vocab_copy)):
      shutil.copyfile(vocab_file, os.path.join(staging, VOCAB_FILE))
    model.config.to_json_file(os.path.join(staging, CONFIG_FILE))
    with open(os.path.join(staging, TASK_FILE), "w", encoding="utf-8") as f:
      f.write(task_json)
    if os.path.exists(os.path.join(output_dir, TASK_FILE)):
      os.remove(os.path.join(output_dir, TASK_FILE))
    for name in (weights_name, VOCAB_FILE, CONFIG_FILE, TASK_FILE):
      if os.path.exists(os.path.join(staging, name)):
        os.replace(os.path.join(staging, name), os.path.join(output_dir, name))
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  logging.info("Saved the %s model (%s) to %s.", task, type(model).__name__, output_dir)
  return output_dir


def _field(values, name, kinds, path, required=True):
  value = values.get(name)
  if value is None and not required:
    return None
  if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
    raise ValueError(f"{path}: field {name!r} must be {' or '.join(k.__name__ for k in kinds)}, "
                     f"got {value!r}.")
  return value


def _read_task_file(output_dir):
  path = os.path.join(output_dir, TASK_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      values = json.load(f)
  except json.JSONDecodeError as error:
    raise ValueError(f"{path}: not valid JSON at line {error.lineno}, column {error.colno}: "
                     f"{error.msg}.") from None
  if not isinstance(values, dict):
    raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}.")
  task = _field(values, "task", (str,), path)
  if task not in TASKS:
    raise ValueError(f"{path}: field 'task' must be one of {TASKS}, got {task!r}.")
  labels = _field(values, "labels", (list,), path, required=False)
  return TaskInfo(
      task=task,
      config=BertConfig.from_json_file(os.path.join(output_dir, CONFIG_FILE)),
      vocab_file=os.path.join(output_dir, VOCAB_FILE),
      do_lower_case=_field(values, "do_lower_case", (bool,), path),
      max_seq_length=_field(values, "max_seq_length", (int,), path),
      num_classes=_field(values, "num_classes", (int,), path,
                         required=task not in ("span", "multiple_choice", "encoder")),
      labels=None if labels is None else tuple(str(label) for label in labels),
      num_choices=_field(values, "num_choices", (int,), path,
                         required=task == "multiple_choice"),
      extra=_field(values, "extra", (dict,), path, required=False) or {})


def _build_model(info):
  if info.task in ("classification", "regression", "token_classification"):
    return _MODEL_CLASSES[info.task](info.config, num_classes=info.num_classes)
  if info.task == "multiple_choice":
    return BertMultipleChoice(info.config, num_choices=info.num_choices)
  return BertSpanLabeler(info.config)


def load_task_model(output_dir):
  """Rebuilds the model of a fine-tuned folder, or the encoder of a pre-trained one.

  Args:
    output_dir: a folder written by `save_task_model`, or a pre-trained folder (converted,
      original TF1 or Hugging Face) with its `vocab.txt`, which loads as task "encoder" with
      `do_lower_case` and `max_seq_length` unknown (None).

  Returns:
    `(model, task_info)`: the Keras model with its trained weights and a `TaskInfo`.
  """
  output_dir = os.fspath(output_dir)
  if not os.path.exists(os.path.join(output_dir, TASK_FILE)):
    vocab_file = os.path.join(output_dir, VOCAB_FILE)
    try:
      encoder = checkpoints.load_encoder(output_dir)
    except FileNotFoundError as error:
      raise FileNotFoundError(f"{output_dir} has no {TASK_FILE} (not a fine-tuned folder) and "
                              f"is no pre-trained folder either: {error}") from None
    if not os.path.exists(vocab_file):
      raise FileNotFoundError(f"{output_dir} holds a pre-trained encoder but no {VOCAB_FILE}.")
    logging.info("%s has no %s: loaded its pre-trained encoder.", output_dir, TASK_FILE)
    return encoder, TaskInfo(task="encoder", config=encoder.config, vocab_file=vocab_file)

  info = _read_task_file(output_dir)
  if info.task == "encoder":
    model = checkpoints.load_encoder(output_dir)
  else:
    weights_file = os.path.join(output_dir, WEIGHTS_FILE)
    if not os.path.exists(weights_file):
      raise FileNotFoundError(f"{output_dir} has a {TASK_FILE} but no {WEIGHTS_FILE}.")
    model = _build_model(info)
    model.load_weights(weights_file)
  logging.info("Loaded the %s model of %s.", info.task, output_dir)
  return model, info
