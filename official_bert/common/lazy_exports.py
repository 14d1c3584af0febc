"""A package's public names, imported on first use (PEP 562).

Importing a package then costs nothing until a name is used, so that `official_bert.cli` can set
TensorFlow's environment before anything imports TensorFlow, and so that the pre-training worker
processes import only the modules they run.
"""

import importlib


def lazy_exports(package, exports):
  """Builds a package's module-level `__getattr__` and `__dir__`.

  Args:
    package: the package's `__name__`.
    exports: public name -> the module (absolute, or relative to `package` with a leading dot)
      that defines it.

  Returns:
    `(__getattr__, __dir__)`, to assign at the package's top level.

  Example:

  >>> getattr_, dir_ = lazy_exports("official_bert", {"BertConfig": ".configs"})
  >>> getattr_("BertConfig").__name__
  'BertConfig'
  >>> "BertConfig" in dir_()
  True
  """

  def __getattr__(name):  # noqa: N807
    if name not in exports:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(exports[name], package), name)

  def __dir__():  # noqa: N807
    return sorted(exports)

  return __getattr__, __dir__
