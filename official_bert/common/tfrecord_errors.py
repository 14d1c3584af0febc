"""Errors in TFRecord files that say which file.

TensorFlow's `DataLossError` for a truncated or corrupt TFRecord names an offset but no file, and
surfaces far from the reader, inside the training loop. The runner trains, evaluates and predicts
inside `naming_damaged_tfrecords`, the readers note the files of the datasets they build there
(`note_tfrecord_files`), and the error is turned into one that names the damaged file, found by
reading the noted files again.
"""

import contextlib
import re

import tensorflow as tf

# For each `naming_damaged_tfrecords` block in progress, the TFRecord files noted in it, each with
# its compression type.
_SCOPES = []


def note_tfrecord_files(files, compression_types=None):
  """Notes that a dataset reads these TFRecord files, so that a damaged one can be named.

  Files are noted only inside `naming_damaged_tfrecords` blocks, and forgotten at their end.

  Args:
    files: list of paths.
    compression_types: the compression type of each file (`""` or `"GZIP"`); none by default.
  """
  for scope in _SCOPES:
    scope.update(zip(files, compression_types or [""] * len(files)))


@contextlib.contextmanager
def naming_damaged_tfrecords():
  """Turns a `DataLossError` raised inside the block into one that names the damaged file.

  The TFRecord files noted inside the block are read again, one by one, up to the first that
  fails (on the error path only: it costs as much as reading them once). When none fails (the
  damage is elsewhere, e.g. in a checkpoint), the error passes unchanged.
  """
  files = {}
  _SCOPES.append(files)
  try:
    yield
  except tf.errors.DataLossError as error:
    named = _name_damaged_tfrecord(files)
    if named is None:
      raise
    raise tf.errors.DataLossError(error.node_def, error.op, named) from error
  finally:
    _SCOPES[:] = [scope for scope in _SCOPES if scope is not files]


def _name_damaged_tfrecord(files):
  """The message for the first of `files` that cannot be read whole, or None."""
  for path, compression in files.items():
    records = tf.data.TFRecordDataset(path, compression_type=compression)
    try:
      records.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
    except tf.errors.DataLossError as error:
      found = re.search(r"(truncated|corrupted) record at \d+", str(error))
      detail = found.group(0) if found else str(error).strip().splitlines()[-1]
      return (f"{path}: the TFRecord file is damaged ({detail}); write it again, or leave it "
              "out of the input.")
    except tf.errors.OpError:
      continue  # gone or unreadable since: not the file this error came from
  return None
