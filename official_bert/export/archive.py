"""Writing a `keras.export.ExportArchive` as a whole: all of the SavedModel or nothing."""

import os
import shutil
import uuid

from absl import logging


def check_export_dir(export_dir, overwrite):
  """Raises `FileExistsError` if `export_dir` holds files and `overwrite` is False."""
  export_dir = os.fspath(export_dir)
  if os.path.isdir(export_dir) and os.listdir(export_dir) and not overwrite:
    raise FileExistsError(f"{export_dir} is not empty; pass overwrite=True (--overwrite) to "
                          "replace what is there, or choose another export_dir.")
  if os.path.exists(export_dir) and not os.path.isdir(export_dir):
    raise FileExistsError(f"{export_dir} exists and is not a folder.")


def write_archive(archive, export_dir, overwrite=False):
  """Writes the SavedModel to a temporary sibling folder, then renames it to `export_dir`.

  A reader never sees half an export: until the rename `export_dir` is absent or still holds
  the previous export, and a failure removes the temporary folder.

  Args:
    archive: a `keras.export.ExportArchive` with its endpoints added.
    export_dir: the SavedModel folder to create.
    overwrite: replace a non-empty `export_dir`.

  Returns:
    `export_dir`.
  """
  check_export_dir(export_dir, overwrite)
  target = os.path.abspath(os.fspath(export_dir))
  parent, name = os.path.split(target)
  os.makedirs(parent, exist_ok=True)
  # `os.mkdir` (not `tempfile.mkdtemp`, which makes the folder private) so that the export gets
  # the usual permissions and a server running as another user can read it.
  staging = os.path.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
  os.mkdir(staging)
  try:
    archive.write_out(staging, verbose=False)
    if os.path.exists(target):
      previous = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:12]}")
      os.rename(target, previous)
      os.replace(staging, target)
      shutil.rmtree(previous, ignore_errors=True)
    else:
      os.replace(staging, target)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  logging.info("Wrote the SavedModel %s.", target)
  return export_dir
