"""The user's own classification data: CSV, TSV or JSON-lines files with named or numbered columns.

A data folder holds `train`, `dev` and `test` files, each `<split>.csv`, `<split>.tsv` or
`<split>.jsonl` (also `.json` for JSON lines). CSV files follow the usual quoting rules (a quoted
field may hold commas and line breaks); TSV files are read as GLUE's are, unquoted, so a `"` is
text.
Each JSON line is an object whose keys are the column names.

Labels are the distinct values of the training file's label column, sorted (numerically when every
label is an integer, so `2` comes before `10`): label ids therefore do not depend on row order. A
dev or test label that training never showed is an error. For regression the label column holds
numbers. The test file may leave the label out; its examples then have `label=None`.
"""

import csv
import json
import math
import os

from absl import logging

from official_bert.common import file_io
from official_bert.data import classifier_data
from official_bert.tokenization import utf8

_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
_SPLITS = ("train", "dev", "test")


def _label_order(label):
  """Sorts integer labels by value, before any other label, which sort as strings."""
  try:
    return (0, int(label), "")
  except ValueError:
    return (1, 0, label)


class CustomProcessor(classifier_data.DataProcessor):
  r"""Reads sentence or sentence-pair classification (or regression) data from the user's files.

  Args:
    data_dir: folder holding `train.*`, `dev.*` and `test.*` (see the module docstring).
    text_a_column: the column of the (first) sentence: a header name, a JSON key, or for a file
      without header a 0-based position (an int or a string of digits).
    label_column: the column of the label, named or numbered the same way.
    text_b_column: the column of the second sentence, or `None` for single sentences.
    is_regression: labels are numbers to regress on rather than classes.
    has_header: whether CSV and TSV files start with a header row (JSON lines always name keys).
    files: optional split -> path mapping, for files not named `<split>.<ext>` in `data_dir`.
    skip_malformed_rows: when False (the default), a malformed row raises `DataError` naming file,
      line and column; when True it is skipped, counted in `skipped_rows` and logged.

  Example:

  >>> import os
  >>> os.makedirs("my_data")
  >>> with open("my_data/train.csv", "w") as f:
  ...   _ = f.write('review,stars\n"Great, would buy again",5\nBroke in a week,1\nFine,3\n')
  >>> processor = CustomProcessor("my_data", text_a_column="review", label_column="stars")
  >>> processor.get_labels()
  ['1', '3', '5']
  >>> processor.get_train_examples()[0]
  InputExample(guid='train-0', text_a='Great, would buy again', text_b=None, label='5')
  """

  def __init__(self, data_dir, text_a_column, label_column, text_b_column=None,
               is_regression=False, has_header=True, files=None, skip_malformed_rows=False):
    self.data_dir = data_dir
    self.text_columns = {"text_a": text_a_column, "text_b": text_b_column}
    self.label_column = label_column
    self.is_regression = is_regression
    self.has_header = has_header
    self.files = dict(files or {})
    self.skip_malformed_rows = skip_malformed_rows
    self.skipped_rows = {}
    self.dropped_bytes = {}
    self._train_examples = None
    self._labels = None

  @property
  def splits(self):
    return _SPLITS

  def split_file(self, split):
    """Returns the path of the file that holds `split`."""
    self._check_split(split)
    if split in self.files:
      path = self.files[split]
      if not file_io.is_file(path):
        raise FileNotFoundError(f"{split} file {path} does not exist")
      return path
    found = [os.path.join(self.data_dir, split + ext) for ext in _FORMATS
             if file_io.is_file(os.path.join(self.data_dir, split + ext))]
    if not found:
      raise FileNotFoundError(f"no {split} file in {self.data_dir}: expected one of "
                              f"{[split + ext for ext in _FORMATS]}")
    if len(found) > 1:
      raise ValueError(f"more than one {split} file in {self.data_dir}: {found}; keep one")
    return found[0]

  def get_labels(self):
    if self.is_regression:
      return []
    if self._labels is None:
      labels = {example.label for example in self.get_train_examples()}
      self._check_not_scores(labels)
      self._labels = sorted(labels, key=_label_order)
    return list(self._labels)

  def _check_not_scores(self, labels):
    """Refuses labels that are all numbers, some with a fraction: scores to regress on, which as
    classes would give each distinct value a class of its own."""
    try:
      values = [float(label) for label in labels]
    except ValueError:
      return
    if all(math.isfinite(value) for value in values) and any(not value.is_integer()
                                                             for value in values):
      examples = ", ".join(sorted(labels, key=float)[:3])
      raise classifier_data.DataError(
          f"{self.split_file('train')}: the label column {self.label_column!r} holds numbers "
          f"({examples}, ...: {len(labels)} distinct values), not classes: for a score, pass "
          "--is_regression (is_regression=True); for classes, name them.")

  def get_examples(self, split):
    if split == "train" and self._train_examples is not None:
      return list(self._train_examples)
    path = self.split_file(split)
    known_labels = None
    if split != "train" and not self.is_regression:
      known_labels = set(self.get_labels())
    issues = classifier_data.RowIssues(path, skip=self.skip_malformed_rows)
    dropped = utf8.DroppedBytes(path)
    extension = os.path.splitext(path)[1].lower()
    if extension not in _FORMATS:
      raise ValueError(f"{path}: unknown format; name the file .csv, .tsv, .jsonl or .json")
    if _FORMATS[extension] == "jsonl":
      records = self._json_records(path, split, issues, dropped)
    else:
      records = self._delimited_records(path, split, _FORMATS[extension], issues, dropped)
    examples = []
    for number, (line, texts, label) in enumerate(records):
      if label is not None:
        label = self._parse_label(label, line, known_labels, issues)
        if label is None:
          continue
      examples.append(classifier_data.InputExample(f"{split}-{number}", texts[0], texts[1], label))
    self.skipped_rows[path] = issues.finish()
    self.dropped_bytes[path] = dropped.num_bytes
    if not examples:
      raise classifier_data.DataError(f"{path}: no usable rows")
    if split == "train":
      self._train_examples = examples
    return list(examples)

  def _delimited_records(self, path, split, file_format, issues, dropped):
    """Yields `(line, [text_a, text_b], raw label or None)` for the rows of a CSV or TSV file."""
    last_lines = {}
    if file_format == "csv":
      rows = classifier_data.non_empty_rows(path, delimiter=",", quoting=csv.QUOTE_MINIMAL,
                                            dropped=dropped, last_lines=last_lines)
    else:
      rows = classifier_data.non_empty_rows(path, delimiter="\t", quoting=csv.QUOTE_NONE,
                                            dropped=dropped)
    if self.has_header:
      header = rows.pop(0)[1]
      if not rows:
        raise classifier_data.DataError(f"{path}: the file has a header but no rows")
      width = len(header)
      positions = {key: self._header_position(path, header, column)
                   for key, column in self._columns(split, header).items()}
      names = {key: f"column '{header[index]}'" for key, index in positions.items()}
    else:
      width = len(rows[0][1])
      positions = {key: self._number(path, column)
                   for key, column in self._columns(split, None, width).items()}
      names = {key: f"column {index + 1}" for key, index in positions.items()}
      too_far = [f"{key} at position {index}" for key, index in positions.items() if index >= width]
      if too_far:
        raise classifier_data.DataError(
            f"{path}:{rows[0][0]}: the row has {width} fields, so there is no {', '.join(too_far)}")
    if last_lines:
      # Line breaks in quoted fields are valid CSV, but also what a stray quote makes of the rows
      # below it: say so, so that rows merged into one are not lost without a word.
      first = min(last_lines)
      logging.warning("%s: %d row(s) run over several lines (a quoted field with line breaks), "
                      "the first from line %d to %d; if that is not meant, look for a stray '\"'.",
                      path, len(last_lines), first, last_lines[first])
    for line, fields in rows:
      if len(fields) != width:
        like = "the header" if self.has_header else "the first row"
        message = f"expected {width} fields like {like}, found {len(fields)}"
        spanned = last_lines.get(line, line) - line + 1
        if spanned > 1:
          # Most likely a stray quote: the lines it swallowed were rows, and are lost with it.
          message += (f"; a quoted field begins on this line and runs to line {line + spanned - 1}"
                      f" (a stray '\"'?), so the {spanned} lines count as skipped rows")
        issues.report(line, message, rows=spanned)
        continue
      texts = self._texts({key: fields[index] for key, index in positions.items()}, names, line,
                          issues)
      if texts is not None:
        yield line, texts, fields[positions["label"]] if "label" in positions else None

  def _json_records(self, path, split, issues, dropped):
    """Yields `(line, [text_a, text_b], raw label or None)` for the lines of a JSON-lines file."""
    labeled = None
    empty = True
    names = {key: f"key '{column}'" for key, column in self.text_columns.items()}
    for line, text in enumerate(classifier_data.text_lines(path, dropped), start=1):
      if not text.strip():
        continue
      empty = False
      try:
        record = json.loads(text)
      except json.JSONDecodeError as e:
        issues.report(line, f"not valid JSON ({e.msg} at column {e.colno})")
        continue
      if not isinstance(record, dict):
        issues.report(line, f"expected a JSON object, got {type(record).__name__}")
        continue
      if labeled is None:
        labeled = split != "test" or self.label_column in record
      keys = [column for column in self.text_columns.values() if column is not None]
      missing = [key for key in keys + ([self.label_column] if labeled else [])
                 if key not in record]
      if missing:
        issues.report(line, f"missing key(s) {missing}")
        continue
      values = {key: record[column] for key, column in self.text_columns.items()
                if column is not None}
      not_text = [self.text_columns[key] for key, value in values.items()
                  if not isinstance(value, str)]
      if not_text:
        issues.report(line, f"key(s) {not_text} must hold strings")
        continue
      label = record[self.label_column] if labeled else None
      if labeled and (label is None or isinstance(label, (list, dict))):
        issues.report(line, f"key '{self.label_column}' must hold a string or a number, got "
                      f"{json.dumps(label)}")
        continue
      texts = self._texts(values, names, line, issues)
      if texts is not None:
        # Numbers and booleans become labels as JSON writes them: 1, 0.5, true.
        yield line, texts, label if label is None or isinstance(label, str) else json.dumps(label)
    dropped.report()
    if empty:
      raise classifier_data.DataError(f"{path}: the file is empty")

  def _columns(self, split, header, width=None):
    """The columns to read from a delimited file: text columns, and the label where present."""
    columns = {key: column for key, column in self.text_columns.items() if column is not None}
    label_present = (self.label_column in header if header is not None
                     else self._number(None, self.label_column) < width)
    if split != "test" or label_present:
      columns["label"] = self.label_column
    return columns

  def _texts(self, values, names, line, issues):
    """Returns `[text_a, text_b or None]`, or reports an empty text and returns None."""
    for key, value in values.items():
      if key != "label" and not value.strip():
        issues.report(line, f"{names[key]} is empty")
        return None
    return [values["text_a"], values.get("text_b")]

  def _parse_label(self, value, line, known_labels, issues):
    """Returns the label (a float for regression) or reports the row and returns None."""
    column = f"label column {self.label_column!r}"
    value = value.strip()
    if self.is_regression:
      return classifier_data.parse_score(value, line, column, issues)
    if not value:
      issues.report(line, f"{column} is empty")
      return None
    if known_labels is not None and value not in known_labels:
      issues.report(line, f"{column} is {value!r}, a label the training file does not have "
                    f"(training labels: {sorted(known_labels, key=_label_order)})")
      return None
    return value

  @staticmethod
  def _header_position(path, header, column):
    if column not in header:
      raise classifier_data.DataError(f"{path}:1: no column {column!r} in the header {header}")
    return header.index(column)

  @staticmethod
  def _number(path, column):
    """A column position of a header-less file: an int, or a string of digits (from a flag)."""
    if isinstance(column, int) or (isinstance(column, str) and column.isdigit()):
      return int(column)
    where = f"{path}: " if path else ""
    raise ValueError(f"{where}the file has no header, so columns are 0-based positions; got "
                     f"{column!r} (set has_header=True if the first row names the columns)")
