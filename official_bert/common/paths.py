"""Where a run reads and where it writes, checked before any work.

Every tool names its inputs (data, vocabulary, config, init checkpoint, corpus) and its outputs
(`output_dir`, `export_dir`, `output_file`) as `{flag name: path}` dicts, and `check_run_paths`
refuses, with one line naming both flags, a run whose output

* is an input, lies inside an input folder, or contains an input (the run would overwrite or
  delete what it reads: a corpus, a pre-trained model, a data folder);
* cannot be written: an existing file where a folder goes (or the reverse), a read-only folder, a
  file system that cannot be reached (a `gs://` bucket without network or credentials), probed by
  writing and removing a small file in the nearest existing folder;

and a run whose input lies on a file system that cannot be reached. Paths are compared in one
normal form (`normalize`): `file://` URLs and plain paths alike, absolute, without `..` or a
trailing slash, with the symbolic links of local paths resolved. A value may list several paths
separated by commas, and an input may be a glob: an output that the glob matches is an input too
(a later run would read it).

Example:

>>> normalize("file:///tmp/./data/../out/")
'/tmp/out'
>>> normalize("gs://bucket/data//train/")
'gs://bucket/data/train'
>>> check_run_paths(inputs={"vocab_file": "ram://paths_example/vocab.txt"},
...                 outputs={"output_dir": "ram://paths_example/out"})
>>> check_run_paths(inputs={"data_dir": "ram://paths_example/glue"},
...                 outputs={"export_dir": "ram://paths_example"})
Traceback (most recent call last):
...
official_bert.common.paths.PathConflictError: --export_dir=ram://paths_example contains \
--data_dir=ram://paths_example/glue: the run would overwrite or delete what it reads. Choose \
another --export_dir.
"""

import fnmatch
import os
import posixpath
import socket

import tensorflow as tf

from official_bert.common import file_io
from official_bert.common.errors import UserError

_GLOB_CHARACTERS = "*?["
# Outputs that replace their folder whole (an export): they may not hold another output.
_REPLACED_WHOLE = ("export_dir",)
# What the probe of a writable folder is called: a hidden name no tool reads.
_PROBE_PREFIX = ".official_bert-write-check"


class PathConflictError(UserError):
  """An output of the run is, holds or lies inside one of its inputs."""


class UnusablePathError(UserError):
  """A path of the run cannot be read or written (wrong kind, read-only, unreachable)."""


def normalize(path):
  """The form in which two paths to the same place compare equal.

  Args:
    path: a plain path, or a URL of any `tf.io.gfile` file system (`file://`, `gs://`, ...).

  Returns:
    A local path: absolute, symbolic links resolved. A URL: `scheme://` and the rest without
    `.`, `..`, doubled or trailing slashes.
  """
  path = os.fspath(path).strip()
  local = file_io.local_path(path)
  if local is not None:
    return os.path.realpath(os.path.abspath(local or os.curdir))
  scheme, rest = path.split("://", 1)
  return f"{scheme.lower()}://{posixpath.normpath('/' + rest).lstrip('/')}"


def _split(value):
  """The paths of a flag value: comma-separated names (or a list of them); empty ones dropped."""
  values = [value] if isinstance(value, (str, os.PathLike)) else list(value or ())
  return [part.strip() for group in values for part in os.fspath(group).split(",")
          if part.strip()]


def _relation(output, input_path):
  """How `output` stands to `input_path` (both normalised): a phrase, or None when apart."""
  if output == input_path:
    return "is"
  if input_path.startswith(output.rstrip("/") + "/"):
    return "contains"
  if output.startswith(input_path.rstrip("/") + "/"):
    return "lies inside"
  return None


def _matches(output, pattern):
  """Whether the glob `pattern` (normalised) names `output`, folder by folder."""
  parts, pattern_parts = output.split("/"), pattern.split("/")
  return len(parts) == len(pattern_parts) and all(
      fnmatch.fnmatchcase(part, wanted) for part, wanted in zip(parts, pattern_parts))


def _unreachable(name, path, error):
  message = error.message.splitlines()[0] if error.message else type(error).__name__
  return UnusablePathError(f"--{name}={path} cannot be reached: {message}. Check the path, the "
                           "network and the credentials of its file system.")


def _expand(name, path):
  """The normalised paths an input names (a glob's matches and the glob itself).

  An input on another file system than the local disk is looked up once, so that a bucket out of
  reach is reported here, before any work.
  """
  is_glob = any(character in path for character in _GLOB_CHARACTERS)
  try:
    matches = tf.io.gfile.glob(path) if is_glob else []
    if not is_glob and file_io.local_path(path) is None:
      tf.io.gfile.exists(path)
  except tf.errors.NotFoundError:
    matches = []
  except tf.errors.OpError as error:
    raise _unreachable(name, path, error) from None
  return [normalize(match) for match in matches] + [normalize(path)]


def check_apart(inputs, outputs):
  """Refuses an output that is, contains or lies inside an input, and an unreachable input.

  Args:
    inputs: `{flag name: path}`; a path may list several, comma-separated, and may be a glob.
      None values are skipped.
    outputs: `{flag name: path}` of the files and folders the run writes.

  Raises:
    PathConflictError: naming both flags.
    UnusablePathError: an input's file system cannot be reached.
  """
  expanded = {name: [(path, _expand(name, path)) for path in _split(value)]
              for name, value in inputs.items() if value}
  for out_name, out_value in outputs.items():
    for out_path in _split(out_value or ()):
      output = normalize(out_path)
      for in_name, named in expanded.items():
        for in_path, forms in named:
          for form in forms:
            relation = _relation(output, form)
            if relation is None and any(c in form for c in _GLOB_CHARACTERS):
              relation = "is matched by" if _matches(output, form) else None
            if relation:
              raise PathConflictError(
                  f"--{out_name}={out_path} {relation} --{in_name}={in_path}: the run would "
                  f"overwrite or delete what it reads. Choose another --{out_name}.")


def check_outputs_apart(outputs):
  """Refuses two outputs in one place, and an export folder that holds another output.

  Args:
    outputs: `{flag name: path}` of what the run writes; `export_dir` is replaced whole.

  Raises:
    PathConflictError: naming both flags.
  """
  items = [(name, path, normalize(path)) for name, value in outputs.items() if value
           for path in _split(value)]
  for name, path, place in items:
    for other_name, other_path, other in items:
      relation = _relation(place, other) if name != other_name else None
      if relation == "is" or (relation == "contains" and name in _REPLACED_WHOLE):
        change = name if name in _REPLACED_WHOLE or other_name not in _REPLACED_WHOLE else (
            other_name)
        raise PathConflictError(
            f"--{name}={path} {relation} --{other_name}={other_path}: writing one would "
            f"overwrite or delete the other. Choose another --{change}.")


def _parent(path):
  """The folder that holds `path`, or None at the top (`/`, or a URL's bucket or host)."""
  if "://" in path:
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest)}" if "/" in rest.strip("/") else None
  parent = os.path.dirname(path)
  return parent if parent and parent != path else None


def check_writable(name, path, *, is_file=False):
  """Refuses an output location the run could not write, before any work.

  The nearest existing folder on the way to `path` gets a small file written and removed; nothing
  else is created.

  Args:
    name: the flag, for the message.
    path: the output file or folder.
    is_file: `path` is a file (a folder of that name is refused); otherwise a folder (a file of
      that name is refused).

  Raises:
    UnusablePathError: naming the flag and what is wrong.
  """
  path = os.fspath(path)
  local = file_io.local_path(path)
  target = place = os.path.abspath(local) if local is not None else path.rstrip("/")
  try:
    while not tf.io.gfile.exists(place) and _parent(place) is not None:
      place = _parent(place)
    if tf.io.gfile.exists(place):
      is_folder = tf.io.gfile.isdir(place)
      if place == target and is_folder == is_file:
        wanted, found = ("file", "a folder") if is_file else ("folder", "an existing file")
        raise UnusablePathError(f"--{name}={path} is {found}; it names a {wanted} to write. "
                                f"Choose another --{name}.")
      if not is_folder and place != target:
        raise UnusablePathError(f"--{name}={path} lies under {place}, which is a file, not a "
                                f"folder. Choose another --{name}.")
      if not is_folder:
        place = _parent(place)
    probe = posixpath.join(place, f"{_PROBE_PREFIX}-{socket.gethostname()}-{os.getpid()}")
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("")
    tf.io.gfile.remove(probe)
  except tf.errors.PermissionDeniedError:
    raise UnusablePathError(f"--{name}={path} cannot be written: {place} is read-only for this "
                            f"user. Choose another --{name}.") from None
  except tf.errors.OpError as error:
    raise _unreachable(name, path, error) from None


def check_run_paths(inputs, outputs, files=()):
  """Everything `check_apart`, `check_outputs_apart` and `check_writable` check, for a run.

  Args:
    inputs: `{flag name: path}` of what the run reads (None values are skipped).
    outputs: `{flag name: path}` of what it writes; a name ending in `_file` or listed in
      `files` is a file, any other a folder.
    files: names of `outputs` that are files whatever their name (`--export_dir` of a one-file
      export format).

  Raises:
    PathConflictError, UnusablePathError: one line naming the flags.
  """
  outputs = {name: value for name, value in outputs.items() if value}
  check_apart(inputs, outputs)
  check_outputs_apart(outputs)
  for name, value in outputs.items():
    for path in _split(value):
      check_writable(name, path, is_file=name.endswith("_file") or name in files)
