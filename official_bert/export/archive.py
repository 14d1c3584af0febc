"""Writing an export folder as a whole: all of the SavedModel (a `keras.export.ExportArchive`) or
OpenVINO IR, or nothing (`write_folder`).

An export replaces its folder whole, so it is written only into a folder that is absent, empty,
or holds an earlier export of this package and nothing else: each export carries `EXPORT_MARK`,
which lists its entries and says what the export is. A folder holding anything else (the user's
files, an output folder, a SavedModel of another tool) is refused, with or without `overwrite`.
What a killed export left beside the folder (`<export_dir>.tmp-<host>-<pid>-*`) is removed by the
next export of the same folder (`official_bert.common.debris`).
"""

import json
import os

from absl import logging
import tensorflow as tf
from tensorflow.python.saved_model import save_context  # pylint: disable=g-direct-tensorflow-import

from official_bert.common import debris, file_io
from official_bert.common.errors import UserError

EXPORT_MARK = "official_bert_export.json"


class ExportDirError(UserError, FileExistsError):
  """The export folder is taken: a file, someone else's files, or an export kept on purpose."""


def _foreign_entries(export_dir, names):
  """The entries of `export_dir` that are not part of an export of ours (all, without a mark)."""
  if EXPORT_MARK not in names:
    return names
  try:
    with tf.io.gfile.GFile(os.path.join(export_dir, EXPORT_MARK)) as f:
      ours = json.loads(f.read())["entries"]
  except (json.JSONDecodeError, KeyError, TypeError):
    return names
  return [name for name in names if name != EXPORT_MARK and name not in ours]


def check_export_dir(export_dir, overwrite):
  """Refuses an export folder that an export may not replace.

  Args:
    export_dir: the SavedModel folder to write.
    overwrite: replace an earlier export of this package there.

  Raises:
    ExportDirError: `export_dir` is a file, holds anything but an earlier export of ours, or
      holds one and `overwrite` is False.
  """
  export_dir = os.fspath(export_dir)
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise ExportDirError(f"export_dir {export_dir} is an existing file, not a folder: choose "
                         "another export_dir.")
  if not tf.io.gfile.isdir(export_dir):
    return
  names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(export_dir))
  foreign = _foreign_entries(export_dir, names)
  if foreign:
    listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise ExportDirError(f"export_dir {export_dir} holds files that are no export of this package "
                         f"({listed}); an export replaces its folder whole, so it never writes "
                         "there. Choose another (new or empty) export_dir.")
  if names and not overwrite:
    raise ExportDirError(f"export_dir {export_dir} holds an earlier export; pass overwrite=True "
                         "(--overwrite) to replace it, or choose another export_dir.")


def _trace_once_for_saving(archive):
  """Makes `write_out` trace each endpoint once instead of twice.

  `write_out` traces the endpoints to find their variables, then `tf.saved_model.save` looks
  them up again inside its save context, which is part of a `tf.function`'s cache key: every
  endpoint was traced a second time, half of an export's time. Finding the variables inside
  an equal save context (the default `SaveOptions`, as `write_out` saves with) lets the save
  reuse those traces. Where a Keras version has no such step, the export traces twice, as
  before.
  """
  find_variables = getattr(archive, "_filter_and_track_resources", None)
  if find_variables is None:
    return

  def in_save_context():
    with save_context.save_context(tf.saved_model.SaveOptions()):
      find_variables()

  archive._filter_and_track_resources = in_save_context  # pylint: disable=protected-access


def write_archive(archive, export_dir, overwrite=False):
  """Writes the SavedModel to a temporary sibling folder, then renames it to `export_dir`.

  A reader never sees half an export: until the rename `export_dir` is absent or still holds
  the previous export, and a failure removes the temporary folder.

  Args:
    archive: a `keras.export.ExportArchive` with its endpoints added.
    export_dir: the SavedModel folder to create (local or any `tf.io.gfile` scheme).
    overwrite: replace a non-empty `export_dir`.

  Returns:
    `export_dir`.
  """
  def fill(staging):
    _trace_once_for_saving(archive)
    archive.write_out(staging, verbose=False)

  write_folder(export_dir, fill, {"format": "official_bert SavedModel"}, overwrite,
               what="the SavedModel")
  return export_dir


def write_folder(export_dir, fill, mark, overwrite=False, what="the export"):
  """Writes an export folder whole: `fill(staging)` into a temporary sibling, then a rename.

  Until the rename `export_dir` is absent or still holds the previous export; a failure removes
  the temporary folder. The folder gets `EXPORT_MARK`: `mark` with the list of its entries.

  Args:
    export_dir: the folder to create (local or any `tf.io.gfile` scheme).
    fill: `fill(staging)` writes the export's files into the folder `staging`.
    mark: a JSON-able dict that says what the export is (`format`, ...).
    overwrite: replace an earlier export of ours at `export_dir`.
    what: the export, as the log line and a disk-full error name it.

  Returns:
    `export_dir`.
  """
  check_export_dir(export_dir, overwrite)
  target = os.fspath(export_dir).rstrip("/")
  tf.io.gfile.makedirs(os.path.dirname(target) or ".")
  debris.remove_dead_temporaries(target)
  staging = file_io.temporary_name(target)
  try:
    fill(staging)
    entries = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(staging))
    file_io.write_text(os.path.join(staging, EXPORT_MARK),
                       json.dumps(dict(mark, entries=entries), indent=2) + "\n")
    if tf.io.gfile.exists(target):
      previous = file_io.temporary_name(target)
      tf.io.gfile.rename(target, previous)
      tf.io.gfile.rename(staging, target)
      tf.io.gfile.rmtree(previous)
    else:
      tf.io.gfile.rename(staging, target)
  except (OSError, tf.errors.OpError) as error:
    file_io.raise_if_disk_full(error, f"writing {what} {target} (nothing of it is kept)")
    raise
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)
  logging.info("Wrote %s %s.", what, target)
  return export_dir


def read_mark(export_dir):
  """The `EXPORT_MARK` of an export folder of ours, as a dict; None when it has none."""
  try:
    with tf.io.gfile.GFile(os.path.join(os.fspath(export_dir), EXPORT_MARK)) as f:
      mark = json.loads(f.read())
  except (tf.errors.NotFoundError, json.JSONDecodeError):
    return None
  return mark if isinstance(mark, dict) else None
