"""absl flags of the training engine, shared by `run_pretraining.py` and the fine-tuning scripts.

A tool calls `define_engine_flags()` and `define_tpu_flags()` from its `define_flags()`, beside its
own flags, and in `main` turns them into an `EngineConfig` with `engine_config_from_flags()`:

    def define_flags():
      define_engine_flags()
      define_tpu_flags()
      ...

    def main():
      engine = engine_config_from_flags(save_checkpoints_steps=FLAGS.save_checkpoints_steps)

The TPU flags are those of the original google-research/bert scripts (`--use_tpu --tpu_name=...`
selects the `tpu` strategy); `--iterations_per_loop` is another name for `--steps_per_loop`.
"""

from absl import flags

from official_bert import ops
from official_bert.common.errors import UserError
from official_bert.training import distribution, optimization
from official_bert.training.config import DTYPES, EngineConfig

FLAGS = flags.FLAGS
_DEFAULTS = EngineConfig()


def define_engine_flags(flag_values=FLAGS):
  """Defines the flags of `EngineConfig` (see its docstring) in `flag_values`."""
  into = {"flag_values": flag_values}
  flags.DEFINE_enum("distribution_strategy", _DEFAULTS.distribution_strategy,
                    distribution.STRATEGIES,
                    "one_device, mirrored (several GPUs, or the logical CPU devices), "
                    "multi_worker_mirrored (machines listed in TF_CONFIG) or tpu.", **into)
  flags.DEFINE_integer("num_gpus", _DEFAULTS.num_gpus, "GPUs for one_device and mirrored.",
                       **into)
  flags.DEFINE_string("tpu", None, "TPU name or grpc:// address (selects the tpu strategy).",
                      **into)
  flags.DEFINE_enum("dtype", _DEFAULTS.dtype, list(DTYPES),
                    "float32, or float16 / bfloat16 mixed precision (float32 weights).", **into)
  flags.DEFINE_boolean("enable_xla", _DEFAULTS.enable_xla,
                       "Compile the steps with XLA (--enable_xla) or not (--noenable_xla); unset: "
                       "as measured fastest for the device and dtype (on CPUs: XLA for float32, "
                       "none for bfloat16, whose fast oneDNN kernels XLA does not use).", **into)
  flags.DEFINE_enum("kernels", _DEFAULTS.kernels, ops.CHOICES,
                    "Forms of the backend-specific kernels: stock (plain TensorFlow), cpu_xla "
                    "(shaped for XLA on CPU), cpu_onednn (shaped for oneDNN on CPU, without XLA), "
                    "or auto (on CPUs cpu_xla with XLA, cpu_onednn without; stock on GPUs and "
                    "TPUs).", **into)
  flags.DEFINE_integer("steps_per_loop", _DEFAULTS.steps_per_loop,
                       "Training steps per tf.function call.", **into)
  flags.DEFINE_integer("gradient_accumulation_steps", _DEFAULTS.gradient_accumulation_steps,
                       "Micro-batches per optimizer step (the batch size stays the total).",
                       **into)
  flags.DEFINE_integer("log_steps", _DEFAULTS.log_steps,
                       "Steps between progress lines and TensorBoard points.", **into)
  flags.DEFINE_enum("optimizer_type", _DEFAULTS.optimizer_type, optimization.OPTIMIZERS,
                    "adamw: the original's Adam with decoupled weight decay and no bias "
                    "correction; adamw_bias_corrected: Keras' AdamW (with the Adam paper's bias "
                    "correction); lamb: for large batches.", **into)
  flags.DEFINE_float("weight_decay", _DEFAULTS.weight_decay,
                     "Decoupled weight decay; layer norms and biases are exempt.", **into)
  flags.DEFINE_float("clip_norm", _DEFAULTS.clip_norm,
                     "Clip gradients to this global norm; 0 for no clipping.", **into)
  flags.DEFINE_integer("keep_checkpoint_max", _DEFAULTS.keep_checkpoint_max,
                       "Newest checkpoints to keep.", **into)
  flags.DEFINE_boolean("deterministic", _DEFAULTS.deterministic,
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


def engine_config_from_flags(flag_values=FLAGS, **overrides):
  """Builds the `EngineConfig` from the parsed flags.

  Args:
    flag_values: the parsed `flags.FlagValues`.
    **overrides: `EngineConfig` fields that the script sets itself, e.g.
      `save_checkpoints_steps=FLAGS.save_checkpoints_steps`.

  Returns:
    An `EngineConfig`.
  """
  f = flag_values
  strategy, tpu = f.distribution_strategy, f.tpu
  if getattr(f, "use_tpu", False):
    if strategy not in (_DEFAULTS.distribution_strategy, "tpu"):
      raise UserError(f"--use_tpu selects the tpu strategy, but --distribution_strategy="
                      f"{strategy} asks for another: give one of the two.")
    strategy, tpu = "tpu", tpu or f.tpu_name or f.master
  values = dict(
      distribution_strategy=strategy, num_gpus=f.num_gpus, tpu=tpu,
      tpu_zone=getattr(f, "tpu_zone", None), gcp_project=getattr(f, "gcp_project", None),
      dtype=f.dtype, enable_xla=f.enable_xla, kernels=f.kernels, steps_per_loop=f.steps_per_loop,
      gradient_accumulation_steps=f.gradient_accumulation_steps, log_steps=f.log_steps,
      keep_checkpoint_max=f.keep_checkpoint_max, optimizer_type=f.optimizer_type,
      weight_decay=f.weight_decay, clip_norm=f.clip_norm or None,
      deterministic=f.deterministic, seed=f.seed)
  values.update(overrides)
  return EngineConfig(**values)
