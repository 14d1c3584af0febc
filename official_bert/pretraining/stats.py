"""Counts kept while creating pre-training data, and the summary printed at the end."""

import dataclasses

# Skipped lines are all counted; this many are also listed by file and line.
MAX_LISTED_ERRORS = 10


@dataclasses.dataclass
class PretrainingStats:
  """Counts for one shard, or summed over many with `+`.

  Args:
    input_bytes: bytes of text read.
    lines: lines read.
    blank_lines: blank lines (document separators).
    undecodable_lines: lines with bytes that are not UTF-8 (dropped, as the original did).
    undecodable_bytes: those bytes.
    lines_without_tokens: lines skipped because WordPiece gives no token (e.g. control characters).
    cut_documents: documents cut because they are longer than twice the shard size.
    documents: documents with at least one token.
    instances: instances written.
    tokens: tokens in the instances, `[CLS]` and `[SEP]` included.
    predictions: masked LM predictions.
    random_token_predictions: predictions whose input is a random id.
    kept_predictions: predictions whose input is left unchanged.
    random_next: instances whose sentence B is a random next.
    random_next_same_document: of those, the ones whose B comes from A's own document (the
      original's 10 tries drew no other document, e.g. in a corpus of one document).
    undecodable: `file:line` of the first lines with bytes dropped.
  """

  input_bytes: int = 0
  lines: int = 0
  blank_lines: int = 0
  undecodable_lines: int = 0
  undecodable_bytes: int = 0
  lines_without_tokens: int = 0
  cut_documents: int = 0
  documents: int = 0
  instances: int = 0
  tokens: int = 0
  predictions: int = 0
  random_token_predictions: int = 0
  kept_predictions: int = 0
  random_next: int = 0
  random_next_same_document: int = 0
  undecodable: list = dataclasses.field(default_factory=list)

  def __add__(self, other):
    summed = {f.name: getattr(self, f.name) + getattr(other, f.name)
              for f in dataclasses.fields(self) if f.name != "undecodable"}
    return PretrainingStats(**summed,
                            undecodable=(self.undecodable + other.undecodable)[:MAX_LISTED_ERRORS])

  @property
  def mask_rate(self):
    """Predictions per token that can be masked (all but `[CLS]` and the two `[SEP]`)."""
    return self.predictions / max(self.tokens - 3 * self.instances, 1)

  @property
  def random_next_rate(self):
    return self.random_next / max(self.instances, 1)

  def summary(self):
    """Returns the end-of-run summary as a few lines of text."""
    predictions = max(self.predictions, 1)
    masked = self.predictions - self.random_token_predictions - self.kept_predictions
    return [
        f"{self.instances} instances, {self.tokens} tokens "
        f"({self.tokens / max(self.instances, 1):.1f} per instance), "
        f"{100 * self.random_next_rate:.1f}% with a random next sentence "
        f"({self.random_next_same_document} of those from A's own document).",
        f"{self.predictions} masked LM predictions, {100 * self.mask_rate:.2f}% of the maskable "
        f"tokens: {100 * masked / predictions:.1f}% [MASK], "
        f"{100 * self.random_token_predictions / predictions:.1f}% random, "
        f"{100 * self.kept_predictions / predictions:.1f}% unchanged.",
        f"Read {self.input_bytes / 1e6:.1f} MB, {self.lines} lines: {self.documents} documents, "
        f"{self.blank_lines} blank lines. Dropped {self.undecodable_bytes} bytes that are not "
        f"UTF-8 from {self.undecodable_lines} lines (as the original did). Skipped "
        f"{self.lines_without_tokens} lines without WordPiece tokens. Cut "
        f"{self.cut_documents} documents longer than twice the shard size.",
    ]
