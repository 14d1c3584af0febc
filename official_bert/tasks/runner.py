"""The runner: one task's model under the engine's strategy, trained, evaluated and predicted.

`driver.run` creates one `Runner` per run from a `Task` (`official_bert.tasks.base`) and the
run's `experiment.ExperimentConfig`; only the driver uses it. The runner

* sets up the engine (`RuntimeConfig.setup()`: strategy, precision, seeds), hands the task the
  engine's kernels (`Task.kernels`) and builds the task's model and the optimizer
  (`OptimizerConfig.create`) in the strategy's scope, with the trainer's step count
  (`TrainerConfig.steps`: for fine-tuning `int(num_examples / train_batch_size *
  num_train_epochs)` and `int(num_train_steps * warmup_proportion)` warmup steps, as the original
  scripts);
* resumes from the newest checkpoint in `output_dir` (this package's own, or one the original
  google-research/bert wrote there: `official_bert.checkpoints.resume`), and otherwise loads
  `init_checkpoint` (an original TF1 checkpoint, a model folder or a Hugging Face folder, located
  once by the driver), logging what came from where and what starts freshly initialised;
* trains, evaluates and predicts with `official_bert.training.Trainer` in batches of the
  trainer's sizes, and writes `eval_results.txt` (`key = value` lines, sorted).
"""

import os

from absl import logging
import tensorflow as tf

from official_bert.checkpoints import restore_task_weights, resume
from official_bert.common import file_io, tfrecord_errors
from official_bert.training import distribution, progress
from official_bert.training.config import check_batch_split
from official_bert.training.trainer import Trainer

EVAL_RESULTS = "eval_results.txt"


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
  where they map, the Adam moments), or else loads `init_checkpoint`. A checkpoint in neither
  layout is a `ValueError`.

  Args:
    task: the `Task`: its `build_model` is called once, inside the strategy's scope; its
      `loss` and `metrics` drive the `Trainer`; its `num_train_examples` sets the steps.
    config: the `experiment.ExperimentConfig`.
    train: whether the run trains (then the optimizer is built).
    init_checkpoint: `config.init_checkpoint` as the driver located it
      (`checkpoints.LocatedCheckpoint`), or None.

  Attributes:
    strategy: the `tf.distribute.Strategy`.
    model: the task model.
    trainer: the `Trainer`.
    head_restored: whether the task head came from a checkpoint (resumed, or in
      `init_checkpoint`), i.e. the model is fine-tuned.
    num_train_steps, num_warmup_steps: the schedule (0 for a run that does not train).
    is_chief: whether this machine writes files (always, outside multi-worker training).
  """

  def __init__(self, task, config, *, train=False, init_checkpoint=None):
    self.config = config
    self.num_train_steps = self.num_warmup_steps = 0
    if train:
      self.num_train_steps, self.num_warmup_steps = config.trainer.steps(
          None if config.trainer.num_train_steps else task.num_train_examples())
    runtime, trainer = config.runtime, config.trainer
    self.strategy = runtime.setup()  # first: multi-worker set-up must precede other TF work
    if train:
      check_batch_split(trainer.train_batch_size, trainer.gradient_accumulation_steps,
                        self.strategy.num_replicas_in_sync)
    tf.io.gfile.makedirs(config.output_dir)
    # The kernels are a property of the model: the engine's choice for this strategy's devices.
    task.kernels = runtime.accelerator_choice(self.strategy).kernels
    with self.strategy.scope():
      self.model = task.build_model()
      optimizer = None
      if train:
        optimizer = trainer.optimizer.create(self.num_train_steps, self.num_warmup_steps,
                                             dtype=runtime.dtype)
    self.trainer = Trainer(self.model, task.loss, optimizer, strategy=self.strategy,
                           model_dir=config.output_dir, config=trainer, runtime=runtime,
                           metrics_fn=task.metrics,
                           restore_fn=resume.original_restore_fn(self.model, optimizer))
    self.is_chief = distribution.is_chief(self.strategy)
    restored_step = self.trainer.restore() if task.resumes else 0
    self.head_restored = restored_step > 0
    if restored_step == 0 and init_checkpoint:
      self.head_restored = bool(restore_task_weights(self.model, init_checkpoint))
      logging.info("Initialised the encoder%s from %s.",
                   " and the heads" if self.head_restored else "", os.fspath(init_checkpoint))
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
    batch_size = self.config.trainer.train_batch_size
    logging.info("***** Running training *****  batch size %d, %d steps (%d warmup)",
                 batch_size, self.num_train_steps, self.num_warmup_steps)
    with tfrecord_errors.naming_damaged_tfrecords():
      return self.trainer.train(self._dataset_fn(input_fn, batch_size),
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
    batch_size = self.config.trainer.eval_batch_size
    logging.info("***** Running evaluation *****  batch size %d%s", batch_size,
                 f", at most {max_steps} steps" if max_steps else "")
    with tfrecord_errors.naming_damaged_tfrecords():
      results = self.trainer.evaluate(self._dataset_fn(input_fn, batch_size), max_steps)
    results.pop("examples")
    return self.eval_results(results, prefix)

  def eval_results(self, metrics, prefix="eval"):
    """Names `metrics` `<prefix>_<name>`, adds `global_step` and logs them to TensorBoard.

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
      batch_size: the global batch; the trainer's `predict_batch_size` by default.

    Returns:
      Dict of numpy arrays, one row per dataset row (padding rows included), in order.
    """
    batch_size = batch_size or self.config.trainer.predict_batch_size
    logging.info("***** Running prediction *****  batch size %d", batch_size)
    with tfrecord_errors.naming_damaged_tfrecords():
      return self.trainer.predict(self._dataset_fn(input_fn, batch_size), keep)

  def write_eval_results(self, results, file_name=EVAL_RESULTS):
    """Writes `results` to `output_dir/<file_name>` (on the chief) and returns the path."""
    path = os.path.join(self.config.output_dir, file_name)
    if self.is_chief:
      write_eval_results(path, results)
    return path
