"""Runs every doctest of the package in a fresh temporary folder, its working directory.

Examples that write files (a vocabulary, a TFRecord file, a checkpoint) can then use short
relative paths, as a user would, and leave nothing behind.
"""

import pytest


@pytest.fixture(autouse=True)
def _doctest_in_temporary_folder(request):
  if isinstance(request.node, pytest.DoctestItem):
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
