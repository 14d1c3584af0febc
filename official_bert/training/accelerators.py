"""Where the training step runs fastest: XLA on or off and the kernel backend, per device and dtype.

The one place that decides, from measurements on each kind of device
(`benchmarks/pretraining_throughput.py`, `benchmarks/fine_tuning_throughput.py`):

* GPUs and TPUs: XLA and the `stock` kernels (TPUs always compile).
* CPUs, float32 and float16: XLA, whose fusion of the element-wise work beats TensorFlow's graph
  at every BERT size, with the `cpu_xla` kernels shaped for it.
* CPUs, bfloat16: no XLA, and the `cpu_onednn` kernels. XLA's CPU backend computes bfloat16
  products without the CPU's bfloat16 units (AMX, AVX512-BF16), at about float32's speed;
  TensorFlow's oneDNN kernels use them, at several times float32's speed on an AMX CPU and
  less on one with AVX512-BF16 alone (AMD Zen 4).
* Serving float32 on an Intel CPU where TensorFlow runs oneDNN's kernels by default (those
  with VNNI, AVX512-BF16 or AMX: `onednn_by_default`): no XLA, and the `cpu_onednn` inference
  forms (products fused with their bias and activation, one-pass layer norms, attention on fused
  batched products), which served a BERT-Base SavedModel faster than XLA on an AMX Xeon.
  Elsewhere, XLA: it served faster than the graph on TensorFlow's own kernels (where oneDNN is
  off by default), and than the `cpu_onednn` graph on an AMD EPYC with AVX512-BF16
  (`docs/design/cpu-kernels.md`).
* CPUs without XLA for the step: XLA still compiles the update apart (gradient clipping and the
  optimizer's float32 element-wise work over every weight, fused into one pass per variable). In
  TensorFlow's graph the same update runs as a dozen separate passes over each variable, a
  large share of a bfloat16 step's op time in a `tf.profiler` trace.
  Under a mixed policy the compiled update also writes the low-precision copies of the weights
  that the next step reads instead of casting them (`official_bert.ops.weight_copies`; the
  `Trainer` keeps them on one device, without gradient accumulation).

An explicit `enable_xla` or `kernels` wins; `kernels=auto` then follows XLA (`cpu_xla` with XLA,
`cpu_onednn` without it, on CPUs). A CPU without bfloat16 units runs bfloat16 products in
software, slower than float32, and so does one whose process has oneDNN turned off
(`TF_ENABLE_ONEDNN_OPTS=0`): choosing bfloat16 there comes with a warning.

Example:

>>> choice = choose("CPU", "bfloat16", cpu_flags={"avx512f", "amx_bf16"})
>>> choice.enable_xla, choice.kernels, choice.compile_update
(False, 'cpu_onednn', True)
>>> choose("GPU", "bfloat16").enable_xla
True
"""

import dataclasses
import os

from official_bert import ops
from official_bert.common import cpuinfo

# /proc/cpuinfo flags of CPUs with bfloat16 arithmetic units.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
# /proc/cpuinfo flags of the neural-network instructions (VNNI, AVX512-BF16, AMX) with which
# TensorFlow's Linux build turns its oneDNN kernels on when `TF_ENABLE_ONEDNN_OPTS` is unset.
ONEDNN_DEFAULT_CPU_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8",
                            "amx_bf16")
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


@dataclasses.dataclass(frozen=True)
class Choice:
  """What `choose` decided.

  Args:
    enable_xla: compile the steps with XLA.
    kernels: the kernel backend (`official_bert.ops.BACKENDS`).
    compile_update: compile the gradient clipping and optimizer update with XLA on their own,
      for a step that runs without XLA on one device.
    reason: why, in one sentence, for the log.
    warning: a sentence to log as a warning, or None.
  """

  enable_xla: bool
  kernels: str
  reason: str
  warning: str = None
  compile_update: bool = False


# This machine's CPU feature flags and vendor, for `choose`.
cpu_flags, cpu_vendor = cpuinfo.flags, cpuinfo.vendor


def onednn_by_default(flags):
  """Whether TensorFlow runs its oneDNN CPU kernels, `TF_ENABLE_ONEDNN_OPTS` unset, on a Linux CPU
  with these /proc/cpuinfo `flags`: on those with neural-network instructions (Intel's since
  Cascade Lake, AMD's since Zen 4), not on older ones (Skylake, Zen 3), whoever made them."""
  return any(flag in flags for flag in ONEDNN_DEFAULT_CPU_FLAGS)


def onednn_enabled(flags, environ=os.environ):
  """Whether TensorFlow runs its oneDNN CPU kernels in a process started with `environ`.

  Args:
    flags: the CPU's /proc/cpuinfo flags (`cpu_flags()`).
    environ: the process environment; `TF_ENABLE_ONEDNN_OPTS` decides where it is `1`, `true`,
      `0` or `false` (as TensorFlow reads it), else `onednn_by_default(flags)`.

  Example:

  >>> onednn_enabled({"avx2"}, {"TF_ENABLE_ONEDNN_OPTS": "1"})
  True
  >>> onednn_enabled({"amx_bf16"}, {"TF_ENABLE_ONEDNN_OPTS": "0"})
  False
  """
  value = environ.get(ONEDNN_VARIABLE, "").strip().lower()
  if value in ("1", "true", "0", "false"):
    return value in ("1", "true")
  return onednn_by_default(flags)


def has_bf16_hardware(flags):
  """Whether a CPU with these /proc/cpuinfo `flags` computes bfloat16 products in hardware."""
  return any(flag in flags for flag in BF16_CPU_FLAGS)


def choose(device_type, dtype, cpu_flags=frozenset(), enable_xla=None, kernels="auto",
           inference=False, cpu_vendor=None, onednn=None):
  """Chooses XLA and the kernel backend for steps on `device_type` in `dtype`.

  Args:
    device_type: `CPU`, `GPU` or `TPU`, the type of the replicas' devices.
    dtype: `float32`, `float16` or `bfloat16` (the `RuntimeConfig.dtype`).
    cpu_flags: the CPU's /proc/cpuinfo flags (`cpu_flags()`), read for bfloat16 on a CPU.
    enable_xla: True or False to decide yourself; None to let the measurements decide.
    kernels: `auto`, or a backend of `official_bert.ops.BACKENDS` to decide yourself.
    inference: for a model that only serves (an export), not for training steps.
    cpu_vendor: the CPU's `vendor_id` (`cpu_vendor()`), read for float32 inference on a CPU.
    onednn: whether the process that runs the steps has TensorFlow's oneDNN kernels on
      (`onednn_enabled`), read for bfloat16 on a CPU; None: `onednn_by_default(cpu_flags)`, as
      in a server started without `TF_ENABLE_ONEDNN_OPTS`.

  Returns:
    A `Choice`.
  """
  device_type = device_type.upper()
  cpu = device_type == "CPU"
  if onednn is None:
    onednn = onednn_by_default(cpu_flags)
  bf16_on_cpu = cpu and dtype == "bfloat16"
  if enable_xla is not None:
    xla, reason = enable_xla, f"XLA {'on' if enable_xla else 'off'} as asked"
  elif bf16_on_cpu:
    xla, reason = False, ("XLA off: its CPU backend computes bfloat16 products without the CPU's "
                          "bfloat16 units, TensorFlow's oneDNN kernels use them")
  elif (cpu and inference and dtype == "float32" and cpu_vendor == "GenuineIntel"
        and onednn_by_default(cpu_flags)):
    xla, reason = False, ("XLA off: on this Intel CPU TensorFlow's oneDNN kernels are on by "
                          "default, and their fused inference forms served float32 faster than "
                          "XLA")
  else:
    xla, reason = True, f"XLA on: measured fastest for {dtype} on {device_type}"
  backend = ops.resolve_backend(kernels, device_type, xla=xla)
  reason += (f"; {backend} kernels as asked" if kernels != "auto"
             else f"; {backend} kernels, auto's for {device_type} with XLA "
                  f"{'on' if xla else 'off'}")
  compile_update = cpu and not xla and not inference
  if compile_update:
    reason += "; XLA compiles the optimizer update apart"
  warning = None
  if bf16_on_cpu and not has_bf16_hardware(cpu_flags):
    warning = ("bfloat16 on a CPU without bfloat16 units (no amx_bf16 or avx512_bf16 among its "
               "flags) runs its products in software, slower than float32: float32 is the "
               "better choice on this machine.")
  elif bf16_on_cpu and not xla and not onednn:
    warning = (f"bfloat16 with TensorFlow's oneDNN kernels off ({ONEDNN_VARIABLE}=0 in this "
               "process) runs its products without the CPU's bfloat16 units, no faster than "
               f"float32: unset {ONEDNN_VARIABLE} or set it to 1 before TensorFlow is imported.")
  return Choice(enable_xla=xla, kernels=backend, reason=reason, warning=warning,
                compile_update=compile_update)
