"""The CPU's features as Linux lists them in /proc/cpuinfo, read without TensorFlow.

`official_bert.cli` reads them to set XLA's flags before TensorFlow loads, and
`official_bert.training.accelerators` to choose XLA and the kernels per dtype. Where the file
cannot be read (not Linux), every answer is empty.

Example:

>>> isinstance(flags(), frozenset)
True
"""

CPUINFO = "/proc/cpuinfo"


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
