"""`ExperimentConfig`: the one config of a run, as one tree (Model Garden's `ExperimentConfig`).

    ExperimentConfig
      task      what the task reads and how: `TaskConfig` or the task's own subclass
                (`ClassificationConfig`, `SquadConfig`, ...): vocabulary, casing, sequence length,
                data paths and the task's settings
      trainer   `TrainerConfig`: batch sizes, learning rate, epochs or steps, warmup
      runtime   `official_bert.training.EngineConfig`: strategy, precision, XLA, kernels, the
                loop's rhythm, optimizer family, seed (the engine's own config, which knows
                nothing of BERT)
      model     the encoder's `BertConfig`
      output_dir, init_checkpoint, export_dir, overwrite_output_dir: where the run reads and
                writes

Each tool's flags map onto the tree (`official_bert.cli`); `tasks.driver.run_experiment` runs
one. The run logs the tree at the start and writes it into its output folder as
`experiment_config.json`, which `ExperimentConfig.read` turns back into an equal config. The
output folder's fingerprint (`tasks.output_folder`) comes from the tree too: a field counts when
its metadata names the fingerprint's section (`model`: must match for any run on the folder,
`training`: for a run that trains), see `fingerprint`.

Example:

>>> config = ExperimentConfig(task=SquadConfig(train_file="train-v1.1.json"),
...                           trainer=TrainerConfig(train_batch_size=12, learning_rate=3e-5),
...                           output_dir="/tmp/squad")
>>> config.task.max_seq_length, config.trainer.steps(num_examples=3000)  # 3 epochs of 12
(384, (750, 75))
>>> ExperimentConfig.from_dict(config.to_dict()) == config
True
"""

import dataclasses
import json
import os
from typing import ClassVar

from absl import logging
import tensorflow as tf

from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.configs import BertConfig
from official_bert.training.config import EngineConfig

CONFIG_NAME = "experiment_config.json"
MODEL, TRAINING = "model", "training"
# The engine's fields that change what training learns: they join the `training` part of the
# fingerprint. `EngineConfig` belongs to the engine, so the list lives here, not on its fields.
_ENGINE_FINGERPRINT = ("optimizer_type", "weight_decay")


def _in(section, only_with=None, **kwargs):
  """A dataclass field that joins `section` of the fingerprint (None when `only_with` is off)."""
  return dataclasses.field(metadata={"fingerprint": section, "only_with": only_with}, **kwargs)


# === The task ===


@dataclasses.dataclass(frozen=True)
class TaskConfig:
  """What every task reads: the vocabulary, the casing and the sequence length.

  A task's own settings (data paths, ...) are the fields of its subclass; `kind` names it in
  `experiment_config.json` and `task_class` is the `Task` that runs it.

  Args:
    vocab_file: the WordPiece vocabulary (copied into the saved model folder).
    do_lower_case: whether the text is lower-cased (uncased models); None for a task that reads
      no text (pre-training reads records).
    max_seq_length: tokens per example after WordPiece, special tokens included.
  """

  kind: ClassVar[str] = "task"
  task_class: ClassVar[str | None] = None

  vocab_file: str | None = None
  do_lower_case: bool | None = _in(MODEL, default=True)
  max_seq_length: int = _in(MODEL, default=128)


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(TaskConfig):
  """`run_classifier.py`: see `tasks.classification.ClassificationTask` for the fields."""

  kind: ClassVar[str] = "classification"
  task_class: ClassVar[str] = "official_bert.tasks.classification.ClassificationTask"

  task_name: str | None = None
  data_dir: str | None = None
  tfds_name: str | None = None
  custom_options: dict | None = None
  skip_malformed_rows: bool | None = None
  xnli_language: str | None = None


@dataclasses.dataclass(frozen=True)
class SplitFilesConfig(TaskConfig):
  """A task whose splits are files: a folder of conventionally named ones, or each by name."""

  data_dir: str | None = None
  train_file: str | None = None
  eval_file: str | None = None
  predict_file: str | None = None


@dataclasses.dataclass(frozen=True)
class NerConfig(SplitFilesConfig):
  """`run_ner.py`: see `tasks.tagging.NerTask`."""

  kind: ClassVar[str] = "ner"
  task_class: ClassVar[str] = "official_bert.tasks.tagging.NerTask"


@dataclasses.dataclass(frozen=True)
class SwagConfig(SplitFilesConfig):
  """`run_swag.py`: see `tasks.multiple_choice.SwagTask`."""

  kind: ClassVar[str] = "swag"
  task_class: ClassVar[str] = "official_bert.tasks.multiple_choice.SwagTask"


@dataclasses.dataclass(frozen=True)
class SquadConfig(TaskConfig):
  """`run_squad.py`: see `tasks.question_answering.SquadTask`."""

  kind: ClassVar[str] = "squad"
  task_class: ClassVar[str] = "official_bert.tasks.question_answering.SquadTask"

  max_seq_length: int = _in(MODEL, default=384)
  train_file: str | None = None
  predict_file: str | None = None
  doc_stride: int = _in(TRAINING, default=128)
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = _in(TRAINING, default=False)
  null_score_diff_threshold: float = 0.0
  verbose_logging: bool = False
  bad_answer_policy: str = "skip"


@dataclasses.dataclass(frozen=True)
class PretrainingConfig(TaskConfig):
  """`run_pretraining.py`: see `tasks.pretraining.PretrainingTask`. Its step counts are the
  trainer's (`TrainerConfig.num_train_steps`)."""

  kind: ClassVar[str] = "pretraining"
  task_class: ClassVar[str] = "official_bert.tasks.pretraining.PretrainingTask"

  do_lower_case: bool | None = _in(MODEL, default=None)
  input_file: str | None = None
  max_predictions_per_seq: int = _in(MODEL, default=20)
  max_eval_steps: int = 100
  dynamic_masking: bool = _in(TRAINING, default=False)
  masked_lm_prob: float = _in(TRAINING, only_with="dynamic_masking", default=0.15)
  do_whole_word_mask: bool = _in(TRAINING, only_with="dynamic_masking", default=False)
  export_tf1: bool = False


@dataclasses.dataclass(frozen=True)
class FeatureExtractionConfig(TaskConfig):
  """`extract_features.py`: see `tasks.feature_extraction.FeatureExtractionTask`."""

  kind: ClassVar[str] = "feature_extraction"
  task_class: ClassVar[str] = "official_bert.tasks.feature_extraction.FeatureExtractionTask"

  input_file: str | None = None
  output_file: str | None = None
  bert_config_file: str | None = None
  layers: str = "-1,-2,-3,-4"
  pooling: str | None = None
  pooling_layer: int = -1
  normalize: bool = False


TASK_CONFIGS = {cls.kind: cls for cls in (TaskConfig, ClassificationConfig, NerConfig, SwagConfig,
                                          SquadConfig, PretrainingConfig,
                                          FeatureExtractionConfig)}


# === The trainer ===


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """The schedule and batch sizes (the original scripts' flags).

  Args:
    train_batch_size: global training batch (all replicas).
    eval_batch_size: global evaluation batch.
    predict_batch_size: global prediction batch.
    learning_rate: the peak learning rate of the warmup + linear decay schedule.
    num_train_epochs: passes over the training examples (may be fractional), unless
      `num_train_steps` is set.
    warmup_proportion: fraction of the training steps spent warming the learning rate up,
      unless `num_warmup_steps` is set.
    num_train_steps: the step count itself (pre-training's flag); None counts it from the
      epochs. Not in the fingerprint: the same run with more steps trains further.
    num_warmup_steps: the warmup steps itself; None takes `warmup_proportion` of the steps.
  """

  train_batch_size: int = _in(TRAINING, default=32)
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = _in(TRAINING, default=5e-5)
  num_train_epochs: float = _in(TRAINING, default=3.0)
  warmup_proportion: float = _in(TRAINING, default=0.1)
  num_train_steps: int | None = None
  num_warmup_steps: int | None = None

  def __post_init__(self):
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}.")
    if self.learning_rate <= 0 or self.num_train_epochs <= 0:
      raise ValueError(f"learning_rate and num_train_epochs must be positive, got "
                       f"{self.learning_rate} and {self.num_train_epochs}.")
    if not 0 <= self.warmup_proportion <= 1:
      raise ValueError(f"warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
    if self.num_train_steps is not None and self.num_train_steps < 1:
      raise ValueError(f"num_train_steps must be at least 1, got {self.num_train_steps}.")

  def steps(self, num_examples=None):
    """`(num_train_steps, num_warmup_steps)`: the set counts, or from the epochs, rounded down
    as in the original scripts.

    Args:
      num_examples: training examples (features, for tasks that split long documents); not
        needed when `num_train_steps` is set.

    Example:

    >>> TrainerConfig().steps(3668)
    (343, 34)
    >>> TrainerConfig(num_train_steps=20, num_warmup_steps=10).steps()
    (20, 10)
    """
    num_train_steps = self.num_train_steps
    if num_train_steps is None:
      num_train_steps = int(num_examples / self.train_batch_size * self.num_train_epochs)
      if num_train_steps < 1:
        raise ValueError(f"{num_examples} training examples in batches of "
                         f"{self.train_batch_size} for {self.num_train_epochs} epochs make no "
                         "training step; lower train_batch_size or raise num_train_epochs.")
    if self.num_warmup_steps is not None:
      return num_train_steps, self.num_warmup_steps
    return num_train_steps, int(num_train_steps * self.warmup_proportion)


# === The whole run ===


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """One run: the task, the trainer, the runtime (engine), the model and the paths.

  Args:
    task: the `TaskConfig` (the task's own subclass); filled in from the `Task` by
      `driver.run` when None.
    trainer: the `TrainerConfig`.
    runtime: the `EngineConfig` (strategy, precision, checkpoint rhythm, optimizer, seed).
    model: the encoder's `BertConfig`; filled in from the task by `driver.run` when None.
    output_dir: checkpoints, TensorBoard summaries, `eval_results.txt`, the task's outputs,
      `experiment_config.json` and the saved model go here; a run with the same `output_dir`
      resumes (for the tasks that resume: see `Task.resumes`).
    init_checkpoint: starting weights: an original TF1 checkpoint (prefix or folder), a model
      folder or a Hugging Face folder. None trains from scratch. Ignored when `output_dir`
      holds a checkpoint.
    export_dir: where a serving SavedModel is exported; None for no export.
    overwrite_output_dir: a training run deletes what earlier runs left in `output_dir` and
      starts afresh instead of resuming (see `tasks.output_folder`).
  """

  task: TaskConfig | None = None
  trainer: TrainerConfig = TrainerConfig()
  runtime: EngineConfig = EngineConfig()
  model: BertConfig | None = None
  output_dir: str | None = None
  init_checkpoint: str | None = _in(TRAINING, default=None)
  export_dir: str | None = None
  overwrite_output_dir: bool = False

  def __post_init__(self):
    if not self.output_dir:
      raise ValueError("output_dir is required.")
    check_batch_split(self.trainer.train_batch_size, self.runtime.gradient_accumulation_steps)

  # === JSON ===

  def to_dict(self):
    """The tree as JSON values; the task's `kind` names its config class."""
    return {"task": None if self.task is None else {"kind": self.task.kind,
                                                    **dataclasses.asdict(self.task)},
            "trainer": dataclasses.asdict(self.trainer),
            "runtime": dataclasses.asdict(self.runtime),
            "model": None if self.model is None else self.model.to_dict(),
            **{name: getattr(self, name) for name in
               ("output_dir", "init_checkpoint", "export_dir", "overwrite_output_dir")}}

  @classmethod
  def from_dict(cls, values, source="the config"):
    """The inverse of `to_dict`; a `UserError` names an unknown task kind or field."""
    values = dict(values)
    try:
      task = values.pop("task", None)
      if task is not None:
        task = dict(task)
        kind = task.pop("kind", TaskConfig.kind)
        if kind not in TASK_CONFIGS:
          raise UserError(f"{source}: unknown task kind {kind!r} (known: "
                          f"{', '.join(sorted(TASK_CONFIGS))}).")
        task = TASK_CONFIGS[kind](**task)
      model = values.pop("model", None)
      return cls(task=task, trainer=TrainerConfig(**values.pop("trainer", {})),
                 runtime=EngineConfig(**values.pop("runtime", {})),
                 model=None if model is None else BertConfig.from_dict(model, source), **values)
    except TypeError as error:  # an unknown or missing field
      raise UserError(f"{source}: {error}") from None

  def write(self, output_dir=None):
    """Writes `experiment_config.json` (atomically) into `output_dir` (default: the run's);
    returns its path."""
    path = os.path.join(output_dir or self.output_dir, CONFIG_NAME)
    tf.io.gfile.makedirs(os.path.dirname(path))
    file_io.write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
    return path

  @classmethod
  def read(cls, path):
    """Reads an `experiment_config.json` (or the one in the folder `path`)."""
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
      path = os.path.join(path, CONFIG_NAME)
    with tf.io.gfile.GFile(path) as f:
      try:
        values = json.loads(f.read())
      except json.JSONDecodeError as error:
        raise UserError(f"{path} is damaged ({error.msg} at line {error.lineno}).") from None
    return cls.from_dict(values, source=path)

  def log(self):
    """Logs the whole tree, one `section: {...}` line each."""
    values = self.to_dict()
    logging.info("Experiment config:\n%s", "\n".join(
        f"  {name}: {json.dumps(value, sort_keys=True)}" for name, value in values.items()))


def _parts(node, fingerprint):
  for field in dataclasses.fields(node):
    section = field.metadata.get("fingerprint")
    if section:
      only_with = field.metadata.get("only_with")
      value = getattr(node, field.name)
      fingerprint[section][field.name] = None if only_with and not getattr(node, only_with) \
          else value


def fingerprint(config):
  """What an output folder made by `config`'s run is for: the fields of the tree that the
  metadata marks, the model's `BertConfig` and the engine's optimizer (see `tasks.output_folder`).

  The task adds what its data decides (labels, training files by content: `Task.fingerprint`).

  Args:
    config: an `ExperimentConfig` with `task` and `model` set.

  Returns:
    `{"model": {...}, "training": {...}}` of JSON values.

  Example:

  >>> model = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
  ...                    num_attention_heads=2, intermediate_size=16)
  >>> parts = fingerprint(ExperimentConfig(task=PretrainingConfig(), model=model,
  ...                                      trainer=TrainerConfig(num_train_steps=10),
  ...                                      output_dir="/tmp/out"))
  >>> sorted(parts["training"])  # no step counts: more steps continue the same run
  ... # doctest: +NORMALIZE_WHITESPACE
  ['do_whole_word_mask', 'dynamic_masking', 'init_checkpoint', 'learning_rate',
   'masked_lm_prob', 'num_train_epochs', 'optimizer_type', 'train_batch_size',
   'warmup_proportion', 'weight_decay']
  """
  parts = {MODEL: {"bert_config": config.model.to_dict()}, TRAINING: {}}
  for node in (config.task, config.trainer, config):
    _parts(node, parts)
  parts[TRAINING].update({name: getattr(config.runtime, name) for name in _ENGINE_FINGERPRINT})
  return parts


def check_batch_split(train_batch_size, gradient_accumulation_steps, num_replicas=1):
  """Refuses, before any work, a training batch that does not split evenly.

  Each replica takes `train_batch_size / num_replicas` examples and splits them into
  `gradient_accumulation_steps` equal micro-batches; otherwise the first step would fail.

  Args:
    train_batch_size: the global training batch.
    gradient_accumulation_steps: micro-batches per replica and step.
    num_replicas: the strategy's replicas.

  >>> check_batch_split(32, 4, num_replicas=2)
  >>> check_batch_split(30, 4)
  Traceback (most recent call last):
  ...
  official_bert.common.errors.UserError: train_batch_size 30 does not split into ...
  """
  parts = num_replicas * gradient_accumulation_steps
  if train_batch_size % parts:
    per_replica = "" if num_replicas == 1 else f" over {num_replicas} replicas, then"
    raise UserError(f"train_batch_size {train_batch_size} does not split{per_replica} into "
                    f"gradient_accumulation_steps={gradient_accumulation_steps} equal "
                    f"micro-batches: make the batch a multiple of {parts}.")
