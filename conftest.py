"""Runs every doctest of the package in a fresh temporary folder, its working directory.

Examples that write files (a vocabulary, a TFRecord file, a checkpoint) can then use short
relative paths, as a user would, and leave nothing behind.
"""

import pathlib

import pytest

# Each command-line tool defines its absl flags when imported, as a script does, so two of them
# cannot be imported into one process; they hold no examples, and their script tests run them.
_TOOLS = pathlib.Path(__file__).parent / "official_bert" / "cli"
collect_ignore = [str(path) for path in _TOOLS.glob("*.py")
                  if path.stem not in ("__init__", "engine_flags", "fine_tuning_flags", "launch")]


@pytest.fixture(autouse=True)
def _doctest_in_temporary_folder(request):
  if isinstance(request.node, pytest.DoctestItem):
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
