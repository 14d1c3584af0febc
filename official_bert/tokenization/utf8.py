"""Decoding text as the original did, and counting what that drops.

The original reads every text through `tokenization.convert_to_unicode`, which decodes with
`text.decode("utf-8", "ignore")`: bytes that are not UTF-8 are dropped and the rest of the line is
kept. The readers here do the same, and count the dropped bytes so that a run reports them (file,
number of bytes and lines, the first lines) instead of losing them silently. This module needs no
TensorFlow, so that the pre-training data workers can use it.
"""

from absl import logging

# This many line numbers of lines with dropped bytes are kept for the report.
_LINES_LISTED = 5


def decode(data):
  """Decodes UTF-8 bytes, dropping the bytes that are not UTF-8, as the original did.

  Args:
    data: `bytes`.

  Returns:
    `(text, number of bytes dropped)`.

  >>> decode(b"caf\\xc3\\xa9 \\xff\\xfe!")
  ('café !', 2)
  """
  try:
    return data.decode("utf-8"), 0
  except UnicodeDecodeError:
    text = data.decode("utf-8", "ignore")
    # Every decoded character re-encodes to the bytes it came from, so the rest was dropped.
    return text, len(data) - len(text.encode("utf-8"))


class DroppedBytes:
  """Counts the bytes that are not UTF-8 dropped while decoding one source, line by line.

  Args:
    source: what is decoded (a file name), for the report.

  Attributes:
    num_bytes: bytes dropped.
    num_lines: lines that lost bytes.
    lines: the first of those line numbers.

  >>> dropped = DroppedBytes("input.txt")
  >>> dropped.decode(b"ok\\n", 1), dropped.decode(b"b\\xffad\\n", 2)
  ('ok\\n', 'bad\\n')
  >>> dropped.num_bytes, dropped.lines
  (1, [2])
  >>> dropped.message()
  'input.txt: dropped 1 byte(s) that are not UTF-8 on 1 line(s) (line 2), as the original did'

  """

  def __init__(self, source):
    self.source = source
    self.num_bytes = 0
    self.num_lines = 0
    self.lines = []

  def decode(self, data, line):
    """Decodes the bytes of line `line` (1-based), counting what is dropped."""
    text, dropped = decode(data)
    if dropped:
      self.num_bytes += dropped
      self.num_lines += 1
      if len(self.lines) < _LINES_LISTED:
        self.lines.append(line)
    return text

  def message(self):
    """The report, or None when nothing was dropped."""
    if not self.num_bytes:
      return None
    listed = ", ".join(str(line) for line in self.lines)
    more = ", ..." if self.num_lines > len(self.lines) else ""
    return (f"{self.source}: dropped {self.num_bytes} byte(s) that are not UTF-8 on "
            f"{self.num_lines} line(s) (line{'s' if self.num_lines > 1 else ''} {listed}{more}), "
            "as the original did")

  def report(self):
    """Logs the report as a warning when bytes were dropped; returns the number of bytes."""
    message = self.message()
    if message:
      logging.warning("%s.", message)
    return self.num_bytes
