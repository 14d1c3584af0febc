"""Runs every doctest of the package in a fresh temporary folder, its working directory.

Examples that write files (a vocabulary, a TFRecord file, a checkpoint) can then use short
relative paths, as a user would, and leave nothing behind.

The test files with end-to-end (`slow`) tests run first, and so do the other files that take a
minute or more (`LONG_FILES`): `dev.py test` hands whole files to its two workers in collection
order, and a long file handed out last keeps one worker busy while the other has finished.

XLA compiles the tests' programs at LLVM's -O0 (`--xla_backend_optimization_level=0` in
`XLA_FLAGS`, which the scripts the tests start inherit), unless `XLA_FLAGS` sets a level itself.
"""

import importlib.util
import os

import pytest

# The Beam pipeline imports Apache Beam, an optional extra (pip install -e ".[beam]"): without
# it the module cannot be imported to collect its doctests
# (tests/pretraining/test_beam_pipeline.py skips).
if importlib.util.find_spec("apache_beam") is None:
  collect_ignore = ["official_bert/pretraining/beam_pipeline.py"]

# Most of the compile of a tiny model's XLA program on a CPU is LLVM optimising the machine code
# of its hundreds of kernels: a float16 training step compiled in 14 s instead of 21-26 s. The
# tests check what the programs compute, not how fast they run, and LLVM's -O0 keeps the same
# IEEE arithmetic (XLA turns no fast-math on). Set here, before any test imports TensorFlow.
_XLA_LEVEL = "--xla_backend_optimization_level"
if _XLA_LEVEL not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_LEVEL}=0".strip()


@pytest.fixture(autouse=True)
def _doctest_in_temporary_folder(request):
  if isinstance(request.node, pytest.DoctestItem):
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))


# Files without end-to-end tests that take as long as the slow ones (50-100 s on two busy cores):
# in alphabetical order test_training_trainer.py came last, and one worker ran it alone.
LONG_FILES = {"test_adam_update.py", "test_bf16.py", "test_training_trainer.py"}


def pytest_collection_modifyitems(items):
  first = {item.path for item in items
           if item.get_closest_marker("slow") or item.path.name in LONG_FILES}
  items.sort(key=lambda item: item.path not in first)  # stable: files keep their order
