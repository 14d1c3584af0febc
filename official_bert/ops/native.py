"""The package's own TensorFlow kernels: built on request for a named instruction set, loaded
by a run only where such a build is present.

Two pieces of a bfloat16 training step on CPUs are C++ kernels of this package, because what
they need (one pass over memory) is out of reach of TensorFlow's graph and of XLA's CPU backend:
the AdamW update (`adam_update.cc`) and the element-wise work around the products
(`bfloat16_elementwise.cc`). Nothing compiles inside a user's run:

* `bert-build-kernels` (`build`) compiles them with `$CXX` (default `g++`) against the installed
  TensorFlow's headers and library (`tf.sysconfig`), for the instruction set of this CPU
  (`isa()`, one of `cpuinfo.ISA_LEVELS`, each a fixed list of `-m` flags, never
  `-march=native`), into
  `$OFFICIAL_BERT_CACHE/kernels/<level>-tf<version>/` (default cache `~/.cache/official_bert`).
  Beside each library a record (`<name>.json`) says what it was built from and for: the level,
  the flags, TensorFlow's version, the sources' and the library's SHA-256.
* A run (`load`) takes a library only where its record matches this CPU's level, this
  TensorFlow and these sources, and the library's bytes match the record. Otherwise it logs one
  line (how to build them, or why a library was skipped) and the callers take their XLA forms.

Example:

>>> library_path("adam_update.cc", "cache", level="avx2").parent.name.startswith("avx2-tf")
True
"""

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

from absl import logging
import tensorflow as tf

from official_bert.common import cpuinfo
from official_bert.common.errors import UserError

DIRECTORY = pathlib.Path(__file__).parent
SOURCES = ("adam_update.cc", "bfloat16_elementwise.cc")
CACHE_VARIABLE = "OFFICIAL_BERT_CACHE"
BUILD_COMMAND = "bert-build-kernels"

ISA_LEVELS = cpuinfo.ISA_LEVELS
isa = cpuinfo.isa


def cache_dir(directory=None):
  """The kernels' cache folder: `directory`, else `$OFFICIAL_BERT_CACHE`, else
  `~/.cache/official_bert`. It must be local: the compiler writes there and the loader maps the
  libraries from there.

  Raises:
    UserError: the folder is a remote path (`gs://...`).
  """
  directory = str(directory or os.environ.get(CACHE_VARIABLE)
                  or pathlib.Path.home() / ".cache" / "official_bert")
  if "://" in directory:
    raise UserError(f"{CACHE_VARIABLE}={directory}: the kernels' cache must be a local folder "
                    "(the C++ compiler writes there, and TensorFlow loads the libraries from it).")
  return pathlib.Path(directory)


def library_path(source, directory=None, level=None):
  """Where the library of `source` built for `level` (default `isa()`) and this TensorFlow lies:
  `<cache>/kernels/<level>-tf<version>/<stem>.so`; its record is the same path with `.json`."""
  folder = f"{level or isa()}-tf{tf.__version__}"
  return cache_dir(directory) / "kernels" / folder / f"{pathlib.Path(source).stem}.so"


def compile_flags(level):
  """The compiler flags of a build for `level`, TensorFlow's own included."""
  # No fused multiply-adds, so that each operation rounds as TensorFlow's own do (the AdamW
  # update is bit-exact against the compiled one).
  return (["-shared", "-fPIC", "-O3", *ISA_LEVELS[level][1], "-ffp-contract=off",
           "-fno-math-errno", "-fopenmp-simd", "-w"] + tf.sysconfig.get_compile_flags())


def sources_digest(source):
  """The SHA-256 of `source` and the headers beside it: a build is of these exact sources."""
  digest = hashlib.sha256((DIRECTORY / source).read_bytes())
  for header in sorted(DIRECTORY.glob("*.h")):
    digest.update(header.read_bytes())
  return digest.hexdigest()


def _file_digest(path):
  with tf.io.gfile.GFile(str(path), "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Built:
  """What `build` did for one kernel.

  Args:
    source: the `.cc` file's name.
    path: the library.
    level: the instruction set it was built for.
    seconds: the compile's wall time; 0 where a valid build was already there.
    reason: why it was (re)built, or `up to date`.
  """

  source: str
  path: pathlib.Path
  level: str
  seconds: float
  reason: str


def check(source, directory=None, level=None):
  """Why the library of `source` for `level` (default `isa()`) cannot be loaded, or None where
  it can: it is missing, it or its record is damaged, or the record is of another build.

  Args:
    source: the name of a `.cc` file of `official_bert/ops`.
    directory: the cache folder (`cache_dir`).
    level: the instruction set; default this CPU's.

  Returns:
    None, or a sentence that names the file.
  """
  level = level or isa()
  library = library_path(source, directory, level)
  record_path = library.with_suffix(".json")
  if not tf.io.gfile.exists(str(library)):
    return f"{library} is not built"
  try:
    with tf.io.gfile.GFile(str(record_path)) as f:
      record = json.load(f)
    expected = {"isa": level, "tensorflow": tf.__version__, "sources": sources_digest(source)}
    differs = [key for key, value in expected.items() if record[key] != value]
    library_digest = record["library"]
  except (tf.errors.OpError, ValueError, KeyError, TypeError) as error:
    return f"the record {record_path} of {library} is missing or damaged ({error})"
  if differs:
    return (f"{library} was built for other "
            + ", ".join(f"{key} ({record[key]!r}, not {expected[key]!r})"
                        if key != "sources" else "sources" for key in differs))
  if _file_digest(library) != library_digest:
    return f"{library} is damaged (its bytes differ from those its record names)"
  return None


def build(source, directory=None, compiler=None, level=None, force=False):
  """Builds the library of `source` for `level`, unless a valid build is there (`check`).

  A damaged library, or one whose record is of other CPU flags, TensorFlow or sources, is built
  again. The library and its record are written under temporary names, then renamed, the record
  last: a build that was cut short leaves no record, and counts as damaged.

  Args:
    source: the name of a `.cc` file of `official_bert/ops`.
    directory: the cache folder (`cache_dir`).
    compiler: the C++ compiler; default `$CXX` or `g++`.
    level: the instruction set, one of `ISA_LEVELS`; default this CPU's (`isa()`).
    force: build even where a valid build is there.

  Returns:
    A `Built`.

  Raises:
    UserError: the compiler cannot be found, or `level` is unknown.
    RuntimeError: the compiler failed; the message has the end of its output.
  """
  level = level or isa()
  if level not in ISA_LEVELS:
    raise UserError(f"unknown instruction set {level!r}: choose one of {', '.join(ISA_LEVELS)}")
  library = library_path(source, directory, level)
  if not tf.io.gfile.exists(str(library)):
    problem = "no build before"
  else:
    problem = "forced" if force else check(source, directory, level)
  if problem is None:
    return Built(source, library, level, 0.0, "up to date")
  compiler = compiler or os.environ.get("CXX", "g++")
  if shutil.which(compiler) is None:
    raise UserError(f"no C++ compiler {compiler!r} (CXX): install one (g++) or set CXX to one")
  flags = compile_flags(level)
  tf.io.gfile.makedirs(str(library.parent))
  handle, partial = tempfile.mkstemp(suffix=".so.partial", dir=library.parent)
  os.close(handle)
  start = time.perf_counter()
  try:
    result = subprocess.run([compiler, *flags, str(DIRECTORY / source), "-o", partial,
                             *tf.sysconfig.get_link_flags()],
                            capture_output=True, text=True, check=False)
    if result.returncode:
      raise RuntimeError(f"{compiler} failed on {DIRECTORY / source}:\n{result.stderr[-2000:]}")
    seconds = time.perf_counter() - start
    record = {"source": source, "isa": level, "flags": flags, "compiler": compiler,
              "tensorflow": tf.__version__, "sources": sources_digest(source),
              "library": _file_digest(partial)}
    tf.io.gfile.rename(partial, str(library), overwrite=True)
    partial = None
    _write_atomically(library.with_suffix(".json"), json.dumps(record, indent=1))
  finally:
    if partial is not None and os.path.exists(partial):
      os.remove(partial)
  return Built(source, library, level, seconds, problem)


def _write_atomically(path, text):
  partial = f"{path}.partial"
  with tf.io.gfile.GFile(partial, "w") as f:
    f.write(text)
  tf.io.gfile.rename(partial, str(path), overwrite=True)


# The reasons `load` has logged in this process, so that each is one line, once.
_logged = set()
# The library loaded in this process for each source. TensorFlow cannot unload an op library, and
# a second copy from another path (another cache folder) registers the same kernels again, which
# TensorFlow then refuses to choose between when an op runs: a process keeps its first.
_loaded = {}


def _log_once(key, message):
  if key not in _logged:
    _logged.add(key)
    logging.warning(message)


@functools.cache
def load(source):
  """The loaded kernel library of `source` (its ops as Python functions), or None where no valid
  build for this CPU and TensorFlow is in the cache (`check`) or it does not load. This never
  compiles; where a library is missing it logs, once per process, one line that says how to
  build them; where one is skipped, one line that says why. A process loads a source's library
  once: where the cache has changed since (`$OFFICIAL_BERT_CACHE`), a valid build there gets the
  library this process already holds."""
  if not tf.io.gfile.exists(str(library_path(source))):
    _log_once("not built", f"The package's C++ kernels are not built for this CPU ({isa()}) "
              f"and TensorFlow {tf.__version__} in {cache_dir()}, so their XLA forms run "
              f"(slower in bfloat16): build them once with `{BUILD_COMMAND}`.")
    return None
  problem = check(source)
  if problem is not None:
    _log_once(source, f"The kernel library is skipped, so its XLA form runs: {problem}; "
              f"rebuild it with `{BUILD_COMMAND}`.")
    return None
  if source in _loaded:
    return _loaded[source]
  try:
    _loaded[source] = tf.load_op_library(str(library_path(source)))
    return _loaded[source]
  except (OSError, tf.errors.OpError) as error:
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    _log_once(source, f"The kernel library {library_path(source)} does not load, so its XLA "
              f"form runs: {message}; rebuild it with `{BUILD_COMMAND} --force`.")
    return None
