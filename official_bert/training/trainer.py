"""`Trainer`: the training, evaluation and prediction loops that every script shares.

Its contract (the package docstring of `official_bert.training` shows a whole script):

* `loss_fn(outputs, labels)` returns a dict of float scalars with at least `loss`, the value
  minimised; the other entries are logged (e.g. `masked_lm_loss`). Each is a mean over the
  replica's batch: as in the original TPU code, each replica's loss is its own batch mean and the
  gradients are averaged over replicas.
* `metrics_fn(outputs, labels)` (optional) returns `{name: (total, count)}`; a metric is
  `sum(total) / sum(count)` over the logging interval or the whole evaluation set (accuracy:
  correct predictions and predictions).
* A `dataset_fn(input_context)` returns a `tf.data.Dataset` of per-replica batches
  (`input_context.get_per_replica_batch_size(global_batch_size)`), reading the input pipeline's
  shard (`input_context.input_pipeline_id` of `num_input_pipelines`). Training and evaluation
  datasets yield `(features, labels)`; training ones repeat and drop the last partial batch,
  evaluation ones end, and their final partial batch counts.

The training loop runs `steps_per_loop` steps per `tf.function` call. Each step: the gradients of
each replica's loss (over `gradient_accumulation_steps` micro-batches), summed over replicas,
then handed to one update object that clips them to `clip_norm` and applies them
(`official_bert.training.updates`: its form, plain, compiled apart, through bfloat16 weight
copies or on the fused AdamW kernel, is chosen once by `updates.choose`). A checkpoint (model,
optimizer, step, dropout random state and, where possible, the input position) is written every
`save_checkpoints_steps`; running the same command again resumes from the newest one. On one
device the input position is restored exactly from the checkpointed `tf.data` iterator.
`tf.distribute`'s distributed iterators cannot be checkpointed, so with several replicas
(mirrored, multi-worker, TPU) the resumed input skips the batches already consumed instead, which
repeats the same batches when the dataset is deterministic (seeded shuffles) at the cost of
reading them again.
A non-finite loss stops training with `NonFiniteLossError`; the state is not saved.
"""

import os
import re

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert import ops
from official_bert.training import checkpointing, distribution, progress, updates
from official_bert.training.config import RuntimeConfig, TrainerConfig

_ALL_STEPS = 2**31 - 1


class NonFiniteLossError(FloatingPointError):
  """A loss became NaN or infinite during training."""


class _GradientsMissing(Exception):
  """Raised while tracing a step: the loss does not reach the variables where `mask` is True."""

  def __init__(self, mask):
    super().__init__(f"{sum(mask)} variables get no gradient")
    self.mask = mask


class Trainer:
  """Trains, evaluates and runs a Keras model under a `tf.distribute` strategy.

  Args:
    model: a Keras model built in `strategy.scope()`, taking the datasets' features.
    loss_fn: `loss_fn(outputs, labels)` -> dict of scalars with `loss` (see the module docstring).
    optimizer: a Keras optimizer built in `strategy.scope()` (see `create_optimizer`); None for a
      trainer that only evaluates and predicts.
    strategy: the `tf.distribute.Strategy` (see `RuntimeConfig.setup`).
    model_dir: where checkpoints and TensorBoard summaries (`train/`, `eval/`) go.
    config: the `TrainerConfig`: the loop's rhythm, gradient accumulation and the optimizer's
      clipping (the optimizer itself is built by the caller: `config.optimizer.create`).
    runtime: the `RuntimeConfig`: its XLA and kernels choice for `strategy`.
    metrics_fn: optional `metrics_fn(outputs, labels)` -> `{name: (total, count)}`.
    data_checkpointing: how `train` restores the input position: `iterator` (checkpoint the
      `tf.data` iterator; one replica only), `skip` (skip the consumed batches) or `auto`
      (`iterator` on one replica, else `skip`).
    restore_fn: optional `restore_fn(path)` for checkpoints in another layout than the
      trainer's own: it loads the model (and optimizer) state from `path` and returns its step,
      or returns None for a checkpoint of the trainer's own layout, which the trainer reads.
  """

  def __init__(self, model, loss_fn, optimizer=None, *, strategy, model_dir,
               config=TrainerConfig(), runtime=RuntimeConfig(), metrics_fn=None,
               data_checkpointing="auto", restore_fn=None):
    if data_checkpointing not in ("auto", "iterator", "skip"):
      raise ValueError(f"data_checkpointing must be auto, iterator or skip, got "
                       f"{data_checkpointing!r}.")
    self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
    self.metrics_fn, self.strategy, self.model_dir, self.config = (
        metrics_fn, strategy, model_dir, config)
    self.restore_fn = restore_fn
    # Distributed datasets are needed only with several replicas; a plain `tf.data` iterator
    # serves one replica and, unlike a distributed one, can be checkpointed.
    self._distributed = strategy.num_replicas_in_sync > 1 or distribution.is_tpu(strategy)
    if data_checkpointing == "iterator" and self._distributed:
      raise ValueError("data_checkpointing='iterator' needs a single replica; tf.distribute "
                       "cannot checkpoint the iterators of distributed datasets.")
    self.checkpoint_iterator = data_checkpointing != "skip" and not self._distributed
    with strategy.scope():
      self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                     aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      if optimizer is not None:
        optimizer.build(model.trainable_variables)
    # Dropout draws from Keras seed generators whose states Keras does not checkpoint; saving them
    # makes a resumed run draw the same masks as an uninterrupted one.
    random_states = [v for v in model.non_trainable_variables if v.name == "seed_generator_state"]
    self._trackables = dict(model=model, global_step=self.global_step, random_states=random_states)
    if optimizer is not None:
      self._trackables["optimizer"] = optimizer
    # XLA compiles what a replica computes alone. On one device that is the whole step. With
    # several replicas, the gradients' all-reduce and Keras' optimizer update are synchronisation
    # points (`merge_call` into the cross-replica context, updating every replica's copy of the
    # variables), which a nested `tf.function` refuses to trace; there each replica compiles its
    # forward and backward pass, and the reduction and update run around it as a graph. The
    # compiled functions are called from plain Python functions: `MirroredStrategy.run` given a
    # compiled `tf.function` itself (on anything but GPUs only) wraps all replicas' calls into one
    # copy of it, one XLA program on the first device, which then fails on the other replicas'
    # variables. TPUs compile everything themselves.
    choice = runtime.accelerator_choice(strategy)
    # The engine's kernels for the gradients' norm (the model's own are its own choice).
    self._kernels = ops.kernels(choice.kernels)
    xla = choice.enable_xla and not distribution.is_tpu(strategy)
    compiled = ((lambda fn: tf.function(fn, jit_compile=True, autograph=False)) if xla
                else (lambda fn: fn))
    # On one device each step is a `tf.function` of its own, with XLA or without: `_prepare`
    # traces it, and the loop that calls it finds that trace.
    whole, parts = ((lambda fn: tf.function(fn, jit_compile=xla or None, autograph=False),
                     lambda fn: fn) if not self._distributed else (lambda fn: fn, compiled))
    # A step without XLA may still compile its update (see `accelerators`); the form is chosen
    # with the trained variables' list (`_prepare`, `updates.choose`).
    self._compile_update = choice.compile_update
    self._update = None
    self._replica_train_step = whole(self._train_step)
    self._replica_gradients = parts(self._local_gradients)
    self._replica_eval_step = whole(self._eval_step)
    self._replica_eval_logs = parts(lambda features, labels: self._logs(features, labels, False))
    self._replica_predict_step = compiled(self._predict)
    # The loops are written with `tf.while_loop` and traced without AutoGraph: converting the
    # model's Python (every layer's `call`, the losses) took a third of the time to trace a step.
    self._train_loop = tf.function(self._loop, autograph=False)
    self._eval_loop = tf.function(self._eval, autograph=False)
    self._predict_step = tf.function(
        lambda features: strategy.run(lambda f: self._replica_predict_step(f), args=(features,)),
        reduce_retracing=True, autograph=False)
    self._spec = self._variables = None
    # The checkpoint `restore` read last (not always the newest: see `restore`).
    self.restored_checkpoint = None

  # === Checkpoints ===

  def latest_checkpoint(self):
    """The newest checkpoint in `model_dir`, or None."""
    return tf.train.latest_checkpoint(self.model_dir)

  def restore(self, path=None):
    """Restores model, optimizer, step and random state from a checkpoint.

    Args:
      path: a checkpoint prefix; by default the newest in `model_dir` that can be read (see
        `checkpointing.restore_newest`).

    Returns:
      The global step restored, 0 when there is no checkpoint.

    Raises:
      checkpointing.UnreadableCheckpointError: `model_dir` holds checkpoints, none readable.
    """
    newest = path or self.latest_checkpoint()
    foreign_step = self.restore_fn(newest) if newest and self.restore_fn else None
    if foreign_step is not None:
      path = newest
      self.global_step.assign(foreign_step)
    else:
      checkpoint = tf.train.Checkpoint(**self._trackables)
      if path is None:
        path = checkpointing.restore_newest(checkpoint, self.model_dir)
      else:
        checkpoint.read(path).expect_partial()
    self.restored_checkpoint = path
    if path is None:
      return 0
    step = int(self.global_step.numpy())
    logging.info("Restored %s (step %d).", path, step)
    return step

  # === Training ===

  def train(self, dataset_fn, num_steps):
    """Trains until the global step reaches `num_steps`, resuming from `model_dir`.

    Args:
      dataset_fn: `dataset_fn(input_context)` -> repeated dataset of per-replica
        `(features, labels)` batches.
      num_steps: the global step to stop at (the schedule's `num_train_steps`, usually).

    Returns:
      Dict of the last logging interval's averaged losses, metrics, `gradient_norm` and
      `examples_per_second` (empty when the run had already reached `num_steps`).

    Raises:
      NonFiniteLossError: a loss became NaN or infinite; the newest checkpoint is the last good
        state.
    """
    if self.optimizer is None:
      raise ValueError("This Trainer has no optimizer; pass one to train.")
    step = self.restore()
    if step >= num_steps:
      logging.info("Training already reached step %d of %d.", step, num_steps)
      return {}
    latest = self.restored_checkpoint
    resume_iterator = (self.checkpoint_iterator and latest is not None
                       and checkpointing.holds_iterator(latest))
    iterator = iter(self._dataset(dataset_fn, skip_steps=0 if resume_iterator else step))
    data = {checkpointing.ITERATOR_KEY: iterator} if self.checkpoint_iterator else {}
    checkpoint = tf.train.Checkpoint(**self._trackables, **data)
    if resume_iterator:
      try:
        checkpoint.read(latest).expect_partial()
        logging.info("Resumed the input at step %d from the checkpointed iterator.", step)
      except tf.errors.NotFoundError as error:
        # The iterator's state names the files it read: a moved or copied folder loses them.
        logging.warning(
            "The input position in %s cannot be restored (%s; was the folder moved?): resuming "
            "the input at step %d by skipping the batches already used.", latest,
            _gone_file(error), step)
        iterator = iter(self._dataset(dataset_fn, skip_steps=step))
        checkpoint = tf.train.Checkpoint(**self._trackables,
                                         **{checkpointing.ITERATOR_KEY: iterator})
        resume_iterator = False
    if not resume_iterator and step:
      logging.info("Resumed the input at step %d by skipping the batches already used.", step)
    self._prepare(with_gradients=True)
    self._update.restored()  # e.g. the weights' copies, from the weights as restored
    manager = checkpointing.checkpoint_manager(checkpoint, self.model_dir, self.strategy,
                                               self.config.keep_checkpoint_max)
    summary_dir = (os.path.join(self.model_dir, "train")
                   if distribution.is_chief(self.strategy) else None)
    reporter = progress.Progress(summary_dir, num_steps, step)
    interval, values = None, {}
    while step < num_steps:
      steps = min(self._to_multiple(step, self.config.steps_per_loop),
                  self._to_multiple(step, self.config.log_steps),
                  self._to_multiple(step, self.config.save_checkpoints_steps), num_steps - step)
      sums = _to_numpy(self._train_loop(iterator, tf.constant(steps, tf.int32)))
      step = int(self.global_step.numpy())
      self._check_finite(sums, step, latest=manager.latest_checkpoint)
      interval = sums if interval is None else tf.nest.map_structure(np.add, interval, sums)
      if step % self.config.log_steps == 0 or step == num_steps:
        values = _averages(interval, steps=step - reporter.last_step)
        values["gradient_norm"] = float(interval["gradient_norm"]) / (step - reporter.last_step)
        values["examples_per_second"] = reporter.report(step, values, interval["examples"],
                                                        self._learning_rate())
        interval = None
      if step % self.config.save_checkpoints_steps == 0 or step == num_steps:
        checkpointing.save(manager, step, self.strategy)
    return values

  def _loop(self, iterator, steps):
    """`steps` training steps in one `tf.function`, stopping early at a non-finite loss."""

    def step(i, sums, finite):
      del finite
      logs = self._first_replica(self.strategy.run(self._replica_train_step, args=next(iterator)))
      self.global_step.assign_add(1)
      finite = tf.reduce_all([tf.math.is_finite(v) for v in logs["losses"].values()])
      return i + 1, tf.nest.map_structure(tf.add, sums, logs), finite

    _, sums, _ = tf.while_loop(
        lambda i, sums, finite: tf.logical_and(i < steps, finite), step,
        (tf.constant(0), self._zeros(with_gradient_norm=True), tf.constant(True)))
    return sums

  def _train_step(self, features, labels):
    """One optimizer step on this replica's batch; returns losses and metrics of all replicas."""
    grads, logs = self._replica_gradients(features, labels)
    if self.strategy.num_replicas_in_sync > 1:
      grads, logs = tf.distribute.get_replica_context().all_reduce("sum", (grads, logs))
    return dict(logs, gradient_norm=self._update(grads))

  def _local_gradients(self, features, labels):
    """Gradients and logs of this replica's batch, averaged over its micro-batches."""
    steps = self.config.gradient_accumulation_steps
    share = 1.0 / (self.strategy.num_replicas_in_sync * steps)
    if steps == 1:
      return self._micro_gradients(features, labels, share)
    batch = tf.nest.flatten(features)[0].shape[0]
    if batch is not None and batch % steps:
      raise ValueError(f"The per-replica batch of {batch} examples does not split into "
                       f"gradient_accumulation_steps={steps} equal micro-batches.")
    micro = tf.nest.map_structure(
        lambda t: tf.reshape(t, tf.concat([[steps, -1], tf.shape(t)[1:]], 0)), (features, labels))

    def accumulate(i, grads, logs):
      new_grads, new_logs = self._micro_gradients(
          *tf.nest.map_structure(lambda t: t[i], micro), share)
      grads = [g + n for g, n in zip(grads, new_grads)]
      return i + 1, grads, tf.nest.map_structure(tf.add, logs, new_logs)

    zeros = [tf.zeros(v.shape, v.dtype) for v in self._variables]
    _, grads, logs = tf.while_loop(lambda i, *_: i < steps, accumulate,
                                   (tf.constant(0), zeros, self._zeros()))
    return grads, logs

  def _micro_gradients(self, features, labels, share):
    with tf.GradientTape() as tape, self._update.reading():
      logs = self._logs(features, labels, training=True)
      loss = self.optimizer.scale_loss(logs["losses"]["loss"] * share)
    logs["losses"] = {name: value * share for name, value in logs["losses"].items()}
    grads = self._update.gradients(tape, loss, self._variables)
    missing = self._update.missing(grads)
    if any(missing):
      raise _GradientsMissing(missing)  # caught by `_prepare`, which traces again without them
    return grads, logs

  def _learning_rate(self):
    return float(self.optimizer.learning_rate.numpy())

  def _check_finite(self, sums, step, latest):
    bad = {name: value for name, value in sums["losses"].items() if not np.isfinite(value)}
    if bad:
      raise NonFiniteLossError(
          f"Training stopped at step {step}: {', '.join(bad)} became "
          f"{', '.join(str(v) for v in bad.values())}. The state was not saved; the newest "
          f"checkpoint is {latest or 'none (no checkpoint was written yet)'}. Lower the learning "
          "rate, use float32 or bfloat16, or check the input data.")

  @staticmethod
  def _to_multiple(step, every):
    return every - step % every

  # === Evaluation and prediction ===

  def evaluate(self, dataset_fn, num_steps=None):
    """Computes losses and metrics over a whole evaluation set (or its first `num_steps` steps).

    Args:
      dataset_fn: `dataset_fn(input_context)` -> finite dataset of per-replica
        `(features, labels)` batches; a final partial batch counts.
      num_steps: optional limit on the steps (global batches).

    Returns:
      Dict of floats: each `loss_fn` entry averaged over the examples, each `metrics_fn` entry as
      `sum(total) / sum(count)` (these replace `loss_fn` entries of the same name), and
      `examples`, the number of examples evaluated.
    """
    iterator = iter(self._dataset(dataset_fn))
    self._prepare(with_gradients=False)
    sums = _to_numpy(self._eval_loop(iterator, tf.constant(num_steps or _ALL_STEPS, tf.int32)))
    if not sums["examples"]:
      raise ValueError("The evaluation dataset is empty.")
    results = dict(_averages(sums, steps=sums["examples"]), examples=int(sums["examples"]))
    logging.info("Evaluation over %d examples: %s", results["examples"],
                 "  ".join(f"{k} {v:.4g}" for k, v in results.items()))
    return results

  def _eval(self, iterator, steps):

    def step(i, sums, more):
      del more
      element = iterator.get_next_as_optional()

      def add():
        logs = self._first_replica(
            self.strategy.run(self._replica_eval_step, args=element.get_value()))
        return tf.nest.map_structure(tf.add, sums, logs)

      return i + 1, tf.cond(element.has_value(), add, lambda: sums), element.has_value()

    _, sums, _ = tf.while_loop(lambda i, sums, more: tf.logical_and(i < steps, more), step,
                               (tf.constant(0), self._zeros(), tf.constant(True)))
    return sums

  def _eval_step(self, features, labels):
    logs = self._replica_eval_logs(features, labels)
    examples = logs["examples"]
    # A replica left without data at the end of the set gets an empty batch, whose mean is NaN.
    logs["losses"] = {name: tf.where(examples > 0, value * examples, 0.0)
                      for name, value in logs["losses"].items()}
    if self._distributed:
      logs = tf.distribute.get_replica_context().all_reduce("sum", logs)
    return logs

  def _predict(self, features):
    return self.model(features, training=False)

  def predict(self, dataset_fn, keep=()):
    """Runs the model over a dataset and returns its outputs, one row per example.

    Args:
      dataset_fn: `dataset_fn(input_context)` -> finite dataset of per-replica batches of
        features (or of `(features, labels)`, labels ignored).
      keep: names of features to return beside the outputs (example ids, say).

    Returns:
      Dict of numpy arrays: the model's outputs and the kept features, in dataset order on one
      machine; under multi-worker strategies each worker gets the outputs of its own shard.
    """
    results = {}
    for element in self._dataset(dataset_fn):
      features = element[0] if isinstance(element, tuple) else element
      inputs = {name: value for name, value in features.items() if name not in keep}
      outputs = self._predict_step(inputs)
      if not isinstance(outputs, dict):
        outputs = {"outputs": outputs}
      outputs.update({name: features[name] for name in keep})
      for name, value in outputs.items():
        results.setdefault(name, []).extend(
            local.numpy() for local in self.strategy.experimental_local_results(value))
    return {name: np.concatenate(values) for name, values in results.items()}

  # === Shared ===

  def _dataset(self, dataset_fn, skip_steps=0):
    """The dataset of `dataset_fn`, distributed over the replicas when there are several."""
    def per_pipeline(input_context):
      dataset = dataset_fn(input_context)
      if skip_steps:
        local_replicas = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        dataset = dataset.skip(skip_steps * local_replicas)
      self._element_spec = dataset.element_spec
      return dataset
    if not self._distributed:
      return per_pipeline(tf.distribute.InputContext())
    return self.strategy.distribute_datasets_from_function(per_pipeline)

  def _logs(self, features, labels, training):
    """Model outputs -> `{"losses": {...}, "metrics": {name: (total, count)}, "examples": n}`."""
    outputs = self.model(features, training=training)
    losses = self.loss_fn(outputs, labels)
    if not isinstance(losses, dict) or "loss" not in losses:
      raise ValueError(f"loss_fn must return a dict with a 'loss' entry, got {losses!r}.")
    metrics = self.metrics_fn(outputs, labels) if self.metrics_fn else {}
    return {
        "losses": {name: tf.cast(value, tf.float32) for name, value in losses.items()},
        "metrics": {name: (tf.cast(total, tf.float32), tf.cast(count, tf.float32))
                    for name, (total, count) in metrics.items()},
        "examples": tf.cast(tf.shape(tf.nest.flatten(features)[0])[0], tf.float32),
    }

  def _prepare(self, with_gradients):
    """Finds the structure of the logs and the variables that get gradients.

    The loops sum the logs in `tf.function`s, which needs their structure before the first
    step; a model may have variables the loss does not reach (the pooler of a span labeler),
    which are left out of the update. On one device, without micro-batches, tracing the step
    itself tells both (a step that finds variables without gradients is traced again without
    them), and the loop then calls that trace. Otherwise (several replicas, whose steps are
    traced inside `strategy.run`, or micro-batches, whose sums need the structure inside the
    step) a forward and backward pass is traced once for them, beside the step.
    """
    if self._spec is not None and (self._update is not None or not with_gradients):
      return
    features, labels = self._element_spec
    steps_first = (not self._distributed
                   and (not with_gradients or self.config.gradient_accumulation_steps == 1))
    if not steps_first:
      self._prepare_by_tracing_the_logs(features, labels, with_gradients)
    elif not with_gradients:
      outputs = self._replica_eval_step.get_concrete_function(features, labels).structured_outputs
      self._spec = _specs(outputs)
    else:
      variables = self.model.trainable_variables
      while True:
        self._choose_update(variables)
        try:
          step = self._replica_train_step.get_concrete_function(features, labels)
          break
        except _GradientsMissing as missing:
          variables = [v for v, none in zip(variables, missing.mask) if not none]
      outputs = dict(step.structured_outputs)
      del outputs["gradient_norm"]
      self._spec = _specs(outputs)

  def _prepare_by_tracing_the_logs(self, features, labels, with_gradients):
    connected = []

    def trace(features, labels):
      with tf.GradientTape() as tape:
        logs = self._logs(features, labels, training=True)
      if with_gradients:
        grads = tape.gradient(logs["losses"]["loss"], self.model.trainable_variables)
        connected.extend(g is not None for g in grads)
      return logs

    outputs = tf.function(trace, autograph=False).get_concrete_function(
        features, labels).structured_outputs
    self._spec = _specs(outputs)
    if with_gradients:
      self._choose_update([v for v, c in zip(self.model.trainable_variables, connected) if c])

  def _choose_update(self, variables):
    """Trains `variables` (those of the model that the loss reaches) with the update form that
    `updates.choose` picks."""
    self._variables = list(variables)
    trained = {id(v) for v in self._variables}
    unused = [v.path for v in self.model.trainable_variables if id(v) not in trained]
    if unused:
      logging.info("The loss does not depend on %s; they are not trained.", ", ".join(unused))
    self._update = updates.choose(
        self.optimizer, self._variables, clip_norm=self.config.optimizer.clip_norm,
        replicas=self.strategy.num_replicas_in_sync,
        compile_update=self._compile_update and not self._distributed,
        accumulation_steps=self.config.gradient_accumulation_steps,
        dtype_policy=self.model.dtype_policy, global_norm=self._kernels.global_norm)

  def _zeros(self, with_gradient_norm=False):
    zeros = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), self._spec)
    return dict(zeros, gradient_norm=tf.zeros([])) if with_gradient_norm else zeros

  def _first_replica(self, values):
    return tf.nest.map_structure(lambda v: self.strategy.experimental_local_results(v)[0], values)


def _specs(structure):
  """The `tf.TensorSpec` of each tensor of a traced function's outputs."""
  return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), structure)


def _to_numpy(structure):
  return tf.nest.map_structure(lambda t: t.numpy(), structure)


def _averages(sums, steps):
  """Losses divided by `steps` (steps or examples); metrics as total / count."""
  values = {name: float(value / steps) for name, value in sums["losses"].items()}
  values.update({name: float(total / count) if count else float("nan")
                 for name, (total, count) in sums["metrics"].items()})
  return values


def _gone_file(error):
  """The file that a `NotFoundError` of a restored iterator names, or its first line."""
  found = re.search(r"from checkpoint: (.*?); No such file", error.message)
  return f"{found.group(1)} is gone" if found else error.message.strip().splitlines()[0]
