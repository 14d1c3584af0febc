"""The examples a calibrated int8 export measures its activation ranges on.

Static int8 (`--format=openvino --precision=int8`) fixes each quantized activation's scale ahead
of time, from the model's outputs on real inputs; inputs unlike the traffic cost accuracy. The
examples come from a file the user names (`--calibration_file`), or, in a fine-tuning script,
from the task's own dev split. A file is read in one of two forms:

* a TFRecord file (its name ends in `.tf_record`, `.tfrecord` or `.tfrecords`) of the original
  BERT's features `input_ids`, `input_mask` and `segment_ids`, as a fine-tuning run writes them to
  `eval.tf_record` in its output folder: every kind of model;
* any other file is text, one example a line: the text, or the two texts of a pair separated by
  a tab (blank lines are passed over), tokenized with the model folder's vocabulary (the
  classifier, the token classifier and the encoder; a span labeler or a multiple-choice model
  needs the records).

The first `CALIBRATION_SIZE` examples are used, one at a time (`[1, seq]` each).

Example:

>>> import tensorflow as tf
>>> with tf.io.gfile.GFile("calibration.txt", "w") as f:
...   _ = f.write("one sentence\\nfirst text\\tsecond text\\n")
>>> with tf.io.gfile.GFile("vocab.txt", "w") as f:
...   _ = f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "one", "sentence", "text"]))
>>> examples = read_file("calibration.txt", "classifier", vocab_file="vocab.txt",
...                      do_lower_case=True, max_seq_length=8)
>>> [example["input_word_ids"].tolist() for example in examples]
[[[2, 4, 5, 3, 0, 0, 0, 0]], [[2, 1, 6, 3, 1, 6, 3, 0]]]
"""

import os

import numpy as np
import tensorflow as tf

from official_bert.common.errors import UserError
from official_bert.models import BertMultipleChoice, BertSpanLabeler

# NNCF's default number of calibration samples: its ranges settle well before.
CALIBRATION_SIZE = 300
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# The original BERT's names of the same features in a TFRecord file.
_RECORD_NAMES = {"input_word_ids": "input_ids", "input_mask": "input_mask",
                 "input_type_ids": "segment_ids"}
RECORD_SUFFIXES = (".tf_record", ".tfrecord", ".tfrecords")


class CalibrationError(UserError):
  """The calibration examples are missing, empty or unreadable."""


def is_records(path):
  """Whether `path` is read as a TFRecord file of features (by its name)."""
  return os.fspath(path).endswith(RECORD_SUFFIXES)


def check_file(path, kind):
  """Refuses, before any work, a calibration file that is missing, empty or of the wrong form.

  Args:
    path: the `--calibration_file`.
    kind: the model's kind (text lines serve the kinds with a raw-text signature).

  Raises:
    CalibrationError: one line naming the file.
  """
  path = os.fspath(path)
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    raise CalibrationError(f"--calibration_file {path} does not exist (or is a folder).")
  if tf.io.gfile.stat(path).length == 0:
    raise CalibrationError(f"--calibration_file {path} is empty: it holds no examples.")
  if not is_records(path) and kind in (BertSpanLabeler.kind, BertMultipleChoice.kind):
    raise CalibrationError(f"--calibration_file {path}: a {kind} model is calibrated on a "
                           f"TFRecord file of features (ending in {RECORD_SUFFIXES[0]}, as the "
                           "fine-tuning run writes eval.tf_record), not on text lines.")


def read_file(path, kind, *, vocab_file=None, do_lower_case=None, max_seq_length=128,
              num_choices=None, limit=CALIBRATION_SIZE):
  """The calibration examples of a file (see the module docstring).

  Args:
    path: the TFRecord or text file.
    kind: the model's kind.
    vocab_file, do_lower_case: the tokenizer of text lines.
    max_seq_length: the length text lines are packed to.
    num_choices: the choices of a multiple-choice model (its records hold them one after
      another).
    limit: the most examples read.

  Returns:
    A list of dicts of int32 arrays `[1, seq]` (`[1, choices, seq]` for multiple choice) under
    `INPUT_NAMES`.

  Raises:
    CalibrationError: the file is missing or empty, or a line or record cannot be read.
  """
  check_file(path, kind)
  path = os.fspath(path)
  examples = (_records(path, num_choices, limit) if is_records(path)
              else _lines(path, vocab_file, do_lower_case, max_seq_length, limit))
  if not examples:
    raise CalibrationError(f"--calibration_file {path} holds no examples.")
  return examples


def _records(path, num_choices, limit):
  spec = {name: tf.io.VarLenFeature(tf.int64) for name in _RECORD_NAMES.values()}
  examples = []
  try:
    for number, record in enumerate(tf.data.TFRecordDataset(path).take(limit), start=1):
      try:
        parsed = tf.io.parse_single_example(record, spec)
      except tf.errors.InvalidArgumentError:
        raise CalibrationError(f"--calibration_file {path} record {number} is not a tf.Example "
                               "of input_ids, input_mask and segment_ids.") from None
      example = {}
      for name, record_name in _RECORD_NAMES.items():
        values = tf.sparse.to_dense(parsed[record_name]).numpy().astype(np.int32)
        if not values.size:
          raise CalibrationError(f"--calibration_file {path} record {number} has no "
                                 f"{record_name} (a feature the original BERT's records hold).")
        shape = [1, num_choices, -1] if num_choices else [1, -1]
        example[name] = values.reshape(shape)
      examples.append(example)
  except tf.errors.DataLossError:
    raise CalibrationError(f"--calibration_file {path} is not a TFRecord file (or is damaged); "
                           "a text file of examples needs another name ending.") from None
  return examples


def _lines(path, vocab_file, do_lower_case, max_seq_length, limit):
  if vocab_file is None or do_lower_case is None:
    raise CalibrationError(f"--calibration_file {path} holds text, and the model folder names no "
                           "vocabulary or case: give --do_lower_case, or a TFRecord file of "
                           "features.")
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    lines = data.decode("utf-8").split("\n")
  except UnicodeDecodeError as error:
    line = data[:error.start].count(b"\n") + 1
    raise CalibrationError(f"--calibration_file {path} line {line} is not UTF-8 text.") from None
  segments = []
  for number, line in enumerate(lines, start=1):
    if len(segments) == limit:
      break
    if not line.strip():
      continue  # blank lines separate examples (as between a corpus' documents); they hold none
    fields = line.rstrip("\r").split("\t")
    if len(fields) > 2:
      raise CalibrationError(f"--calibration_file {path} line {number}: expected a text, or two "
                             f"texts separated by a tab, got {len(fields)} fields.")
    segments.append(fields)
  # Imported here: the tokenizer layers load tensorflow_text.
  from official_bert.export.signatures import TextPacker  # pylint: disable=import-outside-toplevel

  packer = TextPacker(os.fspath(vocab_file), do_lower_case, max_seq_length, ())
  # One call of the packer for the single texts and one for the pairs, not one a line: each
  # row is packed on its own to `max_seq_length`, so a batch gives the rows that lines would.
  examples = [None] * len(segments)
  for width in (1, 2):
    rows = [row for row, fields in enumerate(segments) if len(fields) == width]
    if not rows:
      continue
    inputs = packer(*[tf.constant([segments[row][i] for row in rows]) for i in range(width)])
    packed = {name: inputs[name].numpy().astype(np.int32) for name in INPUT_NAMES}
    for position, row in enumerate(rows):
      examples[row] = {name: ids[position:position + 1] for name, ids in packed.items()}
  return examples


def from_dataset(dataset, limit=CALIBRATION_SIZE):
  """Calibration examples from a task's input dataset: batches of `(features, labels)` or of
  features, as `Task.build_inputs` gives them; padding rows (`is_real_example` 0) are left out.

  Args:
    dataset: a `tf.data.Dataset`.
    limit: the most examples taken.
  """
  examples = []
  for batch in dataset:
    features = batch[0] if isinstance(batch, tuple) else batch
    real = features.get("is_real_example")
    for row in range(int(tf.shape(features["input_word_ids"])[0])):
      if real is not None and not int(real[row]):
        continue
      examples.append({name: features[name][row:row + 1].numpy().astype(np.int32)
                       for name in INPUT_NAMES})
      if len(examples) == limit:
        return examples
  return examples
