"""Errors in TFRecord files that say which file.

TensorFlow's `DataLossError` for a truncated or corrupt TFRecord names an offset but no file, and
surfaces far from the reader, inside the training loop. The runner trains, evaluates and predicts
inside `naming_damaged_tfrecords`, the readers note the files of the datasets they build there
(`note_tfrecord_files`), and the error is turned into one that names the damaged file, found by
reading the noted files again.

Records that read well may still hold values out of range (a token id past the vocabulary): XLA's
gather clamps such an index instead of failing, so the run would go on, silently wrong. A reader
checks them in its pipeline with `check_range`, which fails naming the file; the block turns that
failure into a `RecordValueError`, one line for the user.
"""

import contextlib
import re

import tensorflow as tf

from official_bert.common.errors import UserError

# Marks the assertions of `check_range`, so that their failure is told from any other.
_OUT_OF_RANGE = "official_bert: TFRecord value out of range"
_OUT_OF_RANGE_PATTERN = re.compile(
    re.escape(f"[{_OUT_OF_RANGE}]") + r" \[(?P<path>.*?)\] \[(?P<feature>\w+)\] "
    r"\[(?P<value>-?\d+)\] \[(?P<low>-?\d+)\] \[(?P<high>-?\d+)\] \[(?P<limit>[^\]]*)\]")


class RecordValueError(UserError):
  """A TFRecord file holds a value out of its feature's range; the message names the file."""


class DamagedTFRecordError(tf.errors.DataLossError, UserError):
  """A TFRecord file is truncated or corrupt; the message names it.

  Still a `DataLossError` for code that catches TensorFlow's error, and a `UserError`, so that
  the tools print it as one line.
  """

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
    raise DamagedTFRecordError(error.node_def, error.op, named) from error
  except tf.errors.InvalidArgumentError as error:
    found = _OUT_OF_RANGE_PATTERN.search(str(error))
    if found is None:
      raise
    raise RecordValueError(
        f"{found['path']}: a record's {found['feature']} holds {found['value']}, outside "
        f"[{found['low']}, {found['high']}) ({found['limit']}): the file was written for another "
        "model or vocabulary, or is damaged.") from None
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


def check_range(values, paths, feature, low, high, limit_name):
  """An op that fails, naming the file, when a value of a batch lies outside `[low, high)`.

  Cheap (one comparison per value) and outside any compiled step: it runs in the `tf.data`
  pipeline. Inside `naming_damaged_tfrecords` its failure becomes a `RecordValueError`.

  Args:
    values: int `[batch, n]`, the values of one feature.
    paths: string `[batch]`, the file each row was read from.
    feature: the feature's name, for the message.
    low: the smallest valid value.
    high: the first invalid value above.
    limit_name: what `high` is, for the message (e.g. `vocab_size`).

  Returns:
    The assertion op; run it with `tf.control_dependencies`.
  """
  bad = tf.logical_or(values < low, values >= high)
  bad_rows = tf.reduce_any(bad, axis=-1)
  row = tf.argmax(tf.cast(bad_rows, tf.int32), output_type=tf.int32)
  value = tf.boolean_mask(values[row], bad[row])
  value = tf.cond(tf.size(value) > 0, lambda: value[0], lambda: tf.cast(low, values.dtype))
  return tf.debugging.Assert(
      tf.logical_not(tf.reduce_any(bad_rows)),
      [_OUT_OF_RANGE, paths[row], feature, value, low, high, limit_name], summarize=1)
