"""`EngineConfig`: how the training engine runs, whatever the task (pre-training or fine-tuning).

The task's own hyper-parameters (batch sizes, learning rate, steps) stay with the task; this
holds what every script shares: the distribution strategy, precision, XLA, the loop's rhythm
(steps per `tf.function` call, logging, checkpoints), the optimizer family and determinism.
`official_bert.cli.engine_flags.engine_config_from_flags` builds one from the command line.
"""

import dataclasses

from absl import logging
import keras
import tensorflow as tf

from official_bert import ops
from official_bert.training import accelerators, distribution

DTYPES = {"float32": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """Settings of the training engine.

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
      as TensorFlow graphs (False), or None: as measured fastest for the device and dtype
      (`official_bert.training.accelerators`: on CPUs XLA for float32, which fuses the
      element-wise work between the products, and no XLA for bfloat16, whose products only
      TensorFlow's oneDNN kernels run on the CPU's bfloat16 units). On one device the whole
      step (forward, backward and optimizer update) is one XLA program; with several replicas
      each replica's forward and backward pass is, and the gradients' all-reduce and the update
      run around it (see `Trainer`). TPUs always compile.
    kernels: the forms of the few backend-specific kernels (`official_bert.ops`) of the models
      the tasks build: `stock`, `cpu_xla`, `cpu_onednn`, or `auto`: on CPUs `cpu_xla` with XLA
      and `cpu_onednn` without, else `stock` (`accelerator_choice(strategy).kernels`).
    steps_per_loop: training steps inside one `tf.function` call, so that Python runs once per
      loop rather than once per step.
    gradient_accumulation_steps: split each replica's batch into this many micro-batches and
      apply their averaged gradients at once: the update of the whole batch in less memory.
    log_steps: steps between progress lines and TensorBoard points.
    save_checkpoints_steps: steps between checkpoints.
    keep_checkpoint_max: checkpoints kept (the newest).
    optimizer_type: `adamw` (the original's, no bias correction), `adamw_bias_corrected`
      (Keras' AdamW) or `lamb` (see `optimization.create_optimizer`).
    weight_decay: decoupled weight decay rate (layer norms and biases exempt).
    clip_norm: clip the gradients to this global norm; None for no clipping.
    deterministic: make every op deterministic and seed Python, NumPy, TensorFlow and Keras
      with `seed`, so that two runs give the same weights (slower on some GPUs).
    seed: the random seed; None leaves the generators unseeded unless `deterministic`.
  """

  distribution_strategy: str = "one_device"
  num_gpus: int = 0
  tpu: str = None
  tpu_zone: str = None
  gcp_project: str = None
  dtype: str = "float32"
  enable_xla: bool = None
  kernels: str = "auto"
  steps_per_loop: int = 1000
  gradient_accumulation_steps: int = 1
  log_steps: int = 100
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  optimizer_type: str = "adamw"
  weight_decay: float = 0.01
  clip_norm: float = 1.0
  deterministic: bool = False
  seed: int = None

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
    for name in ("steps_per_loop", "gradient_accumulation_steps", "log_steps",
                 "save_checkpoints_steps", "keep_checkpoint_max"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}.")

  def setup(self):
    """Prepares TensorFlow and Keras for a run and returns its strategy.

    Call it once at the start, before building models: it creates the strategy (which must come
    before any other TensorFlow work for multi-worker training), sets the Keras dtype policy
    and turns on determinism and seeds. The kernels are the model's own: build it with
    `kernels=accelerator_choice(strategy).kernels`.

    Returns:
      The `tf.distribute.Strategy`; build the model and optimizer in its `scope()`.

    Example:

    >>> strategy = EngineConfig(dtype="float32").setup()
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
    logging.info("Engine: %s; %s on %s: %s.", self, self.dtype,
                 distribution.device_type(strategy), choice.reason)
    if choice.warning:
      logging.warning(choice.warning)
    return strategy

  def accelerator_choice(self, strategy):
    """XLA and the kernels for this config's steps and models under `strategy`.

    Returns:
      An `accelerators.Choice`: `enable_xla` and `kernels` as given, or as measured fastest
      for the strategy's device type and this config's dtype.
    """
    flags = accelerators.cpu_flags()
    return accelerators.choose(distribution.device_type(strategy), self.dtype, flags,
                               self.enable_xla, self.kernels,
                               onednn=accelerators.onednn_enabled(flags))
