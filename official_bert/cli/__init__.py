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
  CPUs, where matrix products then run at half speed.
* `XLA_FLAGS` gets `--xla_cpu_prefer_vector_width=512` on CPUs with AVX-512 (`xla_flags`).
"""

import os

from official_bert.common import cpuinfo

VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width"


def xla_flags(current, cpu_flags):
  """`XLA_FLAGS` for this CPU: `current`, plus 512-bit vectors for XLA's CPU code on AVX-512.

  XLA's CPU backend vectorizes its loops for 256-bit registers unless told otherwise. With
  512-bit vectors, on an AVX-512 CPU with AMX, the attention softmax and layer norm programs of
  a bfloat16 BERT-Base training step ran 17% and 12% faster alone (the GELU's no faster), and
  the whole bfloat16 step about 2%; the float32 step, which XLA compiles whole, was unchanged
  within the noise (`docs/performance.md`).

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


os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
_XLA_FLAGS = xla_flags(os.environ.get("XLA_FLAGS", ""), cpuinfo.flags())
if _XLA_FLAGS:
  os.environ["XLA_FLAGS"] = _XLA_FLAGS
