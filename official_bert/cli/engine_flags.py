"""absl flags of the training engine, shared by `run_pretraining.py` and the fine-tuning scripts.

A tool calls `define_engine_flags()` and `define_tpu_flags()` from its `define_flags()`, beside its
own flags, and in `main` turns them into the run's `RuntimeConfig` (`runtime_config_from_flags()`)
and, with its own schedule flags, its `TrainerConfig` (`trainer_config_from_flags()`):

    def define_flags():
      define_engine_flags()
      define_tpu_flags()
      ...

    def main():
      runtime = runtime_config_from_flags()
      trainer = trainer_config_from_flags(
          train_batch_size=FLAGS.train_batch_size,
          save_checkpoints_steps=FLAGS.save_checkpoints_steps,
          optimizer={"learning_rate": FLAGS.learning_rate})

The TPU flags are those of the original google-research/bert scripts (`--use_tpu --tpu_name=...`
selects the `tpu` strategy); `--iterations_per_loop` is another name for `--steps_per_loop`.
"""

from absl import flags

from official_bert import ops
from official_bert.common.errors import UserError
from official_bert.training import distribution, optimization
from official_bert.training.config import DTYPES, OptimizerConfig, RuntimeConfig, TrainerConfig

FLAGS = flags.FLAGS
_RUNTIME_DEFAULTS = RuntimeConfig()
_LOOP_DEFAULTS = TrainerConfig()
_OPTIMIZER_DEFAULTS = OptimizerConfig()


def define_engine_flags(flag_values=FLAGS):
  """Defines the engine's flags in `flag_values`: those of `RuntimeConfig`, and the loop's and
  the optimizer's of `TrainerConfig` (see their docstrings) that every script shares."""
  into = {"flag_values": flag_values}
  flags.DEFINE_enum("distribution_strategy", _RUNTIME_DEFAULTS.distribution_strategy,
                    distribution.STRATEGIES,
                    "one_device, mirrored (several GPUs, or the logical CPU devices), "
                    "multi_worker_mirrored (machines listed in TF_CONFIG) or tpu.", **into)
  flags.DEFINE_integer("num_gpus", _RUNTIME_DEFAULTS.num_gpus, "GPUs for one_device and mirrored.",
                       **into)
  flags.DEFINE_string("tpu", None, "TPU name or grpc:// address (selects the tpu strategy).",
                      **into)
  flags.DEFINE_enum("dtype", _RUNTIME_DEFAULTS.dtype, list(DTYPES),
                    "float32, or float16 / bfloat16 mixed precision (float32 weights).", **into)
  flags.DEFINE_boolean("enable_xla", _RUNTIME_DEFAULTS.enable_xla,
                       "Compile the steps with XLA (--enable_xla) or not (--noenable_xla); unset: "
                       "as measured fastest for the device and dtype (on CPUs: XLA for float32, "
                       "none for bfloat16, whose fast oneDNN kernels XLA does not use).", **into)
  flags.DEFINE_enum("kernels", _RUNTIME_DEFAULTS.kernels, ops.CHOICES,
                    "Forms of the backend-specific kernels: stock (plain TensorFlow), cpu_xla "
                    "(shaped for XLA on CPU), cpu_onednn (shaped for oneDNN on CPU, without XLA), "
                    "or auto (on CPUs cpu_xla with XLA, cpu_onednn without; stock on GPUs and "
                    "TPUs).", **into)
  flags.DEFINE_integer("steps_per_loop", _LOOP_DEFAULTS.steps_per_loop,
                       "Training steps per tf.function call.", **into)
  flags.DEFINE_integer("gradient_accumulation_steps", _LOOP_DEFAULTS.gradient_accumulation_steps,
                       "Micro-batches per optimizer step (the batch size stays the total).",
                       **into)
  flags.DEFINE_integer("log_steps", _LOOP_DEFAULTS.log_steps,
                       "Steps between progress lines and TensorBoard points.", **into)
  flags.DEFINE_enum("optimizer_type", _OPTIMIZER_DEFAULTS.type, optimization.OPTIMIZERS,
                    "adamw: the original's Adam with decoupled weight decay and no bias "
                    "correction; adamw_bias_corrected: Keras' AdamW (with the Adam paper's bias "
                    "correction); lamb: for large batches.", **into)
  flags.DEFINE_float("weight_decay", _OPTIMIZER_DEFAULTS.weight_decay,
                     "Decoupled weight decay; layer norms and biases are exempt.", **into)
  flags.DEFINE_float("clip_norm", _OPTIMIZER_DEFAULTS.clip_norm,
                     "Clip gradients to this global norm; 0 for no clipping.", **into)
  flags.DEFINE_integer("keep_checkpoint_max", _LOOP_DEFAULTS.keep_checkpoint_max,
                       "Newest checkpoints to keep.", **into)
  flags.DEFINE_boolean("deterministic", _RUNTIME_DEFAULTS.deterministic,
                       "Deterministic ops and seeded randomness: reruns give the same weights.",
                       **into)
  flags.DEFINE_integer("seed", None, "Random seed (0 with --deterministic when unset).", **into)


def define_tpu_flags(flag_values=FLAGS):
  """Defines the original scripts' TPU flags in `flag_values`, after `define_engine_flags`."""
  into = {"flag_values": flag_values}
  flags.DEFINE_boolean("use_tpu", False, "Train on a TPU (the tpu strategy).", **into)
  flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.", **into)
  flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.", **into)
  flags.DEFINE_string("gcp_project", None, "Cloud project of the Cloud TPU.", **into)
  flags.DEFINE_string("master", None, "TPU master address (used when --tpu_name is unset).",
                      **into)
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Accepted for compatibility; the TPU strategy finds the cores itself.",
                       **into)
  flags.DEFINE_alias("iterations_per_loop", "steps_per_loop", **into)


def runtime_config_from_flags(flag_values=FLAGS):
  """Builds the `RuntimeConfig` from the parsed engine and TPU flags.

  Args:
    flag_values: the parsed `flags.FlagValues`.

  Returns:
    A `RuntimeConfig`.
  """
  f = flag_values
  strategy, tpu = f.distribution_strategy, f.tpu
  if getattr(f, "use_tpu", False):
    if strategy not in (_RUNTIME_DEFAULTS.distribution_strategy, "tpu"):
      raise UserError(f"--use_tpu selects the tpu strategy, but --distribution_strategy="
                      f"{strategy} asks for another: give one of the two.")
    strategy, tpu = "tpu", tpu or f.tpu_name or f.master
  return RuntimeConfig(
      distribution_strategy=strategy, num_gpus=f.num_gpus, tpu=tpu,
      tpu_zone=getattr(f, "tpu_zone", None), gcp_project=getattr(f, "gcp_project", None),
      dtype=f.dtype, enable_xla=f.enable_xla, kernels=f.kernels, deterministic=f.deterministic,
      seed=f.seed)


def trainer_config_from_flags(flag_values=FLAGS, *, optimizer=None, **trainer):
  """Builds the `TrainerConfig` from the parsed engine flags and the script's own settings.

  Args:
    flag_values: the parsed `flags.FlagValues`.
    optimizer: `OptimizerConfig` fields of the script's flags, e.g.
      `{"learning_rate": FLAGS.learning_rate, "warmup_proportion": FLAGS.warmup_proportion}`.
    **trainer: `TrainerConfig` fields of the script's flags (batch sizes, epochs or steps,
      `save_checkpoints_steps`).

  Returns:
    A `TrainerConfig`.
  """
  f = flag_values
  return TrainerConfig(
      steps_per_loop=f.steps_per_loop, gradient_accumulation_steps=f.gradient_accumulation_steps,
      log_steps=f.log_steps, keep_checkpoint_max=f.keep_checkpoint_max,
      optimizer=OptimizerConfig(type=f.optimizer_type, weight_decay=f.weight_decay,
                                clip_norm=f.clip_norm or None, **(optimizer or {})),
      **trainer)
