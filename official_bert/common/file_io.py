"""Files through TensorFlow's file systems: atomic writes, whole folders and glob expansion.

Every path the package reads or writes may be local or any scheme TensorFlow knows (`gs://`,
`file://`, `ram://`, ...), so the helpers go through `tf.io.gfile`. TensorFlow loads when a helper
first touches a file: the model runs on JAX and PyTorch without TensorFlow installed, and only
reading or writing its files (a config, a model folder) then asks for it, in one line
(`TensorFlowMissingError`).

Example:

>>> with atomic_write("ram://file_io_example/notes.txt") as f:
...   _ = f.write("written whole or not at all\\n")
>>> expand_globs("ram://file_io_example/*.txt")
['ram://file_io_example/notes.txt']
>>> write_folder("ram://file_io_example/model",
...              lambda staging: write_text(f"{staging}/manifest.json", "{}\\n"), "manifest.json")
['manifest.json']
"""

import contextlib
import errno
import io
import json
import os
import re
import socket
import sys
import uuid

from official_bert.common.errors import UserError

# Bytes that `open_read` fetches from the file system at once: few calls into TensorFlow for a
# local file, few requests for a remote one.
READ_BLOCK_BYTES = 1 << 20


class TensorFlowMissingError(UserError):
  """A file was to be read or written, and TensorFlow, whose file systems do that, is missing."""


def gfile(path):
  """`tf.io.gfile`, through which every file of the package is read and written.

  Args:
    path: the file or folder about to be used, named in the error.

  Raises:
    TensorFlowMissingError: TensorFlow is not installed.
  """
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise TensorFlowMissingError(
        f"{path}: files are read and written through TensorFlow's file systems (tf.io.gfile), "
        "and TensorFlow is not installed; install it (pip install tensorflow-cpu) beside JAX or "
        "PyTorch, or build the model from a BertConfig and load its weights with Keras' "
        "`model.load_weights`") from None
  return tf.io.gfile


def exists(path):
  """Whether `path` exists, as a file or a folder (on any `tf.io.gfile` file system)."""
  return gfile(path).exists(os.fspath(path))


class _GFileRaw(io.RawIOBase):
  """A `tf.io.gfile.GFile` opened for reading, as the raw stream under Python's buffered readers."""

  def __init__(self, path):
    super().__init__()
    self.name = path
    self._file = gfile(path).GFile(path, "rb")
    try:
      self._file.read(0)  # Opens the file now, so that a missing one is reported here.
    except sys.modules["tensorflow"].errors.NotFoundError as e:
      raise FileNotFoundError(f"{path}: no such file") from e

  def readable(self):
    return True

  def readinto(self, buffer):
    data = self._file.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self):
    if not self.closed:
      self._file.close()
    super().close()


def open_read(path, encoding=None, newline=None):
  """Opens a file for reading through `tf.io.gfile`, with the behaviour of Python's `open`.

  The result is Python's own buffered (and, with `encoding`, text) reader, so `readline`,
  iteration, the `csv` module, newline translation and decoding errors behave exactly as for a
  local `open(path, ...)`, whatever the file system.

  Args:
    path: the file (local or any `tf.io.gfile` scheme).
    encoding: None for bytes, or a text encoding (`"utf-8-sig"` drops a byte-order mark).
    newline: as for `open` in text mode (`""` for the `csv` module).

  Returns:
    An `io.BufferedReader`, or an `io.TextIOWrapper` over one when `encoding` is given.

  Raises:
    FileNotFoundError: `path` does not exist.
  """
  path = os.fspath(path)
  binary = io.BufferedReader(_GFileRaw(path), buffer_size=READ_BLOCK_BYTES)
  if encoding is None:
    return binary
  return io.TextIOWrapper(binary, encoding=encoding, newline=newline)


def is_file(path):
  """Whether `path` exists and is a file, not a folder (on any `tf.io.gfile` file system)."""
  files = gfile(path)
  return files.exists(path) and not files.isdir(path)


def local_path(path):
  """The path on the local disk that `path` names, or None for any other file system.

  Args:
    path: a plain path or a URL (`file:///tmp/x` is local, `gs://...` is not).
  """
  path = os.fspath(path)
  if path.startswith("file://"):
    return path[len("file://"):]
  return None if "://" in path else path


def temporary_name(path):
  """A sibling name for `path` that no other writer (process or thread) picks.

  It names the writer's host and process (`<path>.tmp-<host>-<pid>-<hex>`), so that what a killed
  writer left can be told apart and removed (`official_bert.common.debris`).
  """
  return f"{path}.tmp-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def atomic_path(path):
  """A temporary name for a writer that opens its file by name (`tf.io.TFRecordWriter`).

  The file written there is renamed over `path` once the `with` block finished without error, and
  removed otherwise, so an interrupted run never leaves a file at `path` that looks complete.

  Args:
    path: the file to write.

  Yields:
    The temporary path, beside `path`.
  """
  temporary = temporary_name(os.fspath(path))
  files = gfile(path)
  try:
    yield temporary
    files.rename(temporary, os.fspath(path), overwrite=True)
  finally:
    if files.exists(temporary):
      files.remove(temporary)


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Opens a file that appears at `path` only once the `with` block finished without error.

  The content goes to a temporary name beside `path`, renamed over `path` at the end, so an
  interrupted run never leaves a file that looks complete; on an error the temporary is removed.

  Args:
    path: the file to write.
    mode: `"w"` for text or `"wb"` for bytes.

  Yields:
    The open `tf.io.gfile.GFile`.
  """
  if mode not in ("w", "wb"):
    raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}.")
  with atomic_path(path) as temporary, gfile(path).GFile(temporary, mode) as f:
    yield f


def write_text(path, text):
  """Writes `text` to `path` atomically (see `atomic_write`)."""
  with atomic_write(path) as f:
    f.write(text)


def write_folder(folder, fill, last):
  """Writes a set of files into `folder` so that a reader sees the file `last` only beside them all.

  `fill(staging)` writes the files into an empty staging folder inside `folder`; once it returns,
  an earlier `last` is removed from `folder`, the staged files are moved in, and `last` comes last.
  An interruption while filling leaves `folder` as it was; other files in `folder` are left alone.

  Args:
    folder: the folder; created if needed.
    fill: a function of the staging folder's path that writes plain files into it.
    last: the name of the file that marks the set complete (a manifest, a checkpoint index).

  Returns:
    The names of the files moved in, `last` at the end.
  """
  folder = os.fspath(folder)
  files = gfile(folder)
  files.makedirs(folder)
  staging = temporary_name(os.path.join(folder, ".staging"))
  files.makedirs(staging)
  try:
    fill(staging)
    names = sorted(files.listdir(staging), key=lambda name: name == last)
    if last not in names:
      raise FileNotFoundError(f"Writing {folder}: {last} was not written.")
    if files.exists(os.path.join(folder, last)):
      files.remove(os.path.join(folder, last))
    for name in names:
      files.rename(os.path.join(staging, name), os.path.join(folder, name), overwrite=True)
  finally:
    if files.exists(staging):
      files.rmtree(staging)
  return names


def expand_globs(patterns, what="input file"):
  """Expands file names and globs, comma-separated or in a list, into sorted file names.

  Args:
    patterns: a string of comma-separated names or globs, or a list of such strings.
    what: what the files are, for the error message (e.g. "pre-training data").

  Returns:
    The matching files (folders excluded), each pattern's matches sorted, in pattern order.

  Raises:
    FileNotFoundError: a pattern matches no file, or no pattern was given.
  """
  if isinstance(patterns, (str, os.PathLike)):
    patterns = [os.fspath(patterns)]
  files = []
  for pattern in (p.strip() for group in patterns for p in os.fspath(group).split(",")):
    if not pattern:
      continue
    files_of = gfile(pattern)
    matches = sorted(m for m in files_of.glob(pattern) if not files_of.isdir(m))
    if not matches:
      raise FileNotFoundError(f"{what} {pattern!r}: no such file (or no match for the glob).")
    files.extend(matches)
  if not files:
    raise FileNotFoundError(f"No {what} given in {patterns!r}.")
  return files


def read_json_object(path):
  """The JSON object in the UTF-8 file `path`, read through `tf.io.gfile`.

  Args:
    path: the file.

  Raises:
    UserError: naming the file, and the line and column, when it holds no valid JSON object.

  Example:

  >>> write_text("settings.json", '{"a": 1}')
  >>> read_json_object("settings.json")
  {'a': 1}
  """
  with open_read(path, encoding="utf-8") as f:
    text = f.read()
  try:
    values = json.loads(text)
  except json.JSONDecodeError as error:
    raise UserError(f"{path}: not valid JSON at line {error.lineno}, column {error.colno}: "
                    f"{error.msg}.") from None
  if not isinstance(values, dict):
    raise UserError(f"{path}: expected a JSON object, got {type(values).__name__}.")
  return values


_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# How TensorFlow's file systems say it: "<path>; No space left on device".
_DISK_FULL_MESSAGE = re.compile(
    r"(?P<path>[^\s;]+); (?P<reason>No space left on device|File too large|Disk quota exceeded)")


def raise_if_disk_full(error, what, path=None):
  """Re-raises an error of a full disk (or quota, or file size limit) as one line naming the file.

  Args:
    error: an `OSError` or a TensorFlow `OpError` raised while writing.
    what: what was being written, for the message ("saving the checkpoint of step 4").
    path: the file written, where `error` does not name it.

  Raises:
    UserError: `error` says that the disk is full; otherwise nothing is raised.
  """
  if isinstance(error, OSError) and error.errno in _DISK_FULL_ERRNOS:
    path, reason = error.filename or path, error.strerror
  elif ("tensorflow" in sys.modules  # an OpError exists only once TensorFlow is loaded
        and isinstance(error, sys.modules["tensorflow"].errors.OpError)
        and _DISK_FULL_MESSAGE.search(error.message)):
    found = _DISK_FULL_MESSAGE.search(error.message)
    path, reason = found["path"], found["reason"]
  else:
    return
  raise UserError(f"{path or 'a file'}: out of disk space ({reason}) while {what}; free some "
                  "space there, or write elsewhere, and run again") from error
