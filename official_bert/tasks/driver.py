"""The one driver: runs any `Task` through validate -> train -> evaluate -> predict -> save.

Every script is its flags plus one call of `run`; what differs between tasks lives in the task
(`official_bert.tasks.base.Task`), what is the same lives here:

1. validate everything that can be checked before training: the modes against the task and the
   strategy, the sequence length against the model, the casing and kind of the init checkpoint,
   and every split the run will read (the task's `validate`);
2. lock the output folder for the length of the run, and check that it was made for this run
   (`output_folder`: the run's fingerprint; `overwrite_output_dir` clears it for a fresh start);
3. build the model under the engine's strategy, resuming from `output_dir` or starting from
   `init_checkpoint` (`runner.Runner`);
4. train; evaluate into `eval_results.txt`; predict into the task's files;
5. save the model folder in `output_dir` (and the SavedModel in `export_dir`) after training;
6. log one summary line: what was read, the step, and every file written.

Example (the whole of `run_classifier.py --task_name=MRPC --do_train --do_eval`):

    task = ClassificationTask(bert_config=BertConfig.from_json_file("bert_config.json"),
                              vocab_file="vocab.txt", task_name="MRPC", data_dir="glue/MRPC")
    run(task, RunConfig(output_dir="/tmp/mrpc", init_checkpoint="bert_model.ckpt"),
        Modes(train=True, eval=True))
"""

from absl import logging

from official_bert.common.errors import UserError
from official_bert.tasks import output_folder, run_paths
from official_bert.tasks import runner as runner_lib
from official_bert.training import distribution

_MULTI_WORKER = "multi_worker_mirrored"


def check_strategy(task, config, modes):
  """Refuses, before any work, a run the strategy cannot finish.

  Scoring a split and writing predictions gather every example's outputs in one process;
  multi-worker training splits them over machines, so such a run would fail only once training
  had finished.
  """
  if config.engine.distribution_strategy == _MULTI_WORKER and task.needs_one_machine(modes):
    wanted = " and ".join(f"--do_{mode}" for mode in modes.names() if mode != "train")
    raise ValueError(f"{wanted} run on one machine (all of its replicas) only, not under "
                     f"{_MULTI_WORKER}: train with {_MULTI_WORKER}, then evaluate or predict "
                     "on one machine with the same output_dir (it restores the newest "
                     "checkpoint).")


def run(task, config, modes):
  """Runs `task` as `modes` ask, with the hyper-parameters and engine of `config`.

  Args:
    task: the `Task`.
    config: the `runner.RunConfig` (output folder, init checkpoint, batch sizes, schedule,
      export folder, engine).
    modes: the `base.Modes` (train, eval, predict).

  Returns:
    The evaluation results (dict of floats with `global_step`); empty without evaluation.
  """
  check_strategy(task, config, modes)
  if config.overwrite_output_dir and not modes.train:
    raise UserError("overwrite_output_dir starts a fresh training run: it needs do_train (a run "
                    "that only evaluates or predicts would lose the trained model).")
  task.validate(modes, config.init_checkpoint)
  run_paths.check_run_folders(config, resumes=task.resumes)
  # Only the chief writes into output_dir under multi-worker training, so only it locks.
  chief = distribution.is_chief_before_setup(config.engine.distribution_strategy)
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
    return _run_steps(task, config, modes)
  finally:
    if chief:
      lock.release()


def run_fingerprint(task, config):
  """The task's fingerprint (`Task.fingerprint`) with the run's schedule and init checkpoint.

  Args:
    task: the validated `Task`.
    config: the `runner.RunConfig`.
  """
  fingerprint = task.fingerprint()
  engine = config.engine
  fingerprint["training"].update(
      init_checkpoint=config.init_checkpoint, train_batch_size=config.train_batch_size,
      learning_rate=config.learning_rate, num_train_epochs=config.num_train_epochs,
      warmup_proportion=config.warmup_proportion, optimizer_type=engine.optimizer_type,
      weight_decay=engine.weight_decay)
  return fingerprint


def _run_steps(task, config, modes):
  runner = runner_lib.Runner(task, config, train=modes.train)
  if not modes.train and not runner.head_restored:
    task.untrained(config.output_dir)
  written = []
  if modes.train:
    runner.train(task.train_input_fn(runner))
  results = {}
  if modes.eval:
    results = task.evaluate(runner)
    if results:
      written.append(runner.write_eval_results(results))
  if modes.predict:
    written += task.predict(runner)
  if modes.train or config.export_dir:
    written += task.save(runner)
  logging.info("***** Summary *****  %s, step %d; %s; wrote %s", task.name, runner.global_step,
               "; ".join(task.summary) or "no data read", ", ".join(written) or "nothing")
  return results
