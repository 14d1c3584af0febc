"""The runner: one task's model under the engine's strategy, trained, evaluated and predicted.

`driver.run` creates one `Runner` per run from a `Task` (`official_bert.tasks.base`) and a
`RunConfig`. The runner

* sets up the engine (`EngineConfig.setup()`: strategy, precision, seeds) and builds the task's
  model and the optimizer in the strategy's scope, with the task's step count: for fine-tuning
  `num_train_steps = int(num_examples / train_batch_size * num_train_epochs)` and
  `num_warmup_steps = int(num_train_steps * warmup_proportion)`, as the original scripts;
* resumes from the newest checkpoint in `output_dir` (this package's own, or one the original
  google-research/bert wrote there: `official_bert.checkpoints.resume`), and otherwise lets the
  task load `init_checkpoint` (an original TF1 checkpoint, a converted folder or a Hugging Face
  folder), logging what came from where and what starts freshly initialised;
* trains, evaluates and predicts with `official_bert.training.Trainer`, writes `eval_results.txt`
  (`key = value` lines, sorted) and saves or exports the trained model.

An input function is `input_fn(batch_size, input_context)`: it returns a `tf.data.Dataset` of
batches of `batch_size` examples (the per-replica share of the run's train, eval or predict batch
size, which the runner works out), reading the input pipeline's shard of
`input_context` (a `tf.distribute.InputContext`). Training datasets repeat and yield
`(features, labels)`; evaluation datasets end; prediction datasets yield features (or
`(features, labels)`, labels ignored).

Tasks that score whole sets from predictions (F1 over spans, correlations) call `predict` with
`batch_size=config.eval_batch_size` and name their scores with `eval_results`.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from official_bert import export
from official_bert.checkpoints import resume, save_model_dir
from official_bert.common import file_io, tfrecord_errors
from official_bert.common.errors import UserError
from official_bert.training import distribution, progress
from official_bert.training.config import EngineConfig
from official_bert.training.optimization import create_optimizer
from official_bert.training.trainer import Trainer

EVAL_RESULTS = "eval_results.txt"


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """The hyper-parameters every task shares (the original scripts' flags).

  Args:
    output_dir: checkpoints, TensorBoard summaries, `eval_results.txt`, the task's outputs and
      the saved model go here; a run with the same `output_dir` resumes (for the tasks that
      resume: see `Task.resumes`).
    init_checkpoint: starting weights: an original TF1 checkpoint (prefix or folder), a converted
      folder or a Hugging Face folder; the encoder, and the task head where it holds one of the
      model's kind and shapes. None trains from scratch. Ignored when `output_dir` holds a
      checkpoint.
    train_batch_size: global training batch (all replicas).
    eval_batch_size: global evaluation batch.
    predict_batch_size: global prediction batch.
    learning_rate: the peak learning rate of the warmup + linear decay schedule.
    num_train_epochs: passes over the training examples (may be fractional); a task with a
      step count of its own (pre-training) ignores it.
    warmup_proportion: fraction of the training steps spent warming the learning rate up; a
      task with a step count of its own ignores it.
    export_dir: where `export` writes a serving SavedModel; None for no export.
    overwrite_output_dir: a training run deletes what earlier runs left in `output_dir` and
      starts afresh instead of resuming (see `tasks.output_folder`).
    engine: the `EngineConfig` (strategy, precision, checkpoint rhythm, optimizer, seeds).
  """

  output_dir: str
  init_checkpoint: str | None = None
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  export_dir: str | None = None
  overwrite_output_dir: bool = False
  engine: EngineConfig = EngineConfig()

  def __post_init__(self):
    if not self.output_dir:
      raise ValueError("output_dir is required.")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}.")
    if self.learning_rate <= 0 or self.num_train_epochs <= 0:
      raise ValueError(f"learning_rate and num_train_epochs must be positive, got "
                       f"{self.learning_rate} and {self.num_train_epochs}.")
    if not 0 <= self.warmup_proportion <= 1:
      raise ValueError(f"warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
    check_batch_split(self.train_batch_size, self.engine.gradient_accumulation_steps)


def check_batch_split(train_batch_size, gradient_accumulation_steps, num_replicas=1):
  """Refuses, before any work, a training batch that does not split evenly.

  Each replica takes `train_batch_size / num_replicas` examples and splits them into
  `gradient_accumulation_steps` equal micro-batches; otherwise the first step would fail.
  """
  parts = num_replicas * gradient_accumulation_steps
  if train_batch_size % parts:
    per_replica = "" if num_replicas == 1 else f" over {num_replicas} replicas, then"
    raise UserError(f"train_batch_size {train_batch_size} does not split{per_replica} into "
                    f"gradient_accumulation_steps={gradient_accumulation_steps} equal "
                    f"micro-batches: make the batch a multiple of {parts}.")


def training_steps(num_examples, train_batch_size, num_train_epochs, warmup_proportion):
  """Epochs -> optimizer steps, rounded down as in the original scripts.

  Args:
    num_examples: training examples (features, for tasks that split long documents).
    train_batch_size: global training batch.
    num_train_epochs: passes over the examples.
    warmup_proportion: fraction of the steps used for warmup.

  Returns:
    `(num_train_steps, num_warmup_steps)`.

  Example:

  >>> training_steps(3668, 32, 3.0, 0.1)
  (343, 34)
  """
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  if num_train_steps < 1:
    raise ValueError(f"{num_examples} training examples in batches of {train_batch_size} for "
                     f"{num_train_epochs} epochs make no training step; lower train_batch_size "
                     "or raise num_train_epochs.")
  return num_train_steps, int(num_train_steps * warmup_proportion)


def in_memory_input_fn(make_dataset):
  """An input function for `Runner` over features held in memory.

  Args:
    make_dataset: `make_dataset(batch_size)` -> the whole dataset in batches of `batch_size`.

  Returns:
    `input_fn(batch_size, input_context)`: each input pipeline keeps its own shard of the batches.
  """

  def input_fn(batch_size, input_context):
    dataset = make_dataset(batch_size)
    if input_context.num_input_pipelines > 1:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset

  return input_fn


def write_eval_results(path, results):
  """Writes `results` as the original `key = value` lines, sorted by key, atomically.

  Args:
    path: the file, e.g. `output_dir/eval_results.txt`.
    results: dict of names to numbers.
  """
  logging.info("***** Eval results *****")
  lines = []
  for key in sorted(results):
    logging.info("  %s = %s", key, results[key])
    lines.append(f"{key} = {results[key]}\n")
  file_io.write_text(path, "".join(lines))


class Runner:
  """Builds a task's model under the engine's strategy and trains, evaluates and predicts with it.

  Creating the runner sets up the engine, builds the model (and, for a run that trains, the
  optimizer and its schedule), restores the newest checkpoint of `output_dir` (unless the task
  does not resume: `Task.resumes`), this package's or the original's (weights, `global_step` and,
  where they map, the Adam moments), or else has the task load `init_checkpoint`. A checkpoint
  in neither layout is a `ValueError`.

  Args:
    task: the `Task`: its `build_model` is called once, inside the strategy's scope; its
      `loss` and `metrics` drive the `Trainer`; its `training_steps` set the schedule.
    config: the `RunConfig`.
    train: whether the run trains (then the optimizer is built).

  Attributes:
    strategy: the `tf.distribute.Strategy`.
    model: the task model.
    trainer: the `Trainer`.
    head_restored: whether the task head came from a checkpoint (resumed, or in
      `init_checkpoint`), i.e. the model is fine-tuned.
    num_train_steps, num_warmup_steps: the schedule (0 for a run that does not train).
    is_chief: whether this machine writes files (always, outside multi-worker training).
  """

  def __init__(self, task, config, *, train=False):
    self.config = config
    self.num_train_steps = self.num_warmup_steps = 0
    if train:
      self.num_train_steps, self.num_warmup_steps = task.training_steps(config)
    engine = config.engine
    self.strategy = engine.setup()  # first: multi-worker set-up must precede other TF work
    if train:
      check_batch_split(config.train_batch_size, engine.gradient_accumulation_steps,
                        self.strategy.num_replicas_in_sync)
    tf.io.gfile.makedirs(config.output_dir)
    with self.strategy.scope():
      self.model = task.build_model()
      optimizer = None
      if train:
        optimizer = create_optimizer(engine.optimizer_type, config.learning_rate,
                                     self.num_train_steps, self.num_warmup_steps,
                                     engine.weight_decay, dtype=engine.dtype)
    self.trainer = Trainer(self.model, task.loss, optimizer, strategy=self.strategy,
                           model_dir=config.output_dir, config=engine, metrics_fn=task.metrics,
                           restore_fn=resume.original_restore_fn(self.model, optimizer))
    self.is_chief = distribution.is_chief(self.strategy)
    restored_step = self.trainer.restore() if task.resumes else 0
    self.head_restored = restored_step > 0
    if restored_step == 0 and config.init_checkpoint:
      self.head_restored = bool(task.initialize(self.model, config.init_checkpoint))
    elif restored_step == 0:
      logging.info("Nothing to resume in %s and no init_checkpoint: the whole %s starts freshly "
                   "initialised.", config.output_dir, type(self.model).__name__)

  @property
  def global_step(self):
    """The number of training steps taken so far (restored ones included)."""
    return int(self.trainer.global_step.numpy())

  def _dataset_fn(self, input_fn, global_batch_size):
    return lambda input_context: input_fn(
        input_context.get_per_replica_batch_size(global_batch_size), input_context)

  def train(self, input_fn, num_steps=None):
    """Trains to `num_train_steps`, resuming from the newest checkpoint in `output_dir`.

    Args:
      input_fn: `input_fn(batch_size, input_context)` -> repeated dataset of
        `(features, labels)` batches.
      num_steps: stop at this global step instead (the schedule still ends at
        `num_train_steps`, so a later call continues the same run).

    Returns:
      The last logging interval's losses and metrics.
    """
    if not self.num_train_steps:
      raise ValueError("This runner was built for a run that does not train.")
    logging.info("***** Running training *****  batch size %d, %d steps (%d warmup)",
                 self.config.train_batch_size, self.num_train_steps, self.num_warmup_steps)
    with tfrecord_errors.naming_damaged_tfrecords():
      return self.trainer.train(self._dataset_fn(input_fn, self.config.train_batch_size),
                                min(num_steps or self.num_train_steps, self.num_train_steps))

  def evaluate(self, input_fn, prefix="eval", max_steps=None):
    """Averages the losses and metrics over a whole evaluation set (or its first batches).

    Args:
      input_fn: `input_fn(batch_size, input_context)` -> finite dataset of
        `(features, labels)` batches.
      prefix: the results' names are `<prefix>_<name>`, e.g. `eval_loss`, `eval_accuracy`;
        None keeps the names.
      max_steps: evaluate at most this many (global) batches; None for the whole set.

    Returns:
      Dict: each loss and metric as `<prefix>_<name>`, and `global_step`.
    """
    logging.info("***** Running evaluation *****  batch size %d%s", self.config.eval_batch_size,
                 f", at most {max_steps} steps" if max_steps else "")
    with tfrecord_errors.naming_damaged_tfrecords():
      results = self.trainer.evaluate(self._dataset_fn(input_fn, self.config.eval_batch_size),
                                      max_steps)
    results.pop("examples")
    return self.eval_results(results, prefix)

  def eval_results(self, metrics, prefix="eval"):
    """Names `metrics` `<prefix>_<name>`, adds `global_step` and logs them to TensorBoard.

    For tasks that score predictions themselves (F1 over spans, correlations), so that their
    results look like those of `evaluate`.

    Args:
      metrics: dict of names to floats.
      prefix: the name prefix; None keeps the names.

    Returns:
      The named results with `global_step`.
    """
    step = self.global_step
    results = {(f"{prefix}_{name}" if prefix else name): value for name, value in metrics.items()}
    if self.is_chief:
      progress.write_scalars(os.path.join(self.config.output_dir, "eval"), step, results)
    return dict(results, global_step=step)

  def predict(self, input_fn, keep=(), batch_size=None):
    """Runs the model over a dataset and returns its outputs.

    Args:
      input_fn: `input_fn(batch_size, input_context)` -> finite dataset of feature batches.
      keep: names of features returned beside the outputs (example ids, weights, labels).
      batch_size: the global batch; `predict_batch_size` by default (pass `eval_batch_size`
        when predicting an evaluation set, to score it).

    Returns:
      Dict of numpy arrays, one row per dataset row (padding rows included), in order.
    """
    batch_size = batch_size or self.config.predict_batch_size
    logging.info("***** Running prediction *****  batch size %d", batch_size)
    with tfrecord_errors.naming_damaged_tfrecords():
      return self.trainer.predict(self._dataset_fn(input_fn, batch_size), keep)

  def write_eval_results(self, results, file_name=EVAL_RESULTS):
    """Writes `results` to `output_dir/<file_name>` (on the chief) and returns the path."""
    path = os.path.join(self.config.output_dir, file_name)
    if self.is_chief:
      write_eval_results(path, results)
    return path

  def save(self, *, vocab_file, do_lower_case, max_seq_length, labels=None, is_regression=False,
           extra=None):
    """Saves the fine-tuned model folder in `output_dir` and exports it to `export_dir` if set.

    Only the chief writes. The folder's kind is the model's: see
    `official_bert.checkpoints.save_model_dir` for its files, and
    `official_bert.export.export_model_dir` for the SavedModel.

    Args:
      vocab_file: the vocabulary the model was trained with (copied in).
      do_lower_case: whether the text was lower-cased.
      max_seq_length: the sequence length of training.
      labels: optional label names in class-id order.
      is_regression: the model is a one-output classifier that scores a number.
      extra: optional task settings for the export (e.g. `{"sentence_pair": True}`).

    Returns:
      The SavedModel path when exported (replacing an earlier export there), else
      `output_dir`.
    """
    output_dir = self.config.output_dir
    if not self.is_chief:
      return output_dir
    save_model_dir(self.model, output_dir, vocab_file=vocab_file, do_lower_case=do_lower_case,
                   max_seq_length=max_seq_length, labels=labels, is_regression=is_regression,
                   extra=extra)
    if not self.config.export_dir:
      return output_dir
    return export.export_model_dir(output_dir, self.config.export_dir, overwrite=True)
