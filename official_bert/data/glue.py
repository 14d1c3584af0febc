"""The GLUE tasks, read from the TSV files of `download_glue_data.py` and the GLUE site.

Each task is described by a `GlueTask`: which header columns hold the texts, the label and the
example id, and which file holds each split. Columns are found by their header names, so the same
reader serves MNLI's 12-column train file, its 16-column dev files and its 10-column test files.
CoLA's train and dev files have no header (`source label _ sentence`) and are read by position.

Labels are the strings of the files, in the order of the original BERT processors: `0, 1` for CoLA,
SST-2, MRPC, QQP and WNLI; `contradiction, entailment, neutral` for MNLI (and AX, which is predicted
with an MNLI model); `entailment, not_entailment` for QNLI and RTE; STS-B is regression on the
0-5 similarity score. Test files carry no labels: their examples have `label=None`.

XNLI, as the original's `XnliProcessor` reads it from the XNLI 1.0 and XNLI-MT 1.0 archives
unpacked into one folder: train from the machine-translated MultiNLI
`multinli/multinli.train.<language>.tsv` (`premise hypo label`, where `contradictory` means
`contradiction`), dev from `xnli.dev.tsv` (all 15 languages; the rows whose `language` column is
the chosen one, `zh` by default as in the original).
"""

import dataclasses
import os

from absl import logging

from official_bert.common import file_io
from official_bert.data import classifier_data
from official_bert.tokenization import utf8

_BINARY = ("0", "1")
_NLI = ("contradiction", "entailment", "neutral")
_QNLI_RTE = ("entailment", "not_entailment")
_STANDARD_FILES = {"train": ("train.tsv",), "dev": ("dev.tsv",), "test": ("test.tsv",)}
_XNLI_FILES = {"train": ("multinli/multinli.train.{language}.tsv",), "dev": ("xnli.dev.tsv",)}
_MNLI_FILES = {
    "train": ("train.tsv",),
    "dev": ("dev_matched.tsv",),
    "test": ("test_matched.tsv",),
    "dev_matched": ("dev_matched.tsv",),
    "dev_mismatched": ("dev_mismatched.tsv",),
    "test_matched": ("test_matched.tsv",),
    "test_mismatched": ("test_mismatched.tsv",),
}


@dataclasses.dataclass(frozen=True)
class GlueTask:
  """The layout of one GLUE task's files.

  Args:
    name: the task's name on the GLUE site.
    labels: label strings in label-id order; empty for a regression task.
    text_a: header name of the first sentence's column.
    text_b: header name of the second sentence's column, or `None` for single sentences.
    label: header name of the label (or score) column; test files lack it.
    files: split name -> candidate file names, the first that exists is read.
    id_column: header name of the example id, kept in the guid because a GLUE submission lists
      test predictions by it; rows of files without it are numbered from 0.
    headerless: split -> `(number of fields, text_a position, label position)`, for files
      without a header.
    skip_malformed_by_default: whether malformed rows are skipped (and counted) unless the caller
      says otherwise; the official QQP train file has a few rows with missing fields.
    split_columns: split -> `(text_a, text_b, label)` header names, for files whose header
      differs from the other splits'.
    language_column: header name of a language column; only the rows of the processor's language
      are read (the other languages' rows are counted and logged). File names may then hold
      `{language}`.
    label_aliases: label strings of the files -> the label they mean.
  """
  name: str
  labels: tuple
  text_a: str
  text_b: str | None
  label: str
  files: dict = dataclasses.field(default_factory=lambda: dict(_STANDARD_FILES))
  id_column: str = "index"
  headerless: dict = dataclasses.field(default_factory=dict)
  skip_malformed_by_default: bool = False
  split_columns: dict = dataclasses.field(default_factory=dict)
  language_column: str | None = None
  label_aliases: dict = dataclasses.field(default_factory=dict)

  @property
  def is_regression(self):
    return not self.labels

  def columns(self, split):
    """`(text_a, text_b, label)` header names of `split`."""
    return self.split_columns.get(split, (self.text_a, self.text_b, self.label))


GLUE_TASKS = {
    "cola": GlueTask("CoLA", _BINARY, "sentence", None, "label",
                     headerless={"train": (4, 3, 1), "dev": (4, 3, 1)}),
    "sst2": GlueTask("SST-2", _BINARY, "sentence", None, "label"),
    "mrpc": GlueTask("MRPC", _BINARY, "#1 String", "#2 String", "Quality"),
    "stsb": GlueTask("STS-B", (), "sentence1", "sentence2", "score"),
    "qqp": GlueTask("QQP", _BINARY, "question1", "question2", "is_duplicate", id_column="id",
                    skip_malformed_by_default=True),
    "mnli": GlueTask("MNLI", _NLI, "sentence1", "sentence2", "gold_label", files=_MNLI_FILES),
    "qnli": GlueTask("QNLI", _QNLI_RTE, "question", "sentence", "label"),
    "rte": GlueTask("RTE", _QNLI_RTE, "sentence1", "sentence2", "label"),
    "wnli": GlueTask("WNLI", _BINARY, "sentence1", "sentence2", "label"),
    "ax": GlueTask("AX", _NLI, "sentence1", "sentence2", "label",
                   files={"test": ("diagnostic.tsv", "AX.tsv")}),
    "xnli": GlueTask("XNLI", _NLI, "sentence1", "sentence2", "gold_label", files=_XNLI_FILES,
                     id_column="pairID", split_columns={"train": ("premise", "hypo", "label")},
                     language_column="language",
                     label_aliases={"contradictory": "contradiction"}),
}
# The language the original's XnliProcessor reads.
DEFAULT_XNLI_LANGUAGE = "zh"
_ALIASES = {"diagnostic": "ax"}


def glue_task(task_name):
  """Returns the `GlueTask` for a name such as `MRPC`, `sts-b` or `SST2` (case and `-` ignored)."""
  key = task_name.lower().replace("-", "").replace("_", "")
  key = _ALIASES.get(key, key)
  if key not in GLUE_TASKS:
    names = ", ".join(task.name for task in GLUE_TASKS.values())
    raise ValueError(f"Unknown GLUE task {task_name!r}; choose one of {names} (or 'custom' for "
                     "your own files)")
  return GLUE_TASKS[key]


class GlueProcessor(classifier_data.DataProcessor):
  r"""Reads one GLUE task from its folder of TSV files.

  Args:
    task_name: the task, e.g. `MRPC`, `MNLI`, `STS-B`, `AX`, `XNLI` (see `glue_task`).
    data_dir: the task's folder, e.g. `glue_data/MRPC`.
    language: for XNLI, the language to train and evaluate on (`zh` by default, as in the
      original); an error for the other tasks.
    skip_malformed_rows: when False, a malformed row (wrong number of fields, empty text, unknown
      label, unparseable score) raises `DataError` naming file, line and column; when True such
      rows are skipped, counted in `skipped_rows` and logged. `None` uses the task's default (skip
      for QQP only).

  Attributes:
    task: the `GlueTask`.
    skipped_rows: file path -> number of rows skipped in it, for the files read so far.
    other_language_rows: file path -> number of rows of other languages passed over (XNLI).
    dropped_bytes: file path -> number of bytes that are not UTF-8, dropped as in the original.

  Example:

  >>> import os
  >>> os.makedirs("glue_data/SST-2")
  >>> with open("glue_data/SST-2/dev.tsv", "w") as f:
  ...   _ = f.write("sentence\tlabel\nit 's a charming and often affecting journey . \t1\n")
  >>> processor = GlueProcessor("SST-2", "glue_data/SST-2")
  >>> processor.get_dev_examples()[0]
  InputExample(guid='dev-0', text_a="it 's a charming and often affecting journey . ", text_b=None,
  label='1')
  """

  def __init__(self, task_name, data_dir, skip_malformed_rows=None, language=None):
    self.task = glue_task(task_name)
    if language is not None and not self.task.language_column:
      raise ValueError(f"A language applies to XNLI only, not to GLUE {self.task.name}.")
    self.language = language or (DEFAULT_XNLI_LANGUAGE if self.task.language_column else None)
    self.data_dir = data_dir
    self.is_regression = self.task.is_regression
    self.skip_malformed_rows = (self.task.skip_malformed_by_default
                                if skip_malformed_rows is None else skip_malformed_rows)
    self.skipped_rows = {}
    self.dropped_bytes = {}
    self.other_language_rows = {}

  @property
  def splits(self):
    return tuple(self.task.files)

  def get_labels(self):
    return list(self.task.labels)

  def split_file(self, split):
    """Returns the path of the file that holds `split`."""
    self._check_split(split)
    candidates = [name.format(language=self.language) for name in self.task.files[split]]
    for name in candidates:
      path = os.path.join(self.data_dir, name)
      if file_io.is_file(path):
        return path
    raise FileNotFoundError(f"GLUE {self.task.name} split {split!r}: none of {list(candidates)} "
                            f"is in {self.data_dir} (download_glue_data.py writes them)")

  def get_examples(self, split):
    path = self.split_file(split)
    dropped = utf8.DroppedBytes(path)
    rows = classifier_data.non_empty_rows(path, dropped=dropped)
    self.dropped_bytes[path] = dropped.num_bytes
    issues = classifier_data.RowIssues(path, skip=self.skip_malformed_rows)
    if split in self.task.headerless:
      width, text_a, label = self.task.headerless[split]
      columns = {"text_a": text_a, "label": label}
      names = {text_a: f"column {text_a + 1}", label: f"column {label + 1}"}
    else:
      header = rows.pop(0)[1]
      if not rows:
        raise classifier_data.DataError(f"{path}: the file has a header but no rows")
      columns = self._find_columns(path, split, header)
      names = {index: f"column '{header[index]}'" for index in columns.values()}
      width = len(header)
    examples = []
    other_languages = 0
    for number, (line, fields) in enumerate(rows):
      if len(fields) != width:
        issues.report(line, f"expected {width} tab-separated fields, found {len(fields)}")
        continue
      if "language" in columns and fields[columns["language"]] != self.language:
        other_languages += 1
        continue
      example = self._example(split, number, line, fields, columns, names, issues)
      if example is not None:
        examples.append(example)
    self.skipped_rows[path] = issues.finish()
    if "language" in columns:
      self.other_language_rows[path] = other_languages
      logging.info("%s: read the %d rows of language %r, passed over %d of other languages.",
                   path, len(examples), self.language, other_languages)
      if not examples and not self.skipped_rows[path]:
        raise classifier_data.DataError(f"{path}: no row has language {self.language!r} in "
                                        f"column '{self.task.language_column}'")
    return examples

  def _find_columns(self, path, split, header):
    """Maps `text_a`, `text_b`, `label`, `id` and `language` to their positions in `header`."""
    task = self.task
    text_a, text_b, label = task.columns(split)
    wanted = {"text_a": text_a, "text_b": text_b, "label": label, "id": task.id_column,
              "language": task.language_column}
    # A file of all languages must say which row is which; a per-language file need not.
    per_language = all("{language}" in name for name in task.files[split])
    required = (["text_a", "text_b"] + ([] if split.startswith("test") else ["label"])
                + ([] if per_language else ["language"]))
    missing = [wanted[key] for key in required if wanted[key] and wanted[key] not in header]
    if missing:
      raise classifier_data.DataError(
          f"{path}:1: the header lacks column(s) {missing} of GLUE {task.name}; found {header}")
    return {key: header.index(name) for key, name in wanted.items() if name and name in header}

  def _example(self, split, number, line, fields, columns, names, issues):
    """Builds the example of one row, or reports the row to `issues` and returns None."""
    texts = []
    for key in ("text_a", "text_b"):
      if key not in columns:
        texts.append(None)
        continue
      text = fields[columns[key]]
      if not text.strip():
        issues.report(line, f"{names[columns[key]]} is empty")
        return None
      texts.append(text)
    label = None
    if "label" in columns:
      label = self._parse_label(fields[columns["label"]], line, names[columns["label"]], issues)
      if label is None:
        return None
    example_id = fields[columns["id"]] if "id" in columns else str(number)
    return classifier_data.InputExample(f"{split}-{example_id}", texts[0], texts[1], label)

  def _parse_label(self, value, line, column, issues):
    """Returns the label of a row, or reports it and returns None."""
    if self.is_regression:
      return classifier_data.parse_score(value, line, column, issues)
    value = self.task.label_aliases.get(value, value)
    if value not in self.task.labels:
      issues.report(line, f"{column} is {value!r}, not one of the {self.task.name} labels "
                    f"{list(self.task.labels)}")
      return None
    return value
