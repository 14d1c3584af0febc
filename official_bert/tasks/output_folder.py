"""What an output folder promises: one run at a time, and only the run it was made for.

A run resumes from the newest checkpoint in its `output_dir`. That is right when the same command
runs again and silently wrong when the folder belongs to another run (another task, other data,
another model or schedule): training "already reached" its last step and the outputs hold the other
run's model. Two runs in one folder at once overwrite each other's checkpoints. So the driver

* locks the folder for the length of a run (`OutputDirLock`: `run.lock` names the holder's host
  and process); a second run stops at once naming the holder, and a lock left by a dead process
  of the same host is taken over with a warning (an empty or damaged lock names no holder, so it is
  never taken over: the message says to delete it). Under multi-worker training only the chief
  locks: the other workers write nothing of their own there;
* records what the folder is for (`run_fingerprint.json`, written when a training run starts):
  the model part (task kind, config, casing, sequence length, labels) and the training part (task,
  training data files by size and content hash, schedule, init checkpoint). A later training run
  must match both, a run that only evaluates or predicts the model part; otherwise it stops with
  the differences listed. `overwrite_output_dir` deletes what the package wrote there (never
  the user's other files, nor a folder holding the run's input) and starts afresh; deleting
  `run_fingerprint.json` accepts the new settings and continues from the checkpoint.

Example:

>>> folder = "ram://output_folder_example"
>>> with OutputDirLock(folder):
...   check_fingerprint(folder, {"model": {"task": "demo"}, "training": {}}, train=True)
>>> check_fingerprint(folder, {"model": {"task": "demo"}, "training": {}}, train=False)
>>> differences({"model": {"task": "demo"}}, {"model": {"task": "other"}}, ["model"])
["model.task: 'demo' then, 'other' now"]
"""

import datetime
import fnmatch
import hashlib
import json
import os
import socket
import time
import uuid

from absl import logging
import tensorflow as tf

from official_bert.common import file_io, paths
from official_bert.common.errors import UserError

FINGERPRINT_NAME = "run_fingerprint.json"
LOCK_NAME = "run.lock"
# Files up to this size are identified by content; larger ones (pre-training shards) by size and
# modification time, which a copy or a re-download changes too.
HASH_LIMIT_BYTES = 64 << 20
# Marks of a folder that a run wrote into: only such a folder is cleared by overwrite_output_dir.
_RUN_MARKS = (FINGERPRINT_NAME, "checkpoint", "model.json")
# What the package writes into an output folder (checkpoints, summaries, the model folder, cached
# features, results, predictions, GLUE submissions by task name, temporaries): all that
# overwrite_output_dir deletes. Anything else there is the user's and stays.
_WRITTEN = ("checkpoint", "ckpt-*", ".worker-*", FINGERPRINT_NAME, "experiment_config.json",
            "model.json", "model.weights.h5", "bert_config.json", "vocab.txt", "labels.txt",
            "train", "eval",
            "eval_results*.txt", "*.tf_record", "test_results*.tsv", "test_predictions.*",
            "eval_predictions.txt", "predictions.json", "nbest_predictions.json",
            "null_odds.json", "bert_model.ckpt*", "*.tmp-*",
            *(f"{task}.tsv" for task in ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "MNLI-m",
                                          "MNLI-mm", "QNLI", "RTE", "WNLI", "AX", "XNLI")))
# A rename that checks for the target first is not atomic on every file system; the loser of
# such a race sees the winner's lock once both renames are done.
_SETTLE_SECONDS = 0.2


class OutputDirInUseError(UserError):
  """Another run holds the output folder's lock."""


class OutputDirMismatchError(UserError):
  """The output folder was made for another run."""


# === The lock ===


def _process_is_gone(holder):
  """Whether the lock's holder is a process of this host that no longer runs."""
  if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
    return False
  try:
    os.kill(holder["pid"], 0)
  except ProcessLookupError:
    return True
  except PermissionError:  # another user's process
    return False
  return False


def _describe(holder):
  if not holder.get("pid") or not holder.get("host"):
    return "its run.lock is empty or damaged, so the holder is unknown"
  return (f"process {holder.get('pid')} on {holder.get('host')}, started "
          f"{holder.get('started', 'at an unknown time')}")


class OutputDirLock:
  """The output folder's lock, held for the length of one run (a context manager).

  Taking it writes the holder (host, process id, start time, a token) to a temporary file and
  renames it to `run.lock` without overwriting, through TensorFlow's file systems, then reads it
  back to check that the token is its own.

  Args:
    output_dir: the run's output folder (created if needed).
  """

  def __init__(self, output_dir):
    self.output_dir = os.fspath(output_dir)
    self.path = os.path.join(self.output_dir, LOCK_NAME)
    self.holder = {"host": socket.gethostname(), "pid": os.getpid(),
                   "started": datetime.datetime.now().isoformat(timespec="seconds"),
                   "token": uuid.uuid4().hex}

  def _read(self):
    """The holder, `{}` for an empty or damaged lock, None for none."""
    try:
      with tf.io.gfile.GFile(self.path) as f:
        holder = json.loads(f.read())
    except tf.errors.NotFoundError:
      return None
    except (json.JSONDecodeError, UnicodeDecodeError):
      return {}
    return holder if isinstance(holder, dict) else {}

  def _in_use(self, holder):
    return OutputDirInUseError(
        f"{self.output_dir} is in use by another run ({_describe(holder or {})}): two runs in one "
        f"output folder overwrite each other's checkpoints. Wait for it to finish, choose another "
        f"output_dir, or, if that run is gone, delete {self.path}.")

  def acquire(self):
    """Takes the lock, or raises `OutputDirInUseError` naming the holder."""
    tf.io.gfile.makedirs(self.output_dir)
    for _ in range(2):  # the second try follows the removal of a dead process's lock
      # Not `run.lock.<suffix>`: some file systems (ram://) answer "exists" for a name that
      # another name starts with.
      temporary = file_io.temporary_name(os.path.join(self.output_dir, "." + LOCK_NAME))
      with tf.io.gfile.GFile(temporary, "w") as f:
        f.write(json.dumps(self.holder) + "\n")
      try:
        tf.io.gfile.rename(temporary, self.path, overwrite=False)
      except tf.errors.AlreadyExistsError:
        tf.io.gfile.remove(temporary)
        holder = self._read()
        if holder is None or not _process_is_gone(holder):
          raise self._in_use(holder) from None
        logging.warning("Taking over the lock of %s: its holder, %s, no longer runs.",
                        self.output_dir, _describe(holder))
        tf.io.gfile.remove(self.path)
        continue
      time.sleep(_SETTLE_SECONDS)
      holder = self._read()
      if holder is None or holder.get("token") != self.holder["token"]:
        raise self._in_use(holder)
      return
    raise self._in_use(self._read())

  def release(self):
    """Removes the lock if it is still this run's."""
    holder = self._read()
    if holder is not None and holder.get("token") == self.holder["token"]:
      tf.io.gfile.remove(self.path)

  def __enter__(self):
    self.acquire()
    return self

  def __exit__(self, *exc_info):
    self.release()


# === The fingerprint ===


def file_identity(path):
  """What identifies an input file: its size and content hash (size and mtime when large).

  Args:
    path: a file; a name that is no file (a TFDS dataset, say) is recorded by name alone.

  Returns:
    A dict with `file`, and `bytes` with `sha256` or `mtime_ns` for an existing file.
  """
  path = os.fspath(path)
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    return {"file": path}
  stat = tf.io.gfile.stat(path)
  if stat.length > HASH_LIMIT_BYTES:
    return {"file": path, "bytes": stat.length, "mtime_ns": stat.mtime_nsec}
  digest = hashlib.sha256()
  with tf.io.gfile.GFile(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return {"file": path, "bytes": stat.length, "sha256": digest.hexdigest()}


def _flatten(values, prefix=""):
  flat = {}
  for key, value in values.items():
    name = f"{prefix}{key}"
    if isinstance(value, dict):
      flat.update(_flatten(value, name + "."))
    else:
      flat[name] = value
  return flat


def _files_text(identities):
  def one(identity):
    content = (f"sha256 {identity['sha256'][:12]}" if "sha256" in identity
               else f"modified {identity.get('mtime_ns')}")
    return (f"{identity['file']} ({identity['bytes']} bytes, {content})" if "bytes" in identity
            else identity["file"])
  return ", ".join(one(identity) for identity in identities) or "none"


def _content(identities):
  """The identities without the names: a data folder that moved is the same data."""
  return [{key: value for key, value in identity.items() if key != "file"}
          for identity in identities]


def differences(recorded, current, sections):
  """Lists what differs between two fingerprints in `sections` (`model`, `training`).

  Args:
    recorded: the folder's fingerprint.
    current: this run's fingerprint.
    sections: the parts to compare.

  Returns:
    One line per difference, e.g. `model.max_seq_length: 128 then, 64 now`.
  """
  lines = []
  for section in sections:
    before = _flatten(recorded.get(section) or {}, section + ".")
    now = _flatten(current.get(section) or {}, section + ".")
    for name in sorted(set(before) | set(now)):
      old, new = before.get(name), now.get(name)
      if name.endswith("data_files"):
        if _content(old or []) != _content(new or []):
          lines.append(f"{name}: {_files_text(old or [])} then, {_files_text(new or [])} now")
      elif old != new:
        lines.append(f"{name}: {old!r} then, {new!r} now")
  return lines


def _read_fingerprint(path):
  with tf.io.gfile.GFile(path) as f:
    text = f.read()
  try:
    recorded = json.loads(text)
  except json.JSONDecodeError as error:
    raise UserError(f"{path} is damaged ({error.msg} at line {error.lineno}): delete it to "
                    "record this run's settings, or pass overwrite_output_dir.") from None
  if not isinstance(recorded, dict) or not all(
      isinstance(recorded.get(section, {}), dict) for section in ("model", "training")):
    raise UserError(f"{path} is damaged (not a JSON object with \"model\" and \"training\" "
                    f"objects, but {type(recorded).__name__} {text.strip()[:40]!r}): delete it to "
                    "record this run's settings, or pass overwrite_output_dir.")
  return recorded


def check_fingerprint(output_dir, fingerprint, *, train, write=True):
  """Checks that `output_dir` was made for this run; records the fingerprint of a training run.

  Args:
    output_dir: the run's output folder.
    fingerprint: this run's `{"model": {...}, "training": {...}}` (JSON values).
    train: the run trains: both parts must match, and the fingerprint is recorded when the
      folder has none. A run that does not train compares the model part only.
    write: whether this process writes (the chief, under multi-worker training).

  Raises:
    OutputDirMismatchError: the folder's fingerprint differs; the message lists the differences
      and the ways out.
  """
  path = os.path.join(os.fspath(output_dir), FINGERPRINT_NAME)
  fingerprint = json.loads(json.dumps(fingerprint))  # tuples -> lists, as read back
  if tf.io.gfile.exists(path):
    found = differences(_read_fingerprint(path), fingerprint,
                        ("model", "training") if train else ("model",))
    if found:
      raise OutputDirMismatchError(
          f"{output_dir} was made for another run ({path}): {'; '.join(found)}. To start afresh "
          "in this folder pass overwrite_output_dir (--overwrite_output_dir: it deletes the "
          f"folder's checkpoints and outputs); to continue its checkpoint with the new settings "
          f"on purpose, delete {path}; or choose another output_dir.")
    return
  if not train or not write:
    return
  if tf.io.gfile.exists(os.path.join(os.fspath(output_dir), "checkpoint")):
    logging.warning("%s holds checkpoints but no %s: recording this run's settings and resuming "
                    "from them.", output_dir, FINGERPRINT_NAME)
  tf.io.gfile.makedirs(os.fspath(output_dir))
  file_io.write_text(path, json.dumps(fingerprint, indent=2, sort_keys=True) + "\n")


def _inside(path, folder):
  path, folder = paths.normalize(path), paths.normalize(folder)
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def clear(output_dir, inputs=()):
  """Deletes what earlier runs left in `output_dir` (not the lock), for a fresh start.

  Only a folder that a run wrote into (it holds a fingerprint, a checkpoint or a model folder) is
  cleared; another folder is left as it is (it has no checkpoint to resume, so the run starts
  afresh anyway). Only what the package writes there is deleted (`_WRITTEN`); the user's other
  files stay, and a folder that holds one of the run's inputs is not touched.

  Args:
    output_dir: the run's output folder.
    inputs: the run's input paths (data files, init checkpoint): a folder that holds one of them
      is not cleared.

  Raises:
    UserError: an input lies inside `output_dir`.
  """
  output_dir = os.fspath(output_dir)
  if not tf.io.gfile.isdir(output_dir):
    return
  names = tf.io.gfile.listdir(output_dir)
  if not any(name.rstrip("/") in _RUN_MARKS for name in names):
    return
  held = [os.fspath(path) for path in inputs if path and _inside(path, output_dir)]
  if held:
    raise UserError(f"Will not clear {output_dir} (overwrite_output_dir): it holds this run's "
                    f"input {', '.join(held)}. Move the input, or choose another output_dir.")
  removed, kept = 0, []
  for name in names:
    name = name.rstrip("/")
    if name == LOCK_NAME:
      continue
    if not any(fnmatch.fnmatchcase(name, pattern) for pattern in _WRITTEN):
      kept.append(name)
      continue
    path = os.path.join(output_dir, name)
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    else:
      tf.io.gfile.remove(path)
    removed += 1
  logging.warning("overwrite_output_dir: deleted the %d entries of %s left by earlier runs%s.",
                  removed, output_dir,
                  f"; kept {', '.join(sorted(kept))}, which this package does not write" if kept
                  else "")
