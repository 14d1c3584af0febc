"""The `Task` protocol: what a task says about itself, so that one driver runs every task.

A task owns its data, its model and its outputs: how to read its splits and build their inputs,
its model, its loss and training metrics, how to turn a split's outputs into results and files.
The driver (`official_bert.tasks.driver`) owns the order, the engine, the batch sizes, the seed,
the paths and the checkpoints, the same for every task under every strategy: validate -> train
-> evaluate -> predict -> save -> export. The driver calls the task's hooks, each with what it
needs (a split, model outputs, the run's `Runner` to evaluate or predict a split with).

A new task is one module with one `Task` subclass, constructed from its config (an
`experiment.TaskConfig`, or a subclass with the task's own settings, the task registered for it
with `register`) and the model's `BertConfig`. The smallest useful one:

>>> import tensorflow as tf
>>> from official_bert import BertClassifier, BertConfig
>>> from official_bert.tasks.experiment import TaskConfig
>>> class ConstantTask(Task):
...   name = "constant"
...
...   def build_model(self):
...     return BertClassifier(self.bert_config, num_classes=2, kernels=self.kernels)
...
...   def loss(self, outputs, labels):
...     return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
...         labels, outputs["logits"]))}
>>> model = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
...                    intermediate_size=16, max_position_embeddings=16)
>>> ConstantTask(TaskConfig(max_seq_length=16), model).validate(Modes(eval=True))
>>> too_long = ConstantTask(TaskConfig(max_seq_length=32), model)
>>> too_long.validate(Modes(eval=True))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Cannot use sequence length 32 because ... up to sequence length 16 (...).
"""

import abc
import dataclasses
import os

from absl import logging

from official_bert import export, tokenization
from official_bert.checkpoints import save_model_dir
from official_bert.common.errors import UserError
from official_bert.tasks import experiment, output_folder


@dataclasses.dataclass(frozen=True)
class Modes:
  """What a run does: train, evaluate and/or predict (the original `--do_*` flags).

  Args:
    train: fine-tune (or pre-train), resuming from the output folder.
    eval: score the evaluation split(s) into `eval_results.txt`.
    predict: write predictions for the prediction split(s).
  """

  train: bool = False
  eval: bool = False
  predict: bool = False

  def __post_init__(self):
    if not (self.train or self.eval or self.predict):
      raise ValueError("At least one of do_train, do_eval or do_predict must be True.")

  def names(self):
    """The modes that are on, e.g. `["train", "eval"]`."""
    return [name for name in ("train", "eval", "predict") if getattr(self, name)]


_TASKS = {}


def register(config_class):
  """A class decorator: the decorated `Task` runs the configs of `config_class`.

  Sets the task's `config_class`; `task_class(config)` finds the task of a config, which is how
  `driver.build_task` turns an `ExperimentConfig` (or an `experiment_config.json`) into its task.

  Args:
    config_class: the task's `experiment.TaskConfig` subclass (its own; a config class runs one
      task).
  """
  def decorate(cls):
    if _TASKS.get(config_class, cls) is not cls:
      raise ValueError(f"{config_class.__name__} is already run by "
                       f"{_TASKS[config_class].__name__}.")
    cls.config_class = config_class
    _TASKS[config_class] = cls
    return cls
  return decorate


def task_class(config):
  """The `Task` class registered for the class of the task config `config` (see `register`)."""
  if type(config) not in _TASKS:
    raise ValueError(f"No task is registered for {type(config).__name__}: decorate your Task "
                     "with base.register(YourConfig), or build it yourself and call "
                     "driver.run(task, config, modes).")
  return _TASKS[type(config)]


class Task(abc.ABC):
  """One BERT task, as `driver.run` runs it.

  A task is built from its config and reads its settings there: `config` is an instance of the
  task's `config_class` (`experiment.TaskConfig` or the subclass the task is registered for,
  `register`), where each setting is declared once, with its meaning.

  Subclasses set `name`, implement `build_model` and `loss`, and override the hooks their task
  has:

  * `validate`: read and check every split the run needs, before any training; sets
    `train_files` (part of the output folder's `fingerprint`);
  * `num_train_examples` and `build_inputs(split, ...)`: the splits' inputs (`"train"`, the
    names of `eval_splits()` and `predict_splits()`);
  * `metrics`: training metrics; `postprocess`: a split's model outputs -> results and files;
  * `evaluate_split` and `predict_split`: how a split is evaluated or predicted; by default the
    model's outputs over the whole split go to `postprocess`;
  * `model_folder_fields` and `save`: what the saved model folder records.

  `supported_modes` lists the modes a task has (feature extraction only predicts); `resumes`
  says whether a run continues from the newest checkpoint in `output_dir` (False for a task that
  only runs a pre-trained model, which then always starts from `init_checkpoint`, owns nothing in
  its output folder and never reads checkpoints that happen to lie there).

  Args:
    config: the task's config, an instance of its `config_class`; by default that class's
      defaults.
    bert_config: the encoder's `BertConfig`.

  Attributes:
    config: the task's config; the run's `ExperimentConfig.task` is this one.
    summary: lines describing the data read (counts, skipped rows), logged at the end.
    train_files: the training data's files (or data set names), set by `validate`; they are part
      of the run's `fingerprint`.
    kernels: the kernels of the models `build_model` builds and of the loss and metrics
      (`official_bert.ops.CHOICES`): `auto` until the driver hands the task the engine's choice
      for its device, dtype and XLA.
  """

  name = "task"
  kernels = "auto"
  supported_modes = ("train", "eval", "predict")
  resumes = True
  config_class = experiment.TaskConfig
  # Features that prediction returns beside the model's outputs (ids, weights, labels).
  output_features = ()

  def __init__(self, config=None, bert_config=None):
    config = self.config_class() if config is None else config
    if not isinstance(config, self.config_class):
      raise TypeError(f"{type(self).__name__} reads a {self.config_class.__name__}, not a "
                      f"{type(config).__name__}.")
    self.config = config
    self.bert_config = bert_config
    self.summary = []
    self.train_files = []
    self._tokenizer = None

  @property
  def tokenizer(self):
    """The `FullTokenizer` of `vocab_file`, checked to fit the model's vocabulary."""
    if self._tokenizer is None:
      self._tokenizer = tokenization.model_tokenizer(
          self.config.vocab_file, self.config.do_lower_case, self.bert_config.vocab_size)
    return self._tokenizer

  # === Before any work ===

  def validate(self, modes, init_checkpoint=None, *, output_dir=None, export_dir=None,
               export_format="saved_model"):
    """Checks everything that can be checked before training; reads what the run needs.

    Subclasses call this first, then read and check their splits, so that a bad dev file or an
    unknown label stops the run before training rather than after it.

    Args:
      modes: the run's `Modes`.
      init_checkpoint: the starting checkpoint as the driver located and checked it
        (`checkpoints.check_init_checkpoint`; a path works too), or None; checked against
        `do_lower_case` when it names the casing of a released model.
      output_dir: the run's output folder (what an earlier run left there may matter).
      export_dir: where the run exports, or None.
      export_format: the export's format (`ExperimentConfig.export_format`).
    """
    del output_dir, export_dir, export_format  # for the tasks that read them
    unsupported = [mode for mode in modes.names() if mode not in self.supported_modes]
    if unsupported:
      raise ValueError(f"The {self.name} task cannot {' or '.join(unsupported)}: it supports "
                       f"{', '.join(self.supported_modes)}.")
    if self.config.max_seq_length > self.bert_config.max_position_embeddings:
      raise ValueError(f"Cannot use sequence length {self.config.max_seq_length} because the "
                       "BERT model was only trained up to sequence length "
                       f"{self.bert_config.max_position_embeddings} (max_position_embeddings).")
    if self.config.do_lower_case is not None and init_checkpoint:
      tokenization.validate_case_matches_checkpoint(self.config.do_lower_case,
                                                    os.fspath(init_checkpoint))
    if self.config.vocab_file:
      _ = self.tokenizer  # loads and checks the vocabulary now, not after training

  def check_segments(self, num_segments, what):
    """Refuses inputs with more segments than the model has type ids.

    The segment (type) ids index the type embedding; XLA's gather clamps an id past the table
    instead of failing, so a sentence-pair task on a model with `type_vocab_size: 1` would train
    without an error, and wrongly.

    Args:
      num_segments: the segments the task packs (2 for a sentence pair: type ids 0 and 1).
      what: what the inputs are, for the message (e.g. `MRPC sentence pairs`).
    """
    type_vocab_size = self.bert_config.type_vocab_size
    if num_segments > type_vocab_size:
      raise UserError(f"{what} need type ids 0 to {num_segments - 1}, but the model's "
                      f"type_vocab_size is {type_vocab_size}: use a model (bert_config.json) with "
                      f"type_vocab_size >= {num_segments}.")

  def fingerprint(self):
    """What the task's data adds to the output folder's fingerprint (see `tasks.output_folder`;
    the run's config gives the rest: `experiment.fingerprint`).

    Called after `validate`. Subclasses extend the parts with what their data decides.

    Returns:
      `{"model": ..., "training": ...}` of JSON values: the model part (task kind, the saved
      folder's labels and settings) must match for any run on an existing folder; the training
      part (the task, its training files by content) for a run that trains.
    """
    return {"model": {"task": type(self).__name__, **self.model_folder_fields()},
            "training": {"task": self.name,
                         "data_files": [output_folder.file_identity(path)
                                        for path in self.train_files]}}

  def needs_one_machine(self, modes):
    """Whether the run must stay on one machine: scoring and writing predictions gather every
    example's outputs in one process, which multi-worker training does not do."""
    return modes.eval or modes.predict

  # === The model ===

  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras task model (built inside the strategy's scope)."""

  @abc.abstractmethod
  def loss(self, outputs, labels):
    """`loss(outputs, labels)` -> dict of float32 scalars with `loss` (see `Trainer`)."""

  def metrics(self, outputs, labels):
    """`metrics(outputs, labels)` -> `{name: (total, count)}`, logged during training and
    averaged by evaluation (see `Trainer`); none by default."""
    del outputs, labels
    return {}

  def untrained(self, output_dir):
    """Called when a run that does not train finds no checkpoint to resume and no head in
    `init_checkpoint`: warns that the head is untrained (a task whose predictions would be
    meaningless raises instead)."""
    logging.warning("%s holds no fine-tuned checkpoint: the %s head is untrained.", output_dir,
                    self.name)

  # === The inputs ===

  def num_train_examples(self):
    """Training examples (features, for tasks that window long documents); with the trainer's
    epochs, they set the step count."""
    raise NotImplementedError(f"The {self.name} task does not train.")

  def build_inputs(self, split, output_dir, seed=None):
    """The input of a split, as `input_fn(batch_size, input_context)`.

    The input function returns a `tf.data.Dataset` of batches of `batch_size` examples (the
    per-replica share of the run's batch, which the driver works out), reading the input
    pipeline's shard of `input_context` (a `tf.distribute.InputContext`). Training datasets
    repeat and yield `(features, labels)`; evaluation and prediction datasets end.

    Args:
      split: `"train"`, or a name of `eval_splits()` or `predict_splits()`.
      output_dir: the run's output folder, where the task may write the split's records.
      seed: the run's seed, for shuffling training data; None for unseeded.
    """
    raise NotImplementedError(f"The {self.name} task has no {split!r} split.")

  def eval_splits(self):
    """The `(split, prefix)` pairs that evaluation scores; results are named
    `<prefix>_<name>` (None keeps the names)."""
    return [("eval", "eval")]

  def predict_splits(self):
    """The splits that prediction runs over."""
    return ["predict"]

  # === The outputs ===

  def postprocess(self, split, outputs, output_dir):
    """Turns a split's model outputs into results and the task's files.

    Args:
      split: the evaluated or predicted split.
      outputs: dict of numpy arrays, one row per input row (padding rows included), in order:
        the model's outputs and the task's `output_features`.
      output_dir: the folder for the task's files (run on the chief only).

    Returns:
      `(metrics, paths)`: the split's scores (dict of floats; None when it cannot be scored)
      and the files written.
    """
    raise NotImplementedError(f"The {self.name} task does not evaluate or predict {split!r}.")

  def evaluate_split(self, split, runner, output_dir):
    """Evaluates one split of `eval_splits()`; returns `(metrics, files written)`.

    By default the model's outputs over the whole split (with the task's `output_features`), in
    the trainer's evaluation batches, are scored by `postprocess`. A task whose evaluation is the
    mean of its training loss and metrics returns `runner.average(...)` instead (pre-training).

    Args:
      split: the split.
      runner: the run's `driver.Runner`: `predict`, `average`, `seed`, `config`.
      output_dir: the folder for the task's files.
    """
    return self._postprocessed(split, runner, output_dir, runner.config.trainer.eval_batch_size)

  def predict_split(self, split, runner, output_dir):
    """Predicts one split of `predict_splits()`; returns `(scores or None, files written)`.

    By default the model's outputs over the whole split, in the trainer's prediction batches,
    go to `postprocess`, whose scores count when the split holds answers. A task whose outputs
    are too large to hold writes them as they come instead (feature extraction).

    Args:
      split: the split.
      runner: the run's `driver.Runner`: `predict`, `model`, `seed`, `config`.
      output_dir: the folder for the task's files.
    """
    return self._postprocessed(split, runner, output_dir,
                               runner.config.trainer.predict_batch_size)

  def _postprocessed(self, split, runner, output_dir, batch_size):
    """`postprocess` of the model's outputs over the whole split, in batches of `batch_size`."""
    inputs = self.build_inputs(split, output_dir, runner.seed)
    outputs = runner.predict(inputs, keep=self.output_features, batch_size=batch_size)
    return self.postprocess(split, outputs, output_dir)

  def model_folder_fields(self):
    """What the saved model folder records beside the weights: `labels`, `is_regression` and
    `extra`."""
    return {}

  def save(self, model, output_dir, export_dir=None, *, export_format="saved_model",
           export_precision="float32", calibration=None):
    """Saves the model folder in `output_dir` (and the export in `export_dir`); returns the
    paths written. Called on the chief after training, or to export.

    Args:
      model: the trained model.
      output_dir: the run's output folder, where the model folder goes.
      export_dir: the SavedModel or OpenVINO folder, or the `.tflite` / `.onnx` file, to export
        to; None for no export.
      export_format: `saved_model`, `litert`, `onnx` or `openvino`
        (`ExperimentConfig.export_format`).
      export_precision: `float32`, or `int8` for the formats other than `saved_model`.
      calibration: the examples of `openvino` int8: a file or a list of input dicts
        (`export.calibration`).
    """
    config = self.config
    save_model_dir(model, output_dir, vocab_file=config.vocab_file,
                   do_lower_case=config.do_lower_case, max_seq_length=config.max_seq_length,
                   **self.model_folder_fields())
    if not export_dir:
      return [output_dir]
    if export_format != "saved_model":
      # Written from the saved folder, as export_saved_model.py --format writes it.
      return [output_dir, export.export_model_dir_as(output_dir, export_dir, format=export_format,
                                                     precision=export_precision, overwrite=True,
                                                     calibration=calibration)]
    # A model trained in bfloat16 is served in bfloat16, one trained in float32 in float32.
    return [export.export_model_dir(output_dir, export_dir, overwrite=True,
                                    dtype=export.trained_dtype(model))]
