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
   `init_checkpoint` (`runner.Runner`);
4. train on the task's inputs, in the trainer's batches and with the run's seed; evaluate each
   of the task's evaluation splits into `eval_results.txt`; predict its prediction splits; the
   task turns the outputs into results and files (`Task.postprocess`);
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
import importlib

from absl import logging

from official_bert.checkpoints import check_init_checkpoint
from official_bert.common.errors import UserError
from official_bert.tasks import experiment, output_folder, run_paths
from official_bert.tasks import runner as runner_lib
from official_bert.training import distribution

_MULTI_WORKER = "multi_worker_mirrored"


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
  """The `Task` of an `ExperimentConfig`: its task node's `task_class`, with its model.

  Args:
    config: the `ExperimentConfig`.
  """
  if config.task is None or config.task.task_class is None:
    raise ValueError(f"The config names no task class to build (task {config.task!r}): build the "
                     "Task yourself and call run(task, config, modes).")
  module, name = config.task.task_class.rsplit(".", 1)
  return getattr(importlib.import_module(module), name).from_config(config.task, config.model)


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
  for name, value in (("task", task.config()), ("model", task.bert_config)):
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
                export_dir=config.export_dir)
  # As validated: what the task found (feature extraction's model and vocabulary) is recorded.
  config = dataclasses.replace(config, task=task.config(), model=task.bert_config)
  config.log()
  run_paths.check_run_folders(config, resumes=task.resumes)
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
                            + [config.init_checkpoint, task.vocab_file])
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


def _evaluate(task, runner, config):
  """Scores each evaluation split; returns `(results, files written)`."""
  results, written = {}, []
  for split, prefix in task.eval_splits():
    inputs = task.build_inputs(split, config.output_dir, config.runtime.seed)
    if task.averages_eval:
      results.update(runner.evaluate(inputs, prefix=prefix, max_steps=task.max_eval_steps))
      continue
    outputs = runner.predict(inputs, keep=task.output_features,
                             batch_size=config.trainer.eval_batch_size)
    metrics, files = task.postprocess(split, outputs, config.output_dir)
    results.update(runner.eval_results(metrics, prefix))
    written += files
  return results, written


def _predict(task, runner, config):
  """Predicts each prediction split; returns `(scores of the splits that hold answers, files
  written)`."""
  scores, written = {}, []
  batch_size = config.trainer.predict_batch_size
  for split in task.predict_splits():
    if task.streams_predictions:
      written += task.write_predictions(split, runner.model, batch_size, config.output_dir)
      continue
    outputs = runner.predict(task.build_inputs(split, config.output_dir, config.runtime.seed),
                             keep=task.output_features, batch_size=batch_size)
    metrics, files = task.postprocess(split, outputs, config.output_dir)
    written += files
    if metrics is not None:
      scores.update(runner.eval_results(metrics, prefix=None))
  return scores, written


def _run_steps(task, config, modes, init_checkpoint):
  runner = runner_lib.Runner(task, config, train=modes.train, init_checkpoint=init_checkpoint)
  if not modes.train and not runner.head_restored:
    task.untrained(config.output_dir)
  written = []
  if modes.train:
    runner.train(task.build_inputs("train", config.output_dir, config.runtime.seed))
  results = {}
  if modes.eval:
    results, files = _evaluate(task, runner, config)
    written += files
    if results:
      written.append(runner.write_eval_results(results))
  if modes.predict:
    scores, files = _predict(task, runner, config)
    written += files
    if scores:
      written.append(runner.write_eval_results(scores))
      results.update(scores)
  if (modes.train or config.export_dir) and runner.is_chief:
    written += task.save(runner.model, config.output_dir, config.export_dir)
  logging.info("***** Summary *****  %s, step %d; %s; wrote %s", task.name, runner.global_step,
               "; ".join(task.summary) or "no data read", ", ".join(written) or "nothing")
  return results
