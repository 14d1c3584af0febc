"""The one driver: runs any `Task` through validate -> train -> evaluate -> predict -> save.

Every script is its flags, mapped onto one `experiment.ExperimentConfig`, plus one call of
`run_experiment`; what differs between tasks lives in the task (`official_bert.tasks.base.Task`),
what is the same lives here:

1. validate everything that can be checked before training: the modes against the task and the
   strategy, the init checkpoint (located once, here: `checkpoints.check_init_checkpoint`), the
   sequence length against the model, the casing, and every split the run will read (the task's
   `validate`);
2. log the whole config; lock the output folder for the length of the run, check that it was
   made for this run (`output_folder`: the run's fingerprint, from the config and the task's
   data; `overwrite_output_dir` clears it for a fresh start) and write the config into it
   (`experiment_config.json`);
3. build the model under the engine's strategy, resuming from `output_dir` or starting from
   `init_checkpoint` (`Runner`);
4. train on the task's inputs, in the trainer's batches and with the run's seed; evaluate each
   of the task's evaluation splits into `eval_results.txt`; predict its prediction splits (the
   task's `evaluate_split` and `predict_split`: by default the model's outputs over the split,
   which the task turns into results and files, `Task.postprocess`);
5. save the model folder in `output_dir` (and the SavedModel in `export_dir`) after training;
6. log one summary line: what was read, the step, and every file written.

Example (the whole of `run_classifier.py --task_name=MRPC --do_train --do_eval`):

    config = ExperimentConfig(
        task=ClassificationConfig(vocab_file="vocab.txt", task_name="MRPC",
                                  data_dir="glue/MRPC"),
        model=BertConfig.from_json_file("bert_config.json"),
        output_dir="/tmp/mrpc", init_checkpoint="bert_model.ckpt")
    run_experiment(config, Modes(train=True, eval=True))
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from official_bert.checkpoints import check_init_checkpoint, restore_task_weights, resume
from official_bert.common import file_io, registry, tfrecord_errors
from official_bert.common.errors import UserError
from official_bert.export import calibration, formats
from official_bert.tasks import (  # the package's tasks register their configs (base.register)
  base,
  classification,  # noqa: F401
  experiment,
  feature_extraction,  # noqa: F401
  multiple_choice,  # noqa: F401
  output_folder,
  pretraining,  # noqa: F401
  question_answering,  # noqa: F401
  run_paths,
  tagging,  # noqa: F401
)
from official_bert.training import distribution, progress
from official_bert.training.config import check_batch_split
from official_bert.training.trainer import Trainer

_MULTI_WORKER = "multi_worker_mirrored"
EVAL_RESULTS = "eval_results.txt"


def check_strategy(task, config, modes):
  """Refuses, before any work, a run the strategy cannot finish.

  Scoring a split and writing predictions gather every example's outputs in one process;
  multi-worker training splits them over machines, so such a run would fail only once training
  had finished.
  """
  if config.runtime.distribution_strategy == _MULTI_WORKER and task.needs_one_machine(modes):
    wanted = " and ".join(f"--do_{mode}" for mode in modes.names() if mode != "train")
    raise ValueError(f"{wanted} run on one machine (all of its replicas) only, not under "
                     f"{_MULTI_WORKER}: train with {_MULTI_WORKER}, then evaluate or predict "
                     "on one machine with the same output_dir (it restores the newest "
                     "checkpoint).")


def build_task(config):
  """The `Task` of an `ExperimentConfig`: the task registered for its task node's class
  (`base.register`), built from that node and the model.

  Args:
    config: the `ExperimentConfig`.
  """
  if config.task is None:
    raise ValueError("The config has no task to build: build the Task yourself and call "
                     "run(task, config, modes).")
  return base.task_class(config.task)(config.task, config.model)


def run_experiment(config, modes):
  """Runs the task of `config` (`build_task`) as `modes` ask: what every tool does.

  Args:
    config: the `ExperimentConfig`, e.g. read back from an earlier run's
      `experiment_config.json` (`ExperimentConfig.read`).
    modes: the `base.Modes`.

  Returns:
    The evaluation results (see `run`).
  """
  return run(build_task(config), config, modes)


def _check_task(config, task):
  """A task node or model given in `config` must be the task's own."""
  for name, value in (("task", task.config), ("model", task.bert_config)):
    given = getattr(config, name)
    if given is not None and given != value:
      raise ValueError(f"The config's {name} ({given}) is not the task's ({value}): leave it "
                       "None, or build the task from the config (run_experiment).")


def run(task, config, modes):
  """Runs `task` as `modes` ask, with the trainer, engine and paths of `config`.

  Args:
    task: the `Task`.
    config: the `experiment.ExperimentConfig` (paths, trainer, runtime); its `task` and
      `model`, when None, are filled in from the task.
    modes: the `base.Modes` (train, eval, predict).

  Returns:
    The evaluation results (dict of floats with `global_step`): those of the evaluation splits,
    and the scores of predicted splits that hold answers; empty without either.
  """
  check_strategy(task, config, modes)
  if config.overwrite_output_dir and not modes.train:
    raise UserError("overwrite_output_dir starts a fresh training run: it needs do_train (a run "
                    "that only evaluates or predicts would lose the trained model).")
  _check_task(config, task)
  init_checkpoint = (check_init_checkpoint(config.init_checkpoint) if config.init_checkpoint
                     else None)
  task.validate(modes, init_checkpoint, output_dir=config.output_dir,
                export_dir=config.export_dir, export_format=config.export_format)
  # As validated: what the task found (feature extraction's model and vocabulary) is recorded.
  config = dataclasses.replace(config, task=task.config, model=task.bert_config)
  config.log()
  run_paths.check_run_folders(config, resumes=task.resumes)
  if _calibrates(config) and not config.calibration_file and not _calibration_split(task, modes):
    raise calibration.CalibrationError(
        "--export_precision=int8 with --export_format=openvino calibrates on examples: give "
        "--calibration_file, or --do_eval (or --do_predict) to calibrate on that split.")
  # Only the chief writes into output_dir under multi-worker training, so only it locks.
  chief = distribution.is_chief_before_setup(config.runtime.distribution_strategy)
  lock = output_folder.OutputDirLock(config.output_dir)
  if chief:
    lock.acquire()
  try:
    if task.resumes:
      fingerprint = run_fingerprint(task, config)
      if config.overwrite_output_dir and chief:
        output_folder.clear(config.output_dir,
                            [f["file"] for f in fingerprint["training"]["data_files"]]
                            + [config.init_checkpoint, task.config.vocab_file])
      # A worker that is not the chief would race the chief's clearing: it trusts the chief.
      if chief or not config.overwrite_output_dir:
        output_folder.check_fingerprint(config.output_dir, fingerprint, train=modes.train,
                                        write=chief)
      if chief:
        config.write()
    return _run_steps(task, config, modes, init_checkpoint)
  finally:
    if chief:
      lock.release()


# The batch the default calibration examples are read in (they are used one at a time).
_CALIBRATION_BATCH = 32


def _calibrates(config):
  """Whether the run's export is calibrated on examples (OpenVINO's static int8)."""
  return (config.export_format, config.export_precision) == ("openvino", "int8")


def _calibration_split(task, modes):
  """The split OpenVINO's int8 calibrates on when no file is named: the first the run
  evaluates, else the first it predicts; None when it does neither."""
  if modes.eval and task.eval_splits():
    return task.eval_splits()[0][0]
  if modes.predict and task.predict_splits():
    return task.predict_splits()[0]
  return None


def _calibration_examples(task, config, modes):
  """The examples of `_calibration_split`, as the run read them."""
  split = _calibration_split(task, modes)
  examples = calibration.from_dataset(
      task.build_inputs(split, config.output_dir)(_CALIBRATION_BATCH, None))
  logging.info("The OpenVINO int8 export calibrates on %d examples of the %s split.",
               len(examples), split)
  return examples


def run_fingerprint(task, config):
  """What the run's output folder is for: the config's part (`experiment.fingerprint`) with
  what the task's data adds (`Task.fingerprint`).

  Args:
    task: the validated `Task`.
    config: the `ExperimentConfig`, its task and model filled in.
  """
  fingerprint = experiment.fingerprint(config)
  for section, values in task.fingerprint().items():
    fingerprint[section].update(values)
  return fingerprint


def _run_steps(task, config, modes, init_checkpoint):
  runner = Runner(task, config, train=modes.train, init_checkpoint=init_checkpoint)
  if config.export_dir and config.export_format != "saved_model" and runner.is_chief:
    # The model's kind is known now, still before any work: a format that cannot express its
    # signature stops the run here, not after training.
    formats.check_kind(config.export_format, registry.kind_of(runner.model),
                       config.calibration_file)
  if not modes.train and not runner.head_restored:
    task.untrained(config.output_dir)
  written = []
  if modes.train:
    runner.train(task.build_inputs("train", config.output_dir, runner.seed))
  results = {}
  if modes.eval:
    for split, prefix in task.eval_splits():
      metrics, files = task.evaluate_split(split, runner, config.output_dir)
      if metrics is not None:
        results.update(runner.eval_results(metrics, prefix))
      written += files
    if results:
      written.append(runner.write_eval_results(results))
  if modes.predict:
    scores = {}
    for split in task.predict_splits():
      metrics, files = task.predict_split(split, runner, config.output_dir)
      if metrics is not None:
        scores.update(runner.eval_results(metrics, prefix=None))
      written += files
    if scores:
      written.append(runner.write_eval_results(scores))
      results.update(scores)
  if (modes.train or config.export_dir) and runner.is_chief:
    # Passed only when set: a task written before them overrides `save` without them.
    settings = {name: getattr(config, name) for name, default in
                (("export_format", "saved_model"), ("export_precision", "float32"))
                if getattr(config, name) != default}
    if config.export_dir and _calibrates(config):
      settings["calibration"] = config.calibration_file or _calibration_examples(task, config,
                                                                                 modes)
    written += task.save(runner.model, config.output_dir, config.export_dir, **settings)
  logging.info("***** Summary *****  %s, step %d; %s; wrote %s", task.name, runner.global_step,
               "; ".join(task.summary) or "no data read", ", ".join(written) or "nothing")
  return results


# === The runner: one task's model under the engine ===


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

  Creating the runner sets up the engine (`RuntimeConfig.setup`: strategy, precision, seeds),
  hands the task the engine's kernels (`Task.kernels`), builds the model (and, for a run that
  trains, the optimizer with its schedule, `OptimizerConfig.create`, over the trainer's step
  count, `TrainerConfig.steps`), restores the newest checkpoint of `output_dir` (unless the task
  does not resume: `Task.resumes`), this package's or the original google-research/bert's
  (weights, `global_step` and, where they map, the Adam moments: `checkpoints.resume`), or else
  loads `init_checkpoint`, logging what came from where. A checkpoint in neither layout is a
  `ValueError`.

  `run` makes one per run and hands it to the task's `evaluate_split` and `predict_split`, which
  use its `predict` or `average`, `model`, `seed` and `config`.

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
    seed: the run's seed (`RuntimeConfig.seed`), for the task's inputs.
  """

  def __init__(self, task, config, *, train=False, init_checkpoint=None):
    self.config = config
    self.seed = config.runtime.seed
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

  def average(self, input_fn, max_steps=None):
    """Averages the losses and metrics over a whole evaluation set (or its first batches), in
    the trainer's evaluation batches.

    Args:
      input_fn: `input_fn(batch_size, input_context)` -> finite dataset of
        `(features, labels)` batches.
      max_steps: evaluate at most this many (global) batches; None for the whole set.

    Returns:
      Dict of floats: each loss and metric (see `Trainer.evaluate`).
    """
    batch_size = self.config.trainer.eval_batch_size
    logging.info("***** Running evaluation *****  batch size %d%s", batch_size,
                 f", at most {max_steps} steps" if max_steps else "")
    with tfrecord_errors.naming_damaged_tfrecords():
      results = self.trainer.evaluate(self._dataset_fn(input_fn, batch_size), max_steps)
    results.pop("examples")
    return results

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
