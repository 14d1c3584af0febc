"""`ExperimentConfig`: the one config of a run, as one tree (Model Garden's `ExperimentConfig`).

    ExperimentConfig
      task      what the task reads and how: `TaskConfig` or the task's own subclass
                (`ClassificationConfig`, `SquadConfig`, ...): vocabulary, casing, sequence length,
                data paths and the task's settings
      trainer   `TrainerConfig`: batch sizes, epochs or steps, the loop's rhythm, gradient
                accumulation, and its `optimizer`, an `OptimizerConfig`: type, learning rate,
                warmup, weight decay, clipping, betas, epsilon
      runtime   `RuntimeConfig`: strategy, devices, precision, XLA, kernels, determinism, seed
                (trainer and runtime are the engine's configs, `official_bert.training.config`,
                which know nothing of BERT)
      model     the encoder's `BertConfig`
      output_dir, init_checkpoint, export_dir, overwrite_output_dir: where the run reads and
                writes; export_format, export_precision, calibration_file: what it exports

Each tool's flags map onto the tree (`official_bert.cli`); `tasks.driver.run_experiment` runs
one. The run logs the tree at the start and writes it into its output folder as
`experiment_config.json`, which `ExperimentConfig.read` turns back into an equal config (a file
that an earlier version wrote, in its layout, too: `upgrade`). The output folder's fingerprint
(`tasks.output_folder`) comes from the tree too: a field counts when its metadata names the
fingerprint's section (`model`: must match for any run on the folder, `training`: for a run that
trains), see `fingerprint`.

Example:

>>> config = ExperimentConfig(task=SquadConfig(train_file="train-v1.1.json"),
...                           trainer=TrainerConfig(
...                               train_batch_size=12,
...                               optimizer=OptimizerConfig(learning_rate=3e-5)),
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
from official_bert.training.config import (
  MODEL,
  TRAINING,
  OptimizerConfig,
  RuntimeConfig,
  TrainerConfig,
  fingerprint_parts,
  setting,
)

__all__ = ["CONFIG_NAME", "ExperimentConfig", "TaskConfig", "ClassificationConfig", "NerConfig",
           "SwagConfig", "SquadConfig", "PretrainingConfig", "FeatureExtractionConfig",
           "TASK_CONFIGS", "TrainerConfig", "OptimizerConfig", "RuntimeConfig", "fingerprint",
           "upgrade", "MODEL", "TRAINING"]

CONFIG_NAME = "experiment_config.json"


# === The task ===


@dataclasses.dataclass(frozen=True)
class TaskConfig:
  """What every task reads: the vocabulary, the casing and the sequence length.

  A task's own settings (data paths, ...) are the fields of its subclass, each declared and
  explained there once; the `Task` registered for the subclass (`base.register`) is built from
  it and reads it. `kind` names the subclass in `experiment_config.json`.

  Args:
    vocab_file: the WordPiece vocabulary (copied into the saved model folder).
    do_lower_case: whether the text is lower-cased (uncased models); None for a task that reads
      no text (pre-training reads records).
    max_seq_length: tokens per example after WordPiece, special tokens included.
  """

  kind: ClassVar[str] = "task"

  vocab_file: str | None = None
  do_lower_case: bool | None = setting(MODEL, True)
  max_seq_length: int = setting(MODEL, 128)


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(TaskConfig):
  """`run_classifier.py` (`tasks.classification.ClassificationTask`): sentence(-pair)
  classification or regression.

  Args:
    task_name: a GLUE task (`CoLA`, `SST-2`, `MRPC`, `STS-B`, `QQP`, `MNLI`, `QNLI`, `RTE`,
      `WNLI`, `AX`, `XNLI`) or `custom`; not needed with `tfds_name`.
    data_dir: the task's folder of files (for TFDS, optionally its data folder).
    tfds_name: read a TFDS dataset such as `glue/sst2` instead of files.
    custom_options: for `custom`: `text_a_column`, `label_column` (required), `text_b_column`,
      `is_regression`, `has_header` (see `custom_data.CustomProcessor`) and `train_file`,
      `dev_file`, `test_file` for files not named `<split>.<csv|tsv|jsonl>` in `data_dir`.
    skip_malformed_rows: skip (and count) malformed rows instead of stopping at the first;
      None keeps the data's default (skip for QQP only).
    xnli_language: for XNLI, the language of the train file and of the dev rows (default `zh`,
      as in the original).
  """

  kind: ClassVar[str] = "classification"

  task_name: str | None = None
  data_dir: str | None = None
  tfds_name: str | None = None
  custom_options: dict | None = None
  skip_malformed_rows: bool | None = None
  xnli_language: str | None = None


@dataclasses.dataclass(frozen=True)
class SplitFilesConfig(TaskConfig):
  """A task whose splits are files: a folder of conventionally named ones, or each by name.

  Args:
    data_dir: a folder with the task's conventionally named files (see the task).
    train_file: the training file, instead of `data_dir`'s.
    eval_file: the (labelled) evaluation file.
    predict_file: the file to predict (labels optional).
  """

  data_dir: str | None = None
  train_file: str | None = None
  eval_file: str | None = None
  predict_file: str | None = None


@dataclasses.dataclass(frozen=True)
class NerConfig(SplitFilesConfig):
  """`run_ner.py` (`tasks.tagging.NerTask`): CoNLL-style files, `data_dir` holding `train.txt`,
  `dev.txt` or `valid.txt`, `test.txt` (or `.conll`); `max_seq_length` counts WordPieces per
  feature, and longer sentences are split between words."""

  kind: ClassVar[str] = "ner"


@dataclasses.dataclass(frozen=True)
class SwagConfig(SplitFilesConfig):
  """`run_swag.py` (`tasks.multiple_choice.SwagTask`): SWAG-format files, `data_dir` holding
  `train.csv`, `val.csv`, `test.csv` (or `.jsonl`); `max_seq_length` counts the tokens of one
  (context, ending) pair."""

  kind: ClassVar[str] = "swag"


@dataclasses.dataclass(frozen=True)
class SquadConfig(TaskConfig):
  """`run_squad.py` (`tasks.question_answering.SquadTask`).

  Args:
    max_seq_length: WordPieces per window, `[CLS]` and both `[SEP]` included.
    train_file: SQuAD JSON for training, e.g. `train-v1.1.json`.
    predict_file: SQuAD JSON to answer, e.g. `dev-v1.1.json`; scored when it holds answers.
    doc_stride: WordPieces between the starts of a long context's windows.
    max_query_length: questions are cut to this many WordPieces.
    n_best_size: answers kept per question in `nbest_predictions.json`.
    max_answer_length: longest answer, in WordPieces.
    version_2_with_negative: SQuAD v2.0: some questions have no answer.
    null_score_diff_threshold: v2.0: predict "" when the null score minus the best span's score
      exceeds this.
    verbose_logging: log the first features and every question's predicted answer.
    bad_answer_policy: `skip` (counted and logged by question id) or `error`: what to do with a
      training answer that is not at its `answer_start` (see `squad.read_squad_examples`).
  """

  kind: ClassVar[str] = "squad"

  max_seq_length: int = setting(MODEL, 384)
  train_file: str | None = None
  predict_file: str | None = None
  doc_stride: int = setting(TRAINING, 128)
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = setting(TRAINING, False)
  null_score_diff_threshold: float = 0.0
  verbose_logging: bool = False
  bad_answer_policy: str = "skip"


@dataclasses.dataclass(frozen=True)
class PretrainingConfig(TaskConfig):
  """`run_pretraining.py` (`tasks.pretraining.PretrainingTask`). Its step counts are the
  trainer's (`TrainerConfig.num_train_steps`).

  Args:
    do_lower_case: None: pre-training reads records, not text.
    max_seq_length: sequence length of the records.
    input_file: comma-separated TFRecord files or globs from `create_pretraining_data.py`.
    max_predictions_per_seq: masked positions per record.
    max_eval_steps: evaluation batches at most.
    dynamic_masking: draw new masks for every batch instead of the stored ones (needs
      `vocab_file`).
    masked_lm_prob: fraction of tokens masked by dynamic masking.
    do_whole_word_mask: dynamic masking masks whole words.
    export_tf1: also export the original TF1 checkpoint format.
  """

  kind: ClassVar[str] = "pretraining"

  do_lower_case: bool | None = setting(MODEL, None)
  input_file: str | None = None
  max_predictions_per_seq: int = setting(MODEL, 20)
  max_eval_steps: int = 100
  dynamic_masking: bool = setting(TRAINING, False)
  masked_lm_prob: float = setting(TRAINING, 0.15, only_with="dynamic_masking")
  do_whole_word_mask: bool = setting(TRAINING, False, only_with="dynamic_masking")
  export_tf1: bool = False


@dataclasses.dataclass(frozen=True)
class FeatureExtractionConfig(TaskConfig):
  """`extract_features.py` (`tasks.feature_extraction.FeatureExtractionTask`).

  Args:
    vocab_file: the WordPiece vocabulary; by default the `vocab.txt` beside the checkpoint.
    do_lower_case: lower-case the text (uncased models); checked against the checkpoint.
    max_seq_length: longest packed sequence; longer texts are truncated (and counted).
    input_file: one text per line; ` ||| ` separates a pair.
    output_file: the JSON-lines output, written atomically (a temporary file, then renamed).
    bert_config_file: the path of the encoder's `bert_config.json`, when the task is given no
      `BertConfig`; by default the one beside the init checkpoint.
    layers: the layers whose per-token values are written (`"-1,-2,-3,-4"`: the last four), a
      comma-separated string or a list of ints.
    pooling: None for per-token features, or `cls` / `mean` for one vector per line.
    pooling_layer: the layer that `pooling` reads (-1: the last).
    normalize: L2-normalise the pooled vectors.
  """

  kind: ClassVar[str] = "feature_extraction"

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


# === The whole run ===


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """One run: the task, the trainer, the runtime, the model and the paths.

  Args:
    task: the `TaskConfig` (the task's own subclass); filled in from the `Task` by
      `driver.run` when None.
    trainer: the `TrainerConfig` (batches, length, the loop's rhythm, the optimizer).
    runtime: the `RuntimeConfig` (strategy, precision, XLA, kernels, seed).
    model: the encoder's `BertConfig`; filled in from the task by `driver.run` when None.
    output_dir: checkpoints, TensorBoard summaries, `eval_results.txt`, the task's outputs,
      `experiment_config.json` and the saved model go here; a run with the same `output_dir`
      resumes (for the tasks that resume: see `Task.resumes`).
    init_checkpoint: starting weights: an original TF1 checkpoint (prefix or folder), a model
      folder or a Hugging Face folder. None trains from scratch. Ignored when `output_dir`
      holds a checkpoint.
    export_dir: where the trained model is exported for serving: a SavedModel or OpenVINO
      folder, or the `.tflite` / `.onnx` file of `export_format`; None for no export.
    export_format: `saved_model`, `litert` (one `.tflite` file with the tokenizer inside),
      `onnx` (one `.onnx` file, token ids in) or `openvino` (an OpenVINO IR folder, token ids
      in); see `official_bert.export.formats`.
    export_precision: `float32`, or `int8` for the other formats than `saved_model` (dynamic
      for `litert` and `onnx`; calibrated for `openvino`).
    calibration_file: the examples `openvino` int8 calibrates on (`export.calibration`); None
      takes the first split the run evaluates (or else predicts).
    overwrite_output_dir: a training run deletes what earlier runs left in `output_dir` and
      starts afresh instead of resuming (see `tasks.output_folder`).
  """

  task: TaskConfig | None = None
  trainer: TrainerConfig = TrainerConfig()
  runtime: RuntimeConfig = RuntimeConfig()
  model: BertConfig | None = setting(MODEL, None, key="bert_config")
  output_dir: str | None = None
  init_checkpoint: str | None = setting(TRAINING, None)
  export_dir: str | None = None
  overwrite_output_dir: bool = False
  export_format: str = "saved_model"
  export_precision: str = "float32"
  calibration_file: str | None = None

  def __post_init__(self):
    if not self.output_dir:
      raise ValueError("output_dir is required.")
    # Imported here: the export package imports the models, which import this module's users.
    from official_bert.export import formats  # pylint: disable=import-outside-toplevel

    formats.check_export_settings(self.export_format, self.export_precision,
                                  has_export_dir=bool(self.export_dir),
                                  calibration_file=self.calibration_file)

  # === JSON ===

  def to_dict(self):
    """The tree as JSON values; the task's `kind` names its config class."""
    return {"task": None if self.task is None else {"kind": self.task.kind,
                                                    **dataclasses.asdict(self.task)},
            "trainer": dataclasses.asdict(self.trainer),
            "runtime": dataclasses.asdict(self.runtime),
            "model": None if self.model is None else self.model.to_dict(),
            **{name: getattr(self, name) for name in
               ("output_dir", "init_checkpoint", "export_dir", "overwrite_output_dir",
                "export_format", "export_precision", "calibration_file")}}

  @classmethod
  def from_dict(cls, values, source="the config"):
    """The inverse of `to_dict`; a `UserError` names an unknown task kind or field.

    Also reads the layout that earlier versions wrote (`upgrade`).
    """
    values = upgrade(values)
    try:
      task = values.pop("task", None)
      if task is not None:
        task = dict(task)
        kind = task.pop("kind", TaskConfig.kind)
        if kind not in TASK_CONFIGS:
          raise UserError(f"{source}: unknown task kind {kind!r} (known: "
                          f"{', '.join(sorted(TASK_CONFIGS))}).")
        task = TASK_CONFIGS[kind](**task)
      trainer = dict(values.pop("trainer", {}))
      trainer["optimizer"] = OptimizerConfig(**trainer.get("optimizer", {}))
      model = values.pop("model", None)
      return cls(task=task, trainer=TrainerConfig(**trainer),
                 runtime=RuntimeConfig(**values.pop("runtime", {})),
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
    """Reads an `experiment_config.json` (or the one in the folder `path`), of this version or
    an earlier one."""
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
      path = os.path.join(path, CONFIG_NAME)
    with tf.io.gfile.GFile(path) as f:
      try:
        values = json.loads(f.read())
      except json.JSONDecodeError as error:
        raise UserError(f"{path} is damaged ({error.msg} at line {error.lineno}).") from None
    if not isinstance(values, dict):
      raise UserError(f"{path} is damaged (not a JSON object, but {type(values).__name__}).")
    return cls.from_dict(values, source=path)

  def log(self):
    """Logs the whole tree, one `section: {...}` line each."""
    values = self.to_dict()
    logging.info("Experiment config:\n%s", "\n".join(
        f"  {name}: {json.dumps(value, sort_keys=True)}" for name, value in values.items()))


# Where the settings that earlier versions kept elsewhere live now: (node, field) -> (node, field).
# Those versions held the learning rate and warmup in `trainer`, and the loop's rhythm and the
# optimizer's type, decay and clipping in `runtime` (then `EngineConfig`).
_MOVED = {
    ("trainer", "learning_rate"): ("optimizer", "learning_rate"),
    ("trainer", "warmup_proportion"): ("optimizer", "warmup_proportion"),
    ("trainer", "num_warmup_steps"): ("optimizer", "num_warmup_steps"),
    ("runtime", "optimizer_type"): ("optimizer", "type"),
    ("runtime", "weight_decay"): ("optimizer", "weight_decay"),
    ("runtime", "clip_norm"): ("optimizer", "clip_norm"),
    ("runtime", "steps_per_loop"): ("trainer", "steps_per_loop"),
    ("runtime", "gradient_accumulation_steps"): ("trainer", "gradient_accumulation_steps"),
    ("runtime", "log_steps"): ("trainer", "log_steps"),
    ("runtime", "save_checkpoints_steps"): ("trainer", "save_checkpoints_steps"),
    ("runtime", "keep_checkpoint_max"): ("trainer", "keep_checkpoint_max"),
}


def upgrade(values):
  """The values of an `experiment_config.json` in this version's layout.

  A file written by an earlier version keeps its meaning: each setting it holds in an earlier
  place (`_MOVED`) moves to its place now; a file of this version is returned as it is.

  Args:
    values: the file's JSON object.

  Returns:
    A new dict; the input is not changed.

  Example:

  >>> upgrade({"trainer": {"learning_rate": 2e-5}, "runtime": {"optimizer_type": "lamb"}})
  {'trainer': {'optimizer': {'learning_rate': 2e-05, 'type': 'lamb'}}, 'runtime': {}}
  """
  values = dict(values)
  nodes = {name: dict(values.get(name) or {}) for name in ("trainer", "runtime")}
  nodes["optimizer"] = dict(nodes["trainer"].get("optimizer") or {})
  moved = False
  for (old_node, old_name), (node, name) in _MOVED.items():
    if old_name in nodes[old_node]:
      nodes[node].setdefault(name, nodes[old_node].pop(old_name))
      moved = True
  if not moved:
    return values
  nodes["trainer"]["optimizer"] = nodes.pop("optimizer")
  values.update(nodes)
  return values


def fingerprint(config):
  """What an output folder made by `config`'s run is for: the fields of the tree that their
  metadata marks (`training.config.setting`), the model's `BertConfig` among them (see
  `tasks.output_folder`).

  The task adds what its data decides (labels, training files by content: `Task.fingerprint`).
  The names are those that earlier versions recorded (the optimizer's type as `optimizer_type`),
  so that their folders still resume.

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
  parts = {MODEL: {}, TRAINING: {}}
  fingerprint_parts(config, parts)
  return parts
