"""The test harness: the root `conftest.py`'s files ordered by their recorded durations, the
recording itself, and the guard that fails a session whose tests wrote into the checkout; and
`testing.run_python`, the tools' processes forked from a server that has imported TensorFlow.

Each conftest test runs pytest on a throw-away checkout (a git repository holding a copy of the
root `conftest.py` and a few tiny test files), so nothing here depends on this checkout's record.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from testing import READ_WHEN_USED, REPOSITORY, run_command_line, run_python

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


# What ONNX Runtime and OpenVINO do when imported, as some test modules are collected: write
# under the user's home and into the temporary folder. Then a test writes into the home as well.
_HOME_WRITER = """
import os, pathlib

cache = pathlib.Path(os.path.expanduser("~/.cache"))
cache.mkdir(exist_ok=True)  # each worker collects the module
(cache / "written_at_collection").write_text("x")
pathlib.Path(os.environ["TMPDIR"], "written_at_collection").write_text("x")

def test_writes_into_the_home():
  (pathlib.Path.home() / "written_by_a_test").write_text("x")
  assert (pathlib.Path.home() / ".cache" / "written_at_collection").exists()
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_what_libraries_write_into_the_home_stays_in_the_sessions_own(
    checkout, tmp_path_factory, workers):
  user = tmp_path_factory.mktemp("user")
  home, temporary = user / "home", user / "tmp"
  home.mkdir()
  temporary.mkdir()
  (checkout / "tests" / "test_home.py").write_text(_HOME_WRITER)
  run = _pytest(checkout, "tests/test_home.py", "-n", workers,
                env={"HOME": str(home), "TMPDIR": str(temporary)})
  assert run.returncode == 0, run.stdout + run.stderr
  assert not list(home.iterdir())
  # Only pytest's own base folder (`pytest-of-<user>`, or `-unknown` where the user has no name)
  # is left in the temporary folder; the session's home is gone.
  left = [path.name for path in temporary.iterdir()]
  assert len(left) == 1 and left[0].startswith("pytest-of-"), left


_REPORT = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
                  "tensorflow_loaded": "tensorflow" in sys.modules,
                  "tf_config": os.environ.get("TF_CONFIG"), "marker": os.environ.get("MARKER"),
                  "main": __name__}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_run_python_forks_a_run_that_is_its_own_program(tmp_path, monkeypatch):
  script = tmp_path / "report.py"
  script.write_text(_REPORT)
  monkeypatch.delenv("OFFICIAL_BERT_TEST_FORK", raising=False)  # the fork path, whatever is set
  run_python([sys.executable, "-c", "pass"], check=True)  # the server is up
  # What pytest changes from one test to the next does not take a new interpreter.
  monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_other.py::test_other (call)")
  done = run_python([sys.executable, script, "3"], cwd=tmp_path,
                    env=dict(os.environ, TF_CONFIG='{"task": {}}'))
  assert done.returncode == 3 and done.stderr == "to stderr\n", done.stderr
  report = json.loads(done.stdout)
  # Forked from the server: TensorFlow was there before the script ran.
  assert report == {"argv": [str(script), "3"], "cwd": str(tmp_path), "path0": str(tmp_path),
                    "tensorflow_loaded": True, "tf_config": '{"task": {}}', "marker": None,
                    "main": "__main__"}
  assert "TF_CONFIG" in READ_WHEN_USED
  # -c and -m run as the interpreter runs them.
  done = run_python([sys.executable, "-c", "import sys; print(sys.argv); sys.exit('no')", "x"])
  assert (done.returncode, done.stdout, done.stderr) == (1, "['-c', 'x']\n", "no\n")
  done = run_python([sys.executable, "-m", "official_bert.cli.build_vocab", "--helpshort"])
  assert done.returncode == 0 and "--vocab_size" in done.stdout, done.stderr[-2000:]
  assert "RuntimeWarning" not in done.stderr  # the module runs as __main__ alone
  done = run_python([sys.executable, "-c", "raise KeyError('lost')"])
  assert done.returncode == 1 and done.stderr.strip().endswith("KeyError: 'lost'")


def test_run_python_starts_a_new_interpreter_for_an_environment_read_at_start_up(tmp_path):
  script = tmp_path / "report.py"
  script.write_text(_REPORT)
  done = run_python([sys.executable, script, "0"], cwd=tmp_path,
                    env=dict(os.environ, MARKER="set"))
  assert done.returncode == 0, done.stderr
  report = json.loads(done.stdout)
  assert report["marker"] == "set" and not report["tensorflow_loaded"]


def test_run_python_kills_a_run_past_its_timeout():
  with pytest.raises(subprocess.TimeoutExpired):
    run_python([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
  with pytest.raises(subprocess.CalledProcessError):
    run_python([sys.executable, "-c", "raise SystemExit(4)"], check=True)


def test_a_readme_command_line_is_expanded_and_continued_as_a_shell_does_it():
  line = f"{sys.executable} -c 'import sys; print(sys.argv[1:])' \\\n    --a=$A/b ${{B}}c"
  done = run_command_line(line, {"A": "gs://x", "B": "y z"}, timeout=120)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout == "['--a=gs://x/b', 'y', 'zc']\n"


def test_temporary_files_of_libraries_and_started_processes_stay_in_the_sessions_folder(
    tmp_path_factory):
  # TensorFlow's AutoGraph and TFDS make their temporary files with `tempfile` on their own.
  session = tmp_path_factory.getbasetemp().resolve()
  made = pathlib.Path(tempfile.mkdtemp(suffix="tfds")).resolve()
  assert session in made.parents, (session, made)
  show = [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"]
  forked = run_python(show, check=True)
  started = subprocess.run(show, capture_output=True, text=True, check=True)
  for result in (forked, started):
    assert session in pathlib.Path(result.stdout.strip()).resolve().parents, result.stdout
