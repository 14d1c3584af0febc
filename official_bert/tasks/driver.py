"""The one driver: runs any `Task` through validate -> train -> evaluate -> predict -> save.

Every script is its flags plus one call of `run`; what differs between tasks lives in the task
(`official_bert.tasks.base.Task`), what is the same lives here:

1. validate everything that can be checked before training: the modes against the task and the
   strategy, the sequence length against the model, the casing against the init checkpoint, and
   every split the run will read (the task's `validate`);
2. build the model under the engine's strategy, resuming from `output_dir` or starting from
   `init_checkpoint` (`runner.Runner`);
3. train; evaluate into `eval_results.txt`; predict into the task's files;
4. save the model folder in `output_dir` (and the SavedModel in `export_dir`) after training;
5. log one summary line: what was read, the step, and every file written.

Example (the whole of `run_classifier.py --task_name=MRPC --do_train --do_eval`):

    task = ClassificationTask(bert_config=BertConfig.from_json_file("bert_config.json"),
                              vocab_file="vocab.txt", task_name="MRPC", data_dir="glue/MRPC")
    run(task, RunConfig(output_dir="/tmp/mrpc", init_checkpoint="bert_model.ckpt"),
        Modes(train=True, eval=True))
"""

from absl import logging

from official_bert.tasks import runner as runner_lib

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
  task.validate(modes, config.init_checkpoint)
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
