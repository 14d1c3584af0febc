"""The CPU's features as Linux lists them in /proc/cpuinfo, read without TensorFlow.

`official_bert.cli` reads them to set XLA's flags before TensorFlow loads,
`official_bert.training.accelerators` to choose XLA and the kernels per dtype, and
`official_bert.ops.native` to name the instruction set its C++ kernels are built for (`isa`).
Where the file cannot be read (not Linux), every answer is empty.

Example:

>>> isinstance(flags(), frozenset)
True
>>> isa({"sse2", "avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "popcnt",
...      "sse4_2"}, machine="x86_64")
'avx2'
"""

import platform

CPUINFO = "/proc/cpuinfo"

_AVX2 = (("avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "popcnt", "sse4_2"),
         ("-mavx", "-mavx2", "-mfma", "-mbmi", "-mbmi2", "-mf16c", "-mlzcnt", "-mmovbe",
          "-mpopcnt", "-msse4.2"))
_AVX512 = (_AVX2[0] + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
           _AVX2[1] + ("-mavx512f", "-mavx512bw", "-mavx512cd", "-mavx512dq", "-mavx512vl",
                       # GCC's tuning for Intel's AVX-512 cores narrows loops to 256 bits; the
                       # kernels' loops are written for 16 float32 lanes.
                       "-mprefer-vector-width=512"))
# The instruction sets the package's C++ kernels are built for, best first: the /proc/cpuinfo
# flags a CPU needs for each, and the compiler flags that let the code use them. The kernels are
# plain loops that the compiler vectorizes, and convert bfloat16 by its bits: AVX512-BF16 and
# AMX would change no instruction, so they are no level of their own (an AMX CPU gets `avx512`).
ISA_LEVELS = {
    "avx512": _AVX512,
    "avx2": _AVX2,
    "x86_64": ((), ()),  # SSE2, which every x86-64 CPU has
    "generic": ((), ()),  # another architecture: the compiler's defaults for it
}


def field(name, path=CPUINFO):
  """The value of the first `name : value` line of `path`, or None.

  Args:
    name: the field, e.g. `flags` or `vendor_id`.
    path: the cpuinfo file.
  """
  try:
    with open(path) as cpuinfo:
      for line in cpuinfo:
        if line.startswith(name):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return None


def flags(path=CPUINFO):
  """The CPU's feature flags (`avx512f`, `amx_bf16`, ...); empty where `path` cannot be read."""
  return frozenset((field("flags", path) or "").split())


def vendor(path=CPUINFO):
  """The CPU's `vendor_id` (`GenuineIntel`, `AuthenticAMD`, ...), or None."""
  return field("vendor_id", path)


def isa(cpu_flags=None, machine=None):
  """The best level of `ISA_LEVELS` that a CPU with these /proc/cpuinfo flags runs.

  Args:
    cpu_flags: the CPU's flags; default this machine's (`flags()`).
    machine: `platform.machine()`; default this machine's.
  """
  machine = machine or platform.machine()
  if machine.lower() not in ("x86_64", "amd64"):
    return "generic"
  cpu_flags = flags() if cpu_flags is None else cpu_flags
  for level, (needed, _) in ISA_LEVELS.items():
    if needed and all(flag in cpu_flags for flag in needed):
      return level
  return "x86_64"
