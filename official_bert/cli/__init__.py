"""The command-line tools: absl flags in, one library call out.

Each module here is one tool (`run_classifier`, `run_squad`, `create_pretraining_data`, ...),
installed as a `bert-*` command (`pyproject.toml`) and called by the top-level script of the
original's name. Its `define_flags()` defines its flags and its `run()` entry point calls that, then
parses the command line; importing a tool defines nothing, so tools and tests share a process. Only
this package reads flags; the library takes arguments.

Importing this package is the one place that sets the process environment, for switches that
TensorFlow reads once, when it is first imported (`official_bert` imports TensorFlow lazily, so
this runs first). A value the user has set is kept.

* `TF_ENABLE_ONEDNN_OPTS=1`: TensorFlow's oneDNN CPU kernels, which TensorFlow leaves off on some
  CPUs, where matrix products then run far slower.
* `XLA_FLAGS` gets `--xla_cpu_prefer_vector_width=512` on CPUs with AVX-512 (`xla_flags`).
* `TF_ENABLED_DEVICE_TYPES` leaves GPUs out on a machine without any (`enabled_device_types`).
"""

import glob
import importlib.util
import os
import sys

from official_bert.common import cpuinfo

VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width"


def xla_flags(current, cpu_flags):
  """`XLA_FLAGS` for this CPU: `current`, plus 512-bit vectors for XLA's CPU code on AVX-512.

  XLA's CPU backend vectorizes its loops for 256-bit registers unless told otherwise. With
  512-bit vectors, on an AVX-512 CPU with AMX, the attention softmax and layer norm programs of
  a bfloat16 training step ran faster (the GELU's no faster), and so did the whole bfloat16
  step; the float32 step, which XLA compiles whole, was unchanged within the noise
  (`docs/design/cpu-kernels.md`).

  Args:
    current: the `XLA_FLAGS` set so far ("" for none).
    cpu_flags: the CPU's /proc/cpuinfo flags (`cpuinfo.flags()`).

  Returns:
    The flags to set; `current` unchanged without AVX-512 or where it sets the width itself.

  Example:

  >>> xla_flags("", {"avx512f"})
  '--xla_cpu_prefer_vector_width=512'
  >>> xla_flags("--xla_cpu_prefer_vector_width=256", {"avx512f"})
  '--xla_cpu_prefer_vector_width=256'
  """
  if "avx512f" not in cpu_flags or VECTOR_WIDTH_FLAG in current:
    return current
  return f"{current} {VECTOR_WIDTH_FLAG}=512".strip()


# Device files and folders that show a GPU or TPU driver: NVIDIA, WSL's GPU bridge, ROCm, Cloud TPU
# (accel for v2, v3 and v5e, vfio groups for v4 and v5p).
ACCELERATOR_PATHS = ("/dev/nvidia*", "/proc/driver/nvidia", "/dev/dxg", "/dev/kfd", "/dev/accel*",
                     "/dev/vfio/[0-9]*")


def enabled_device_types(environ, platform, accelerator_found):
  """`TF_ENABLED_DEVICE_TYPES` for this machine: all but GPUs if it has no accelerator, else None.

  TensorFlow's pip package is built with CUDA, and on a machine without a GPU each process prints
  `E... failed call to cuInit: ... UNKNOWN ERROR (303)` when it first lists its devices: an error
  line that is none, which TF_CPP_MIN_LOG_LEVEL=3 would hide only with every real one. Without
  the GPU device type TensorFlow does not start CUDA at all. The TPU types stay enabled (they
  register nothing where there is no TPU), in case a TPU has no device file of
  `ACCELERATOR_PATHS`. Where a GPU or TPU driver is installed, a PluggableDevice plugin is present,
  `CUDA_VISIBLE_DEVICES` is set to other than "" or "-1", or the user set the variable, it is left
  alone: whatever TensorFlow prints there is the user's to see.

  Args:
    environ: the process environment.
    platform: `sys.platform`.
    accelerator_found: whether a device file of `ACCELERATOR_PATHS` exists or a TensorFlow
      plugin is installed.

  Returns:
    The value to set, or None to leave the variable unset.

  Example:

  >>> enabled_device_types({}, "linux", accelerator_found=False)
  'CPU,TPU,TPU_SYSTEM'
  >>> enabled_device_types({}, "linux", accelerator_found=True) is None
  True
  >>> enabled_device_types({"CUDA_VISIBLE_DEVICES": "0"}, "linux", accelerator_found=False) is None
  True
  """
  if "TF_ENABLED_DEVICE_TYPES" in environ or not platform.startswith("linux") or accelerator_found:
    return None
  if environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
    return None
  return "CPU,TPU,TPU_SYSTEM"


def _accelerator_found():
  if any(glob.glob(pattern) for pattern in ACCELERATOR_PATHS):
    return True
  # TensorFlow loads PluggableDevice plugins (Intel XPU, DirectML, ...) from this folder beside it.
  spec = importlib.util.find_spec("tensorflow")
  locations = list(spec.submodule_search_locations or []) if spec else []
  return any(glob.glob(os.path.join(os.path.dirname(location), "tensorflow-plugins", "*"))
             for location in locations)


os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
_XLA_FLAGS = xla_flags(os.environ.get("XLA_FLAGS", ""), cpuinfo.flags())
if _XLA_FLAGS:
  os.environ["XLA_FLAGS"] = _XLA_FLAGS
if "TF_ENABLED_DEVICE_TYPES" not in os.environ:
  _DEVICE_TYPES = enabled_device_types(os.environ, sys.platform, _accelerator_found())
  if _DEVICE_TYPES:
    os.environ["TF_ENABLED_DEVICE_TYPES"] = _DEVICE_TYPES
