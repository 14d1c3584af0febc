"""The package's own TensorFlow kernels, built from their C++ source on first use.

Two pieces of a bfloat16 training step on CPUs are C++ kernels of this package, because what
they need (one pass over memory) is out of reach of TensorFlow's graph and of XLA's CPU backend:
the AdamW update (`adam_update.cc`) and the element-wise work around the products
(`bfloat16_elementwise.cc`). Each is built here and loaded with `tf.load_op_library`.

Build: the C++ compiler `$CXX` (default `g++`) against the installed TensorFlow's headers and
library (`tf.sysconfig`), for this CPU (`-march=native`), into `$OFFICIAL_BERT_CACHE` (default
`~/.cache/official_bert`) under a name hashed from the sources (the `.cc` file and the headers
beside it), TensorFlow's version, the flags and the CPU, so that each machine builds each kernel
once (several seconds); it is written under a temporary name, then renamed. Where the build or
the load fails, `load()` logs why once and returns None, and the callers take their XLA forms.

Example:

>>> build("adam_update.cc").name.startswith("adam_update-")
True
"""

import functools
import hashlib
import os
import pathlib
import platform
import subprocess
import tempfile

from absl import logging
import tensorflow as tf

from official_bert.common import cpuinfo

DIRECTORY = pathlib.Path(__file__).parent
CACHE_VARIABLE = "OFFICIAL_BERT_CACHE"


def _compile_flags():
  # No fused multiply-adds, so that each operation rounds as TensorFlow's own do (the AdamW
  # update is bit-exact against the compiled one).
  flags = ["-shared", "-fPIC", "-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno",
           "-fopenmp-simd", "-w"]
  if "avx512_fp16" in cpuinfo.flags():
    # The Eigen headers TensorFlow ships do not compile with AVX512-FP16 turned on.
    flags.append("-mno-avx512fp16")
  return flags + tf.sysconfig.get_compile_flags()


def build(source, cache_dir=None, compiler=None):
  """Builds the library of `source` unless a build for these sources, TensorFlow and CPU exists.

  Args:
    source: the name of a `.cc` file of `official_bert/ops`.
    cache_dir: the folder of builds; default `$OFFICIAL_BERT_CACHE` or `~/.cache/official_bert`.
    compiler: the C++ compiler; default `$CXX` or `g++`.

  Returns:
    The path of the library.

  Raises:
    RuntimeError: the compiler failed or is missing; the message has its output.
  """
  path = DIRECTORY / source
  compiler = compiler or os.environ.get("CXX", "g++")
  flags = _compile_flags()
  link = tf.sysconfig.get_link_flags()
  headers = [header.read_text() for header in sorted(DIRECTORY.glob("*.h"))]
  key = hashlib.sha256("\n".join([
      path.read_text(), *headers, tf.__version__, compiler, *flags, *link, platform.machine(),
      " ".join(sorted(cpuinfo.flags()))]).encode()).hexdigest()[:16]
  cache_dir = pathlib.Path(cache_dir or os.environ.get(CACHE_VARIABLE)
                           or pathlib.Path.home() / ".cache" / "official_bert")
  library = cache_dir / f"{path.stem}-{key}.so"
  if library.exists():
    return library
  cache_dir.mkdir(parents=True, exist_ok=True)
  logging.info("Building the kernel %s into %s (once per machine).", source, library)
  handle, partial = tempfile.mkstemp(suffix=".so.partial", dir=cache_dir)
  os.close(handle)
  try:
    result = subprocess.run([compiler, *flags, str(path), "-o", partial, *link],
                            capture_output=True, text=True, check=False)
  except OSError as error:
    os.remove(partial)
    raise RuntimeError(f"cannot run the C++ compiler {compiler!r}: {error}") from error
  if result.returncode:
    os.remove(partial)
    raise RuntimeError(f"{compiler} failed on {path}:\n{result.stderr[-2000:]}")
  os.replace(partial, library)
  return library


@functools.cache
def load(source):
  """The loaded kernel library of `source` (its ops as Python functions), or None where it
  cannot be built or loaded (logged once)."""
  try:
    return tf.load_op_library(str(build(source)))
  except (RuntimeError, OSError, tf.errors.OpError) as error:
    logging.warning("The kernel %s is unavailable, so its XLA form is used (slower in bfloat16 "
                    "on CPUs): %s", source, error)
    return None
