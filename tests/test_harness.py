"""The test harness of the root `conftest.py`: files ordered by their recorded durations, the
recording itself, and the guard that fails a session whose tests wrote into the checkout.

Each test runs pytest on a throw-away checkout (a git repository holding a copy of the root
`conftest.py` and a few tiny test files), so nothing here depends on this checkout's record.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from testing import REPOSITORY

_FILES = {
    "tests/test_quick.py": "def test_quick():\n  assert True\n",
    "tests/test_slow.py": "import time\n\ndef test_slow():\n  time.sleep(0.3)\n",
    "tests/test_leaky.py": (
        "import os, pathlib\n\n"
        "def test_leaky():\n"
        "  if os.environ.get('LEAK'):\n"
        "    (pathlib.Path(__file__).parents[1] / 'leaked.txt').write_text('x')\n"),
}


@pytest.fixture
def checkout(tmp_path):
  if shutil.which("git") is None:
    pytest.skip("git is not installed: the checkout guard has nothing to compare")
  shutil.copy(REPOSITORY / "conftest.py", tmp_path / "conftest.py")
  for name, text in _FILES.items():
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
  for command in (["init", "-q"], ["add", "."],
                  ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tests"]):
    subprocess.run(["git", *command], cwd=tmp_path, check=True, capture_output=True)
  return tmp_path


def _pytest(folder, *args, env=None):
  clean = {k: v for k, v in os.environ.items() if k not in ("LEAK", "PYTEST_XDIST_WORKER")}
  return subprocess.run(
      [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=folder,
      capture_output=True, text=True, timeout=120, check=False, env={**clean, **(env or {})})


def test_recorded_durations_are_written_and_order_the_files_longest_first(checkout):
  run = _pytest(checkout, "tests", "--record-durations")
  assert run.returncode == 0, run.stdout + run.stderr
  durations = json.loads((checkout / "tests" / "durations.json").read_text())
  assert set(durations) == set(_FILES)
  assert durations["tests/test_slow.py"] >= 0.3 > durations["tests/test_quick.py"]

  # The record is the one file the session may leave; the next session puts the slow file first.
  collected = _pytest(checkout, "tests", "--collect-only")
  assert collected.returncode == 0, collected.stdout + collected.stderr
  order = [line.split("::")[0] for line in collected.stdout.splitlines() if "::" in line]
  assert order[0] == "tests/test_slow.py"

  # A file the record does not know counts as the longest, and so runs first.
  (checkout / "tests" / "test_new.py").write_text("def test_new():\n  pass\n")
  collected = _pytest(checkout, "tests", "--collect-only")
  order = [line.split("::")[0] for line in collected.stdout.splitlines() if "::" in line]
  assert order[0] == "tests/test_new.py"


def test_a_test_that_writes_into_the_checkout_fails_the_session(checkout):
  clean = _pytest(checkout, "tests")
  assert clean.returncode == 0, clean.stdout + clean.stderr

  leaky = _pytest(checkout, "tests", env={"LEAK": "1"})
  assert leaky.returncode == 1
  assert "Tests wrote into the checkout" in leaky.stdout
  assert "?? leaked.txt" in leaky.stdout
