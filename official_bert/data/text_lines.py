"""Text files of one example a line, as the original `extract_features.py` reads them.

Each line is one text, or a pair of texts separated by ` ||| `.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "input.txt")
>>> with open(path, "w") as f:
...   _ = f.write("hello world\\nhello ||| world\\n")
>>> [(e.unique_id, e.text_a, e.text_b) for e in read_examples(path)]
[(0, 'hello world', None), (1, 'hello', 'world')]
"""

import dataclasses
import re

from absl import logging

from official_bert.common import file_io
from official_bert.tokenization import utf8

# The separator of a text pair on one input line: the original's regex, `^(.*) \|\|\| (.*)$`.
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(frozen=True)
class InputExample:
  """One input line.

  Attributes:
    unique_id: the line's index in the file, from 0 (`linex_index` in the output).
    text_a: the text, or the first of a pair.
    text_b: the second text of a pair, else None.
  """
  unique_id: int
  text_a: str
  text_b: str | None



def read_examples(input_file, dropped=None):
  """Reads one example per line; ` ||| ` separates the two texts of a pair.

  Every line counts, blank ones too (they give `[CLS] [SEP]`), so `unique_id` is the line index.
  Bytes that are not UTF-8 are dropped as in the original, counted and reported.

  Args:
    input_file: UTF-8 text file.
    dropped: optional `utf8.DroppedBytes` that counts the dropped bytes, for the caller.

  Returns:
    A list of `InputExample`.

  Raises:
    ValueError: an empty file.
  """
  examples = []
  dropped = utf8.DroppedBytes(input_file) if dropped is None else dropped
  with file_io.open_read(input_file) as f:
    for index, raw_line in enumerate(f):
      line = dropped.decode(raw_line, index + 1).strip()
      match = _PAIR.match(line)
      text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
      examples.append(InputExample(index, text_a, text_b))
  dropped.report()
  if not examples:
    raise ValueError(f"{input_file} is empty: expected one text per line")
  logging.info("Read %d lines (%d pairs) from %s.", len(examples),
               sum(e.text_b is not None for e in examples), input_file)
  return examples
