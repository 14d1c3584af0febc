"""Runs every doctest of the package in a fresh temporary folder, its working directory.

Examples that write files (a vocabulary, a TFRecord file, a checkpoint) can then use short
relative paths, as a user would, and leave nothing behind.

Test files run longest first, by the times that `tests/durations.json` records for them (a file it
does not know counts as the longest): `dev.py test` hands whole files to its workers in that
order, so no long file is handed out last to keep one worker busy while the other has finished.
`python3 dev.py test --record-durations` measures the files that run and updates the record.

The temporary files that libraries make on their own (TensorFlow's AutoGraph sources, the folders
TFDS makes for a dataset's metadata) and the scripts the tests start go into a folder of the
session's temporary folder (`TMPDIR` and `tempfile.tempdir`), not into the machine's `/tmp`, and
go with it. What libraries keep in the user's home goes into a home of the session's own (`HOME`,
set before any test module is imported, with `TMPDIR` inside it until the session's folder takes
over), removed when the session ends: ONNX Runtime and OpenVINO write telemetry ids under
`~/.cache` and `~/intel`, and a file into the temporary folder, as soon as they are imported,
which some test modules do when they are collected.

XLA compiles the tests' programs at LLVM's -O0 (`--xla_backend_optimization_level=0` in
`XLA_FLAGS`, which the scripts the tests start inherit), unless `XLA_FLAGS` sets a level itself.
The test processes' cyclic garbage collector runs every 10,000 net allocations, not 700.
NumPy's OpenBLAS runs one thread in each test process (`OPENBLAS_NUM_THREADS=1`, unless set): the
workers already fill every core, and an idle OpenBLAS thread spins on a core that the other worker
needs.
"""

import gc
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

# The session's home: made by the main process before its xdist workers start, which inherit it
# (`PYTEST_XDIST_WORKER` tells them apart), and removed by it when the session ends.
_OWN_HOME = None
_USER_ENVIRONMENT = {}
if "PYTEST_XDIST_WORKER" not in os.environ:
  import site

  # pytest's own folders (its base temporary folder) stay where they would be: it asks `tempfile`,
  # which reads TMPDIR once.
  tempfile.gettempdir()
  _OWN_HOME = tempfile.mkdtemp(prefix="official_bert-test-home-")
  os.mkdir(os.path.join(_OWN_HOME, "tmp"))
  # Without them, these folders follow HOME.
  _XDG_FOLDERS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
  _USER_ENVIRONMENT = {name: os.environ.get(name)
                       for name in ("HOME", "TMPDIR", "PYTHONUSERBASE", *_XDG_FOLDERS)}
  # A new interpreter finds the user's own packages (`pip install --user`) from HOME; it keeps
  # finding them where they are.
  os.environ["PYTHONUSERBASE"] = site.getuserbase()
  for name in _XDG_FOLDERS:
    os.environ.pop(name, None)
  os.environ.update(HOME=_OWN_HOME, TMPDIR=os.path.join(_OWN_HOME, "tmp"))

# The Beam pipeline imports Apache Beam, an optional extra (pip install -e ".[beam]"): without
# it the module cannot be imported to collect its doctests
# (tests/pretraining/test_beam_pipeline.py skips).
if importlib.util.find_spec("apache_beam") is None:
  collect_ignore = ["official_bert/pretraining/beam_pipeline.py"]

# Read when NumPy loads, which is after this file: nothing before it imports NumPy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Most of the compile of a tiny model's XLA program on a CPU is LLVM optimising the machine code
# of its hundreds of kernels: a float16 training step compiled in 14 s instead of 21-26 s. The
# tests check what the programs compute, not how fast they run, and LLVM's -O0 keeps the same
# IEEE arithmetic (XLA turns no fast-math on). Set here, before any test imports TensorFlow.
_XLA_LEVEL = "--xla_backend_optimization_level"
if _XLA_LEVEL not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_LEVEL}=0".strip()


# Tracing a model allocates millions of small objects, and at Python's default (a collection every
# 700 net allocations) the collector scans the young objects thousands of times a test file and
# the whole heap, TensorFlow's and Keras' modules included, every hundred of those: about 5% of a
# worker's time in the model tests. Collecting every 10,000 cuts that to about 1.5%; the tests
# that check what a collection frees call `gc.collect()` themselves. The scripts that the tests
# start keep Python's default.
gc.set_threshold(10_000, *gc.get_threshold()[1:])


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_sessions_folder(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tmp", numbered=False)
  patch = pytest.MonkeyPatch()
  patch.setenv("TMPDIR", str(folder))  # the processes the tests start
  patch.setattr(tempfile, "tempdir", str(folder))  # this one, which read TMPDIR already
  yield folder
  patch.undo()


@pytest.fixture(autouse=True)
def _doctest_in_temporary_folder(request):
  if isinstance(request.node, pytest.DoctestItem):
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))


DURATIONS = pathlib.Path(__file__).resolve().parent / "tests" / "durations.json"


def pytest_addoption(parser):
  parser.addoption(
      "--record-durations", action="store_true",
      help=f"write the seconds each test file took to {DURATIONS.name} (the order of later runs)")


def _file_of(nodeid):
  return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items):
  try:
    durations = json.loads(DURATIONS.read_text())
  except FileNotFoundError:
    durations = {}
  longest = max(durations.values(), default=0.0)
  # Stable: the tests of a file keep their order.
  items.sort(key=lambda item: -durations.get(_file_of(item.nodeid), longest))


def pytest_configure(config):
  # Only the main process watches: with pytest-xdist it receives every worker's reports.
  if hasattr(config, "workerinput"):
    return
  config.pluginmanager.register(_CheckoutGuard(), "official_bert_checkout_guard")
  if config.getoption("record_durations"):
    config.pluginmanager.register(_DurationRecorder(), "official_bert_durations")


def pytest_unconfigure(config):
  del config
  if _OWN_HOME is None:
    return
  os.environ.clear()
  os.environ.update(_user_environment())
  shutil.rmtree(_OWN_HOME, ignore_errors=True)


class _CheckoutGuard:
  """Fails the session when a test left a file in the checkout, or changed a tracked one.

  Tests write into their temporary folders only; `git status` (which ignores what `.gitignore`
  names: `.venv/`, caches) is compared before and after the session. Without git (a source
  archive) nothing is checked.
  """

  def __init__(self):
    self.before = _checkout_status()

  def pytest_sessionfinish(self, session):
    after = _checkout_status()
    if self.before is None or after is None:
      return
    record = DURATIONS.relative_to(DURATIONS.parents[1]).as_posix()  # --record-durations's
    left = sorted(after - self.before - {f"?? {record}", f" M {record}"})
    if left:
      session.config.get_terminal_writer().line(
          "Tests wrote into the checkout, not into their temporary folders: " + ", ".join(left),
          red=True)
      session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _user_environment():
  """This process's environment with the user's home (and TMPDIR) of before the session."""
  environment = dict(os.environ)
  for name, value in _USER_ENVIRONMENT.items():
    if value is None:
      environment.pop(name, None)
    else:
      environment[name] = value
  return environment


def _checkout_status():
  """`git status --porcelain` lines of the checkout as a set, or None without git."""
  try:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=DURATIONS.parents[1],
        capture_output=True, text=True, timeout=60, check=True,
        env=_user_environment())  # git reads its settings (`safe.directory`) in the user's home
  except (OSError, subprocess.SubprocessError):
    return None
  return set(status.stdout.splitlines())


class _DurationRecorder:
  """Sums each test file's set-up, call and tear-down times; writes them when the session ends."""

  def __init__(self):
    self.seconds = {}

  def pytest_runtest_logreport(self, report):
    file = _file_of(report.nodeid)
    self.seconds[file] = self.seconds.get(file, 0.0) + report.duration

  def pytest_sessionfinish(self):
    try:
      durations = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
      durations = {}
    durations.update({file: round(s, 1) for file, s in self.seconds.items()})
    partial = DURATIONS.with_suffix(".json.partial")
    partial.write_text(json.dumps(dict(sorted(durations.items())), indent=0) + "\n")
    partial.replace(DURATIONS)
