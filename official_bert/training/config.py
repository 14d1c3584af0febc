"""The engine's configs: what training does (`TrainerConfig`, with its `OptimizerConfig`) and
where and how it runs (`RuntimeConfig`).

    TrainerConfig      batch sizes, epochs or steps, the loop's rhythm (steps per `tf.function`
                       call, logging, checkpoints), gradient accumulation
      optimizer        OptimizerConfig: type, learning rate, warmup, weight decay, clipping,
                       betas, epsilon
    RuntimeConfig      strategy, devices, dtype, XLA, kernels, determinism, seed

A `Trainer` is built from the two; `tasks.experiment.ExperimentConfig` holds them as its
`trainer` and `runtime` beside the task and the model. Each setting is declared once, here, with
its meaning in the class docstring. A field that changes what training learns says so in its
metadata (`setting`): the output folder's fingerprint (`tasks.output_folder`) is made of those
fields, so a folder made for other settings is not silently resumed.
`official_bert.cli.engine_flags` builds both from the command line.
"""

import dataclasses

from absl import logging
import keras
import tensorflow as tf

from official_bert import ops
from official_bert.common.errors import UserError
from official_bert.training import accelerators, distribution, optimization

DTYPES = {"float32": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
# The sections of the output folder's fingerprint: `model` must match for any run on a folder,
# `training` for a run that trains.
MODEL, TRAINING = "model", "training"


def setting(section, default, *, key=None, only_with=None, unless_default=False):
  """A dataclass field that joins `section` of the output folder's fingerprint.

  Args:
    section: `MODEL` or `TRAINING`.
    default: the field's default value.
    key: the name in the fingerprint, when it is not the field's (a fingerprint keeps the names
      that earlier versions recorded, so that their folders still resume).
    only_with: a boolean field of the same config; while it is off, the fingerprint records None
      (the setting has no effect then).
    unless_default: record the value only when it differs from `default`: for a setting that
      earlier versions did not record, whose folders were all made with the default.
  """
  return dataclasses.field(default=default, metadata={
      "fingerprint": section, "key": key, "only_with": only_with,
      "unless_default": unless_default})


def fingerprint_parts(node, parts):
  """Adds the fields of the config `node` that `setting` marks to `parts`, descending into the
  configs it holds.

  Args:
    node: a config dataclass (an `ExperimentConfig`, a `TrainerConfig`, ...).
    parts: `{section: {name: value}}`, updated in place; a value with `to_dict` (a `BertConfig`)
      is recorded as its dict.
  """
  for field in dataclasses.fields(node):
    value = getattr(node, field.name)
    section = field.metadata.get("fingerprint")
    if not section:
      if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fingerprint_parts(value, parts)
      continue
    if field.metadata["unless_default"] and value == field.default:
      continue
    only_with = field.metadata["only_with"]
    if only_with and not getattr(node, only_with):
      value = None
    parts[section][field.metadata["key"] or field.name] = (
        value.to_dict() if hasattr(value, "to_dict") else value)


def _check_at_least_one(config, names):
  for name in names:
    if getattr(config, name) < 1:
      raise ValueError(f"{name} must be at least 1, got {getattr(config, name)}.")


# === What training does ===


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """The optimizer and its learning-rate schedule (see `optimization.create_optimizer`).

  Args:
    type: `adamw` (the original's, no bias correction), `adamw_bias_corrected` (Keras' AdamW)
      or `lamb` (`--optimizer_type`).
    learning_rate: the peak learning rate of the warmup + linear decay schedule.
    warmup_proportion: fraction of the training steps spent warming the learning rate up,
      unless `num_warmup_steps` is set.
    num_warmup_steps: the warmup steps themselves; None takes `warmup_proportion` of the steps.
    weight_decay: decoupled weight decay rate (layer norms and biases exempt).
    clip_norm: clip the gradients (summed over replicas) to this global norm; None for no
      clipping.
    beta_1, beta_2: decay rates of Adam's (and LAMB's) moment estimates.
    epsilon: added to the denominator of the update.
  """

  type: str = setting(TRAINING, "adamw", key="optimizer_type")
  learning_rate: float = setting(TRAINING, 5e-5)
  warmup_proportion: float = setting(TRAINING, 0.1)
  num_warmup_steps: int | None = None
  weight_decay: float = setting(TRAINING, 0.01)
  clip_norm: float | None = 1.0
  beta_1: float = setting(TRAINING, 0.9, unless_default=True)
  beta_2: float = setting(TRAINING, 0.999, unless_default=True)
  epsilon: float = setting(TRAINING, 1e-6, unless_default=True)

  def __post_init__(self):
    if self.type not in optimization.OPTIMIZERS:
      raise ValueError(f"The optimizer type must be one of {', '.join(optimization.OPTIMIZERS)}, "
                       f"got {self.type!r}.")
    if self.learning_rate <= 0:
      raise ValueError(f"learning_rate must be positive, got {self.learning_rate}.")
    if not 0 <= self.warmup_proportion <= 1:
      raise ValueError(f"warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
    if self.num_warmup_steps is not None and self.num_warmup_steps < 0:
      raise ValueError(f"num_warmup_steps must not be negative, got {self.num_warmup_steps}.")

  def warmup_steps(self, num_train_steps):
    """`num_warmup_steps`, or `warmup_proportion` of `num_train_steps` rounded down (as the
    original scripts)."""
    if self.num_warmup_steps is not None:
      return self.num_warmup_steps
    return int(num_train_steps * self.warmup_proportion)

  def create(self, num_train_steps, num_warmup_steps, dtype="float32"):
    """Builds the Keras optimizer with its schedule; call it inside `strategy.scope()`.

    Args:
      num_train_steps: the step at which the learning rate reaches zero.
      num_warmup_steps: steps of linear warmup (`warmup_steps`).
      dtype: the run's dtype (`RuntimeConfig.dtype`): `float16` adds dynamic loss scaling.

    Example:

    >>> type(OptimizerConfig(type="lamb").create(100, 10)).__name__
    'Lamb'
    """
    return optimization.create_optimizer(
        self.type, self.learning_rate, num_train_steps, num_warmup_steps, self.weight_decay,
        beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """What a training run does: its batches, its length, the loop's rhythm and the optimizer.

  The batch, epoch and step flags are the original scripts'; the loop's flags are the engine's
  (`cli.engine_flags`).

  Args:
    train_batch_size: global training batch (all replicas).
    eval_batch_size: global evaluation batch.
    predict_batch_size: global prediction batch.
    num_train_epochs: passes over the training examples (may be fractional), unless
      `num_train_steps` is set.
    num_train_steps: the step count itself (pre-training's flag); None counts it from the
      epochs. Not in the fingerprint: the same run with more steps trains further.
    gradient_accumulation_steps: split each replica's batch into this many micro-batches and
      apply their averaged gradients at once: the update of the whole batch in less memory.
    steps_per_loop: training steps inside one `tf.function` call, so that Python runs once per
      loop rather than once per step.
    log_steps: steps between progress lines and TensorBoard points.
    save_checkpoints_steps: steps between checkpoints.
    keep_checkpoint_max: checkpoints kept (the newest).
    optimizer: the `OptimizerConfig`.

  Example:

  >>> config = TrainerConfig(train_batch_size=12, optimizer=OptimizerConfig(learning_rate=3e-5))
  >>> config.steps(num_examples=3000)  # 3 epochs of 12, a tenth of them warming up
  (750, 75)
  """

  train_batch_size: int = setting(TRAINING, 32)
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  num_train_epochs: float = setting(TRAINING, 3.0)
  num_train_steps: int | None = None
  gradient_accumulation_steps: int = 1
  steps_per_loop: int = 1000
  log_steps: int = 100
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  optimizer: OptimizerConfig = OptimizerConfig()

  def __post_init__(self):
    _check_at_least_one(self, ("train_batch_size", "eval_batch_size", "predict_batch_size",
                               "gradient_accumulation_steps", "steps_per_loop", "log_steps",
                               "save_checkpoints_steps", "keep_checkpoint_max"))
    if self.num_train_epochs <= 0:
      raise ValueError(f"num_train_epochs must be positive, got {self.num_train_epochs}.")
    if self.num_train_steps is not None and self.num_train_steps < 1:
      raise ValueError(f"num_train_steps must be at least 1, got {self.num_train_steps}.")
    check_batch_split(self.train_batch_size, self.gradient_accumulation_steps)

  def steps(self, num_examples=None):
    """`(num_train_steps, num_warmup_steps)`: the set counts, or from the epochs, rounded down
    as in the original scripts.

    Args:
      num_examples: training examples (features, for tasks that split long documents); not
        needed when `num_train_steps` is set.

    Example:

    >>> TrainerConfig().steps(3668)
    (343, 34)
    >>> TrainerConfig(num_train_steps=20, optimizer=OptimizerConfig(num_warmup_steps=10)).steps()
    (20, 10)
    """
    num_train_steps = self.num_train_steps
    if num_train_steps is None:
      num_train_steps = int(num_examples / self.train_batch_size * self.num_train_epochs)
      if num_train_steps < 1:
        raise ValueError(f"{num_examples} training examples in batches of "
                         f"{self.train_batch_size} for {self.num_train_epochs} epochs make no "
                         "training step; lower train_batch_size or raise num_train_epochs.")
    return num_train_steps, self.optimizer.warmup_steps(num_train_steps)


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


# === Where and how it runs ===


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
  """Where and how the engine runs, whatever the task: none of it changes what is learned
  (beyond rounding and the random draws).

  Args:
    distribution_strategy: `one_device`, `mirrored`, `multi_worker_mirrored` or `tpu` (see
      `distribution.get_strategy`).
    num_gpus: GPUs for `one_device` (0 or 1) and `mirrored`.
    tpu: TPU name or address for `tpu`.
    tpu_zone: GCE zone of a named TPU.
    gcp_project: Cloud project of a named TPU.
    dtype: `float32`, or `float16` / `bfloat16` for mixed precision (Keras policies
      `mixed_float16` / `mixed_bfloat16`: float32 weights, half-precision compute; float16 adds
      dynamic loss scaling).
    enable_xla: compile the training, evaluation and prediction steps with XLA (True), run them
      as TensorFlow graphs (False), or None: the engine's choice for the device and dtype
      (`official_bert.training.accelerators`: on CPUs XLA for float32, which fuses the
      element-wise work between the products, and no XLA for bfloat16, whose products only
      TensorFlow's oneDNN kernels run on the CPU's bfloat16 units). On one device the whole
      step (forward, backward and optimizer update) is one XLA program; with several replicas
      each replica's forward and backward pass is, and the gradients' all-reduce and the update
      run around it (see `Trainer`). TPUs always compile.
    kernels: the forms of the few backend-specific kernels (`official_bert.ops`) of the models
      the tasks build: `stock`, `cpu_xla`, `cpu_onednn`, or `auto`: on CPUs `cpu_xla` with XLA
      and `cpu_onednn` without, else `stock` (`accelerator_choice(strategy).kernels`).
    deterministic: make every op deterministic and seed Python, NumPy, TensorFlow and Keras
      with `seed`, so that two runs give the same weights (slower on some GPUs).
    seed: the random seed; None leaves the generators unseeded unless `deterministic`.
  """

  distribution_strategy: str = "one_device"
  num_gpus: int = 0
  tpu: str | None = None
  tpu_zone: str | None = None
  gcp_project: str | None = None
  dtype: str = "float32"
  enable_xla: bool | None = None
  kernels: str = "auto"
  deterministic: bool = False
  seed: int | None = None

  def __post_init__(self):
    if self.dtype not in DTYPES:
      raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}.")
    if self.kernels not in ops.CHOICES:
      raise ValueError(f"kernels must be one of {', '.join(ops.CHOICES)}, got {self.kernels!r}.")
    if self.kernels in ops.TENSORFLOW_ONLY:
      ops.kernels(self.kernels, argument="--kernels")  # refused on another Keras backend
    if self.distribution_strategy not in distribution.STRATEGIES:
      raise ValueError(f"distribution_strategy must be one of "
                       f"{', '.join(distribution.STRATEGIES)}, got {self.distribution_strategy!r}.")

  def setup(self):
    """Prepares TensorFlow and Keras for a run and returns its strategy.

    Call it once at the start, before building models: it creates the strategy (which must come
    before any other TensorFlow work for multi-worker training), sets the Keras dtype policy
    and turns on determinism and seeds. The kernels are the model's own: build it with
    `kernels=accelerator_choice(strategy).kernels`.

    Returns:
      The `tf.distribute.Strategy`; build the model and optimizer in its `scope()`.

    Example:

    >>> strategy = RuntimeConfig(dtype="float32").setup()
    >>> strategy.num_replicas_in_sync
    1
    """
    strategy = distribution.get_strategy(self.distribution_strategy, self.num_gpus, self.tpu,
                                         self.tpu_zone, self.gcp_project)
    keras.mixed_precision.set_global_policy(DTYPES[self.dtype])
    choice = self.accelerator_choice(strategy)
    if self.deterministic:
      tf.config.experimental.enable_op_determinism()
    if self.deterministic or self.seed is not None:
      keras.utils.set_random_seed(0 if self.seed is None else self.seed)
    logging.info("Runtime: %s; %s on %s: %s.", self, self.dtype,
                 distribution.device_type(strategy), choice.reason)
    if choice.warning:
      logging.warning(choice.warning)
    return strategy

  def accelerator_choice(self, strategy):
    """XLA and the kernels for this config's steps and models under `strategy`.

    Returns:
      An `accelerators.Choice`: `enable_xla` and `kernels` as given, or the engine's choice
      for the strategy's device type and this config's dtype.
    """
    flags = accelerators.cpu_flags()
    return accelerators.choose(distribution.device_type(strategy), self.dtype, flags,
                               self.enable_xla, self.kernels,
                               onednn=accelerators.onednn_enabled(flags))
