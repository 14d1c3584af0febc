"""Writing a `keras.export.ExportArchive` as a whole: all of the SavedModel or nothing."""

import os

from absl import logging
import tensorflow as tf

from official_bert.common import file_io


def check_export_dir(export_dir, overwrite):
  """Raises `FileExistsError` if `export_dir` holds files and `overwrite` is False."""
  export_dir = os.fspath(export_dir)
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise FileExistsError(f"{export_dir} exists and is not a folder.")
  if tf.io.gfile.isdir(export_dir) and tf.io.gfile.listdir(export_dir) and not overwrite:
    raise FileExistsError(f"{export_dir} is not empty; pass overwrite=True (--overwrite) to "
                          "replace what is there, or choose another export_dir.")


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
  check_export_dir(export_dir, overwrite)
  target = os.fspath(export_dir).rstrip("/")
  tf.io.gfile.makedirs(os.path.dirname(target) or ".")
  staging = file_io.temporary_name(target)
  try:
    archive.write_out(staging, verbose=False)
    if tf.io.gfile.exists(target):
      previous = file_io.temporary_name(target)
      tf.io.gfile.rename(target, previous)
      tf.io.gfile.rename(staging, target)
      tf.io.gfile.rmtree(previous)
    else:
      tf.io.gfile.rename(staging, target)
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)
  logging.info("Wrote the SavedModel %s.", target)
  return export_dir
