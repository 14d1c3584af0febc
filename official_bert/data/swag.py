"""SWAG multiple-choice data: reading the CSV and JSON-lines files, packing choices, tf.data input.

An example is a context (`sent1`), the start of the next sentence (`sent2`) and four candidate
endings; the label is the index of the right ending. Each choice is packed as
`[CLS] sent1 [SEP] sent2 ending_i [SEP]` (segment 0 up to the first `[SEP]`, segment 1 after),
and the choices of one example are stacked into `[num_choices, seq_length]` arrays for
`BertMultipleChoice`.

Example:

  tokenizer = tokenization.FullTokenizer("vocab.txt", do_lower_case=True)
  examples = read_swag_examples("swag/train.csv")
  features = convert_examples_to_features(examples, tokenizer, max_seq_length=128)
  dataset = make_dataset(features, batch_size=16, is_training=True)  # (inputs, labels)
"""

import csv
import dataclasses
import json
import os
import re

from absl import logging
import numpy as np

from official_bert import tokenization
from official_bert.common import file_io
from official_bert.data.indexed_batches import indexed_batches

NO_LABEL = -1
# A SWAG row is one line; a quoted field may hold a line break or two, but a field that runs on
# is a stray quote swallowing the rows below it.
MAX_LINES_PER_ROW = 3
_ENDING_COLUMN = re.compile(r"ending(\d+)")


@dataclasses.dataclass(frozen=True)
class SwagExample:
  """One multiple-choice example.

  Attributes:
    example_id: `fold-ind` of the CSV files, `id` of a JSON line, else `<file name>:<line>`.
    context: the first sentence (`sent1`).
    start_ending: the start of the second sentence (`sent2`), shared by all endings.
    endings: the candidate endings (`ending0`, `ending1`, ...).
    label: index of the right ending, or None in unlabelled (test) files.
  """
  example_id: str
  context: str
  start_ending: str
  endings: tuple
  label: int | None


@dataclasses.dataclass(frozen=True)
class MultipleChoiceFeatures:
  """Packed model inputs for a list of examples, all as int32 numpy arrays.

  Attributes:
    input_word_ids: WordPiece ids, `[num_examples, num_choices, seq_length]`, padded with 0.
    input_mask: 1 on real tokens, 0 on padding, same shape.
    input_type_ids: 0 for `[CLS] sent1 [SEP]`, 1 for `sent2 ending [SEP]`, same shape.
    labels: `[num_examples]`, the right choice, or `NO_LABEL` (-1) for unlabelled examples.
    example_ids: the `example_id` of each example, in order.
    num_truncated_choices: how many choices were longer than `seq_length` and got truncated.
  """
  input_word_ids: np.ndarray
  input_mask: np.ndarray
  input_type_ids: np.ndarray
  labels: np.ndarray
  example_ids: tuple
  num_truncated_choices: int

  def __len__(self):
    return len(self.labels)


def _ending_fields(fields, where, what="column", expected=None):
  """Returns the ending field names `ending0..ending{k-1}` present in `fields`, checking order.

  Args:
    fields: the header's column names, or a JSON line's keys.
    where: `path:line`, for messages.
    what: what a field is called in messages (`column`, `key`).
    expected: the number of endings the file's first example has, when known.
  """
  indices = sorted(int(m.group(1)) for m in map(_ENDING_COLUMN.fullmatch, fields) if m)
  count = max(indices[-1] + 1 if indices else 0, expected or 0, 2)
  missing = [f"ending{i}" for i in range(count) if i not in indices]
  if missing:
    found = [f"ending{i}" for i in indices]
    first = f", which the first example has ({expected} endings)" if expected else ""
    raise ValueError(f"{where}: no {what}(s) {', '.join(missing)}{first}: the endings are "
                     f"{what}s ending0, ending1, ... (at least two, numbered from 0 without "
                     f"gaps); found {found}")
  return [f"ending{i}" for i in indices]


def _parse_label(value, num_choices, where):
  """Returns the label as an int, or None for an empty or absent one."""
  if value is None or value == "":
    return None
  label = None
  if isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()):
    label = int(value)
  elif isinstance(value, int) and not isinstance(value, bool):
    label = value
  if label is None or not 0 <= label < num_choices:
    # A label just past the last ending most likely names an ending that the file lacks.
    hint = (f" (the endings are ending0 to ending{num_choices - 1}: is ending{label} missing?)"
            if label == num_choices else "")
    raise ValueError(f"{where}: field 'label' must be an integer in [0, {num_choices}), "
                     f"got {value!r}{hint}")
  return label


def _log_read(path, examples):
  logging.info("Read %d examples (%d labelled) from %s.", len(examples),
               sum(example.label is not None for example in examples), path)


def read_swag_csv(path):
  """Reads a SWAG CSV file (`train.csv`, `val.csv`, `test.csv`).

  The header must name `sent1`, `sent2` and `ending0`, `ending1`, ...; `label` may be missing
  (the test file) or empty, then the examples are unlabelled. Other columns (`video-id`,
  `startphrase`, `gold-source`) are read past.

  Args:
    path: the CSV file.

  Returns:
    A list of `SwagExample`, in file order.

  Raises:
    ValueError: naming the file, line and field, for a missing column, a row with the wrong number
      of fields, or a label that is not a valid choice index.
  """
  with file_io.open_read(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.reader(f)
    header = next(reader, [])
    missing = [name for name in ("sent1", "sent2") if name not in header]
    if missing:
      raise ValueError(f"{path}:1: header lacks the column(s) {missing}; found {header}")
    endings = _ending_fields(header, f"{path}:1")
    examples = []
    next_line = reader.line_num + 1
    for fields in reader:
      # Errors name the line where the row begins; `line_num` is the line where it ends.
      first_line, next_line = next_line, reader.line_num + 1
      where, row_lines = f"{path}:{first_line}", reader.line_num - first_line + 1
      if not fields:
        continue
      if row_lines > MAX_LINES_PER_ROW:
        raise ValueError(
            f"{where}: a quoted field begins on this line and runs over {row_lines} lines, to "
            f"line {reader.line_num}: a stray '\"'? A SWAG row is one line; close the quote, or "
            "double a quote inside a quoted field (\"\").")
      if len(fields) > len(header):
        raise ValueError(f"{where}: the row has more fields than the {len(header)} of the header")
      if len(fields) < len(header):
        raise ValueError(f"{where}: the row ends before the field(s) {header[len(fields):]}")
      row = dict(zip(header, fields))
      example_id = row.get("fold-ind") or f"{os.path.basename(path)}:{first_line}"
      examples.append(SwagExample(
          example_id=example_id, context=row["sent1"], start_ending=row["sent2"],
          endings=tuple(row[name] for name in endings),
          label=_parse_label(row.get("label"), len(endings), where)))
  _log_read(path, examples)
  return examples


def read_swag_jsonl(path):
  """Reads SWAG examples from a JSON-lines file.

  Each line is an object with `sent1`, `sent2`, `ending0`, `ending1`, ... and an optional integer
  `label` (absent or null: unlabelled); blank lines are allowed.

  Args:
    path: the JSON-lines file.

  Returns:
    A list of `SwagExample`, in file order.

  Raises:
    ValueError: naming the file, line and field, for invalid JSON, a missing or non-string text
      field, or a label that is not a valid choice index.
  """
  examples = []
  with file_io.open_read(path, encoding="utf-8-sig") as f:
    for line_number, line in enumerate(f, start=1):
      where = f"{path}:{line_number}"
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from e
      if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
      expected = len(examples[0].endings) if examples else None
      endings = _ending_fields(record, where, "key", expected)
      if expected is not None and len(endings) != expected:
        raise ValueError(f"{where}: {len(endings)} endings, but the first example has "
                         f"{expected}")
      for name in ["sent1", "sent2"] + endings:
        if not isinstance(record.get(name), str):
          raise ValueError(f"{where}: field {name!r} must be a string, got {record.get(name)!r}")
      examples.append(SwagExample(
          example_id=str(record.get("id", f"{os.path.basename(path)}:{line_number}")),
          context=record["sent1"], start_ending=record["sent2"],
          endings=tuple(record[name] for name in endings),
          label=_parse_label(record.get("label"), len(endings), where)))
  _log_read(path, examples)
  return examples


def read_swag_examples(path):
  """Reads a SWAG file, choosing the reader by extension: `.csv`, or `.jsonl`/`.json` (JSON lines).

  Args:
    path: the file.

  Returns:
    A list of `SwagExample`.

  Example:

    examples = read_swag_examples("swag/val.csv")  # [SwagExample(example_id="0", ...), ...]
  """
  extension = os.path.splitext(path)[1].lower()
  if extension == ".csv":
    return read_swag_csv(path)
  if extension in (".jsonl", ".json"):
    return read_swag_jsonl(path)
  raise ValueError(f"{path}: unknown SWAG file type {extension!r}; expected .csv or .jsonl")


def convert_examples_to_features(examples, tokenizer, max_seq_length):
  """Tokenizes and packs every choice of every example.

  Choices longer than `max_seq_length` are cut with `tokenization.truncate_seq_pair` (one token at a
  time from the end of the longer of context and `sent2 + ending`); they are counted in
  `num_truncated_choices` and logged.

  Args:
    examples: `SwagExample`s, all with the same number of endings.
    tokenizer: a `tokenization.FullTokenizer` (anything with `tokenize` and
      `convert_tokens_to_ids`).
    max_seq_length: length of each packed choice, at least 4.

  Returns:
    `MultipleChoiceFeatures`.

  Example:

    features = convert_examples_to_features(examples, tokenizer, max_seq_length=128)
    features.input_word_ids.shape  # (len(examples), 4, 128)
  """
  if max_seq_length < 4:
    raise ValueError(f"max_seq_length must be at least 4, got {max_seq_length}")
  examples = list(examples)
  num_choices = len(examples[0].endings) if examples else 4
  shape = (len(examples), num_choices, max_seq_length)
  word_ids, mask, type_ids = (np.zeros(shape, np.int32) for _ in range(3))
  labels = np.full([len(examples)], NO_LABEL, np.int32)
  num_truncated = 0
  for i, example in enumerate(examples):
    if len(example.endings) != num_choices:
      raise ValueError(f"example {example.example_id!r} has {len(example.endings)} endings, "
                       f"the first example {num_choices}")
    context = tokenizer.tokenize(example.context)
    start_ending = tokenizer.tokenize(example.start_ending)
    for j, ending in enumerate(example.endings):
      tokens_a = list(context)
      tokens_b = start_ending + tokenizer.tokenize(ending)
      if len(tokens_a) + len(tokens_b) > max_seq_length - 3:
        num_truncated += 1
        tokenization.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
      tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
      word_ids[i, j, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
      mask[i, j, :len(tokens)] = 1
      type_ids[i, j, len(tokens_a) + 2:len(tokens)] = 1
    if example.label is not None:
      labels[i] = example.label
  logging.info("Packed %d examples x %d choices into sequences of %d; %d choices truncated.",
               len(examples), num_choices, max_seq_length, num_truncated)
  return MultipleChoiceFeatures(
      input_word_ids=word_ids, input_mask=mask, input_type_ids=type_ids, labels=labels,
      example_ids=tuple(example.example_id for example in examples),
      num_truncated_choices=num_truncated)


def make_dataset(features, batch_size, is_training=False, seed=None, drop_remainder=None):
  """Builds the `tf.data` input for `BertMultipleChoice` from packed features.

  Args:
    features: `MultipleChoiceFeatures`.
    batch_size: examples per batch.
    is_training: if True, shuffles (anew each pass) and repeats forever; otherwise one pass in
      file order.
    seed: shuffle seed, for reproducible training order.
    drop_remainder: drop a last, smaller batch; defaults to `is_training`.

  Returns:
    A `tf.data.Dataset` of `(inputs, labels)`: `inputs` a dict of int32
    `[batch, num_choices, seq_length]` tensors `input_word_ids`, `input_mask`, `input_type_ids`;
    `labels` int32 `[batch]` (-1 for unlabelled examples).

  Example:

    dataset = make_dataset(features, batch_size=16, is_training=True, seed=0)
    inputs, labels = next(iter(dataset))  # inputs["input_word_ids"]: [16, 4, seq_length]
  """
  inputs = {name: getattr(features, name)
            for name in ("input_word_ids", "input_mask", "input_type_ids")}
  return indexed_batches((inputs, features.labels), len(features), batch_size, is_training, seed,
                         drop_remainder)
