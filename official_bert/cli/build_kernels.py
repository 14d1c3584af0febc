"""Builds the package's C++ kernels for this CPU and this TensorFlow, and says what it built.

  bert-build-kernels                 # or: python build_kernels.py
  bert-build-kernels --force         # build again even where a valid build is there

A bfloat16 training step on a CPU runs its AdamW update and its element-wise work in these
kernels where they are built, and in XLA programs otherwise (`official_bert/ops/native.py`):
no run compiles anything. The build compiles the two kernels at once, one compiler per core,
once per CPU level, TensorFlow version and release of this package; it
needs a C++ compiler (`$CXX`, default `g++`). A library that is damaged, or was built for other
CPU flags, TensorFlow or sources, is built again. Each line printed names a library, the
instruction set it is for, its compiler flags beyond TensorFlow's and the time it took.
"""

import concurrent.futures

from absl import flags

from official_bert.cli.launch import launch
from official_bert.common import cpuinfo

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("cache_dir", None,
                      "Folder of the builds; default $OFFICIAL_BERT_CACHE, else "
                      "~/.cache/official_bert. A run reads the same folder.")
  flags.DEFINE_enum("isa", None, list(cpuinfo.ISA_LEVELS),
                    "Instruction set to build for; default the best this CPU runs. A run loads "
                    "only the builds for its CPU's own.")
  flags.DEFINE_bool("force", False, "Build again even where a valid build is there.")


def main():
  # TensorFlow loads here, after absl has parsed the flags (`--help` stays quick).
  from official_bert.ops import native  # pylint: disable=import-outside-toplevel

  level = FLAGS.isa or native.isa()
  if level != native.isa():
    print(f"Building for {level}; this CPU's level is {native.isa()}: a run here loads only "
          f"builds for {native.isa()}.")
  # One compiler per kernel at once: the compile is mostly TensorFlow's headers, one core each.
  with concurrent.futures.ThreadPoolExecutor(len(native.SOURCES)) as pool:
    builds = list(pool.map(
        lambda source: native.build(source, FLAGS.cache_dir, level=level, force=FLAGS.force),
        native.SOURCES))
  for source, built in zip(native.SOURCES, builds):
    flags_shown = " ".join(native.ISA_LEVELS[level][1]) or "the compiler's defaults"
    if built.seconds:
      print(f"Built {source} for {level} ({flags_shown}) in {built.seconds:.1f} s "
            f"({built.reason}): {built.path}")
    else:
      print(f"Up to date: {source} for {level}: {built.path}")


def run():
  """The `bert-build-kernels` command (and `python build_kernels.py`)."""
  define_flags()
  launch(main, outputs=["cache_dir"])


if __name__ == "__main__":
  run()
