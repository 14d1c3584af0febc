"""Examples for sentence and sentence-pair classification, and what their readers share.

An `InputExample` holds one text, or a pair, and its label: a string for classification, a float for
regression, `None` for unlabeled test data. A processor (`DataProcessor`) reads one data source into
examples and knows the label list; the kinds are in `glue`, `custom_data` and `tfds_data`, and
`classifier_processors.get_processor` picks one. This module also holds what the file readers
share: `DataError` and the row reader, which reports a malformed row by file, line and column, or,
when the caller allows skipping, counts the skipped rows and logs the count.
"""

import abc
import codecs
import csv
import dataclasses
import math
import sys

from absl import logging

from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.tokenization import utf8

# GLUE and user files can hold long passages; the csv module's default cap is 128 KiB per field.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

_MAX_LINES_LISTED = 5


class DataError(UserError):
  """A data file or data set is malformed; the message says where (file, line, column) and what."""


@dataclasses.dataclass(frozen=True)
class InputExample:
  """One example for sentence or sentence-pair classification.

  Args:
    guid: unique id, `<split>-<id>`; for GLUE test files `<id>` is the `index` / `id` column that
      a GLUE submission needs.
    text_a: the (first) sentence.
    text_b: the second sentence of a pair, or `None` for single-sentence tasks.
    label: a label string of the processor's `get_labels()`, a float for regression, or `None`
      for unlabeled (test) data.
  """
  guid: str
  text_a: str
  text_b: str | None = None
  label: str | float | None = None


class DataProcessor(abc.ABC):
  """Reads the splits of one classification data source into `InputExample`s.

  Attributes:
    is_regression: whether labels are floats (STS-B, a custom regression task) rather than classes.
  """

  is_regression = False

  @property
  @abc.abstractmethod
  def splits(self):
    """The split names `get_examples` accepts, e.g. `("train", "dev", "test")`."""

  @abc.abstractmethod
  def get_examples(self, split):
    """Returns the examples of one split.

    Args:
      split: one of `self.splits`.

    Returns:
      A list of `InputExample`.
    """

  @abc.abstractmethod
  def get_labels(self):
    """Returns the label strings in label-id order; an empty list for regression."""

  def get_train_examples(self):
    """Returns the examples of the `train` split."""
    return self.get_examples("train")

  def get_dev_examples(self):
    """Returns the examples of the `dev` split (GLUE's `dev.tsv`; MNLI's matched one)."""
    return self.get_examples("dev")

  def get_test_examples(self):
    """Returns the examples of the `test` split, usually unlabeled."""
    return self.get_examples("test")

  def _check_split(self, split):
    if split not in self.splits:
      raise ValueError(f"{type(self).__name__} has no split {split!r}; choose one of "
                       f"{list(self.splits)}")


class RowIssues:
  """Handles malformed rows of one source: raises on the first, or skips, counts and logs them.

  Args:
    path: the file (or data set) being read, for messages.
    skip: when False, `report` raises `DataError`; when True it counts the row and `finish` logs
      how many rows were skipped and where the first ones were.
    position_name: what row positions are, in messages: `None` for file lines (`path:12: ...`),
      or a word such as `"idx"` (`path, idx 12: ...`).
  """

  def __init__(self, path, skip=False, position_name=None):
    self.path = path
    self.skip = skip
    self.position_name = position_name
    self.skipped = []
    self.count = 0

  def _where(self, position):
    if self.position_name:
      return f"{self.path}, {self.position_name} {position}"
    return f"{self.path}:{position}"

  def report(self, position, message, rows=1):
    """Handles one malformed row at `position` (a 1-based line) with what is wrong with it.

    Args:
      position: where the row begins.
      message: what is wrong with it.
      rows: how many rows of the file it stands for: a quoted field that swallowed the lines
        below it (a stray `"`) stands for each of them, and they are counted as skipped too.
    """
    if not self.skip:
      raise DataError(f"{self._where(position)}: {message}")
    self.skipped.append(position)
    self.count += rows
    if len(self.skipped) <= _MAX_LINES_LISTED:
      logging.warning("Skipping %s: %s", self._where(position), message)

  def finish(self):
    """Logs the number of skipped rows; returns it."""
    count = self.count
    if count:
      listed = ", ".join(str(position) for position in self.skipped[:_MAX_LINES_LISTED])
      more = " ..." if count > _MAX_LINES_LISTED else ""
      logging.warning("Skipped %d malformed row(s) of %s (%s %s%s).", count, self.path,
                      self.position_name or "lines", listed, more)
    return count


def parse_score(value, line, column, issues):
  """Returns a regression label as a finite float, or reports the row and returns None."""
  try:
    score = float(value)
  except ValueError:
    score = math.nan
  if not math.isfinite(score):
    issues.report(line, f"{column} is {value!r}, not a number")
    return None
  return score


def text_lines(path, dropped):
  """Yields the lines of `path` as `str` with their line ends, split where `open(newline="")`
  splits (LF, CR LF, CR), without a leading byte-order mark and, as in the original, without the
  bytes that are not UTF-8 (counted in `dropped`)."""
  number = 0
  with file_io.open_read(path) as f:
    for chunk in f:
      for raw in chunk.splitlines(keepends=True):
        number += 1
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
          raw = raw[len(codecs.BOM_UTF8):]
        yield dropped.decode(raw, number)


def read_rows(path, delimiter="\t", quoting=csv.QUOTE_NONE, dropped=None, last_lines=None):
  """Yields the rows of a delimited text file with their line numbers.

  The file is read as UTF-8 with any byte-order mark dropped (GLUE's MRPC files start with one).
  Bytes that are not UTF-8 are dropped as the original's `convert_to_unicode` did, counted, and
  reported in a warning naming the file and the lines.
  GLUE files are tab-separated without quoting (`csv.QUOTE_NONE`): a `"` is part of the text.
  Blank lines hold no example and are passed over.

  Args:
    path: the file.
    delimiter: the field separator.
    quoting: a `csv.QUOTE_*` mode; CSV files use `csv.QUOTE_MINIMAL`, so a quoted field may span
      lines.
    dropped: optional `utf8.DroppedBytes` that counts the dropped bytes, for the caller.
    last_lines: optional dict, filled with `first line -> last line` for each row that spans
      several lines (a quoted field with line breaks), so that a malformed one can be counted as
      the rows it swallowed.

  Yields:
    `(line, fields)`: the 1-based line on which the row starts and its list of strings.

  Raises:
    DataError: the csv module rejects a row.
  """
  dropped = dropped if dropped is not None else utf8.DroppedBytes(path)
  reader = csv.reader(text_lines(path, dropped), delimiter=delimiter, quoting=quoting)
  next_line = 1
  while True:
    try:
      fields = next(reader)
    except StopIteration:
      dropped.report()
      return
    except csv.Error as e:
      raise DataError(f"{path}:{reader.line_num}: {e}") from e
    start, next_line = next_line, reader.line_num + 1
    if fields and last_lines is not None and reader.line_num > start:
      last_lines[start] = reader.line_num
    if fields:
      yield start, fields


def non_empty_rows(path, **kwargs):
  """Returns the `(line, fields)` rows of `path` (see `read_rows`); DataError if there are none."""
  rows = list(read_rows(path, **kwargs))
  if not rows:
    raise DataError(f"{path}: the file is empty")
  return rows
