"""The test session's set-up: TensorFlow's log level, the tools' oneDNN switch and a kernel cache
of its own, before TensorFlow loads. Shared helpers live in `testing.py`, not here.

The package's C++ kernels (`official_bert.ops.native`) are built into a temporary folder that
the whole session shares (`$OFFICIAL_BERT_CACHE`, made by the main process and inherited by the
xdist workers and the scripts the tests start), never into `~/.cache`. The `native_kernels`
fixture builds them there at most once a session: the first worker to need a kernel builds it
under a lock, and the others wait for it and take it.
"""

import fcntl
import logging
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_CACHE = "OFFICIAL_BERT_CACHE"
# Set by the main process; an xdist worker (PYTEST_XDIST_WORKER) keeps its parent's.
if "PYTEST_XDIST_WORKER" not in os.environ:
  os.environ[_CACHE] = tempfile.mkdtemp(prefix="official_bert-test-kernels-")
  _OWN_CACHE = os.environ[_CACHE]
else:
  _OWN_CACHE = None

import official_bert.cli  # noqa: F401,E402  (turns oneDNN on before TensorFlow loads)

# The levels of the absl and root loggers when the session starts (absl's NOTSET: the root's
# level decides).
_ABSL_LEVEL = logging.getLogger("absl").level
_ROOT_LEVEL = logging.getLogger().level


@pytest.fixture(autouse=True)
def _loggers_as_the_session_found_them():
  """Each test starts with the absl and root loggers as the session found them. Libraries that a
  test runs may change them and keep them changed (TensorFlow's converters set absl's level to
  WARNING); the tests that read the package's logs later on the same worker would then see
  nothing. Where the package itself must leave the level alone, a test says so
  (`test_export_formats.py`)."""
  absl_logger = logging.getLogger("absl")
  absl_logger.setLevel(_ABSL_LEVEL)
  absl_logger.disabled = False
  absl_logger.propagate = True
  logging.getLogger().setLevel(_ROOT_LEVEL)
  logging.disable(logging.NOTSET)


def pytest_unconfigure(config):
  del config
  if _OWN_CACHE is not None:
    shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def native_kernels():
  """Builds the package's kernels into the session's cache, once; returns None, or why they
  could not be built (no compiler), for the tests to skip with."""
  # TensorFlow loads here, not when the session starts.
  from official_bert.common.errors import UserError
  from official_bert.ops import native

  # Two workers that need the kernels at once build one each, then take the other's.
  odd = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[-1] in "13579"
  for source in native.SOURCES[::-1] if odd else native.SOURCES:
    lock_path = os.path.join(os.environ[_CACHE], f"{source}.lock")
    with open(lock_path, "w") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      try:
        native.build(source)
      except UserError as error:  # no compiler here
        return str(error)
      finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
  native.load.cache_clear()  # a test before this one may have found none
  return None
