"""Data: pre-training instance creation and TFRecord I/O; the task readers (GLUE, SQuAD, ...).

Names are imported on first use (PEP 562): importing one module of this package does not import
the others.
"""

import importlib

_EXPORTS = {
    "create_pretraining_data": "pretraining_pipeline",
    "InstanceOptions": "pretraining_instances",
    "PretrainingStats": "pretraining_stats",
    "pretraining_dataset": "pretraining_reader",
}


def __getattr__(name):
  if name not in _EXPORTS:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__():
  return sorted(list(globals()) + list(_EXPORTS))
