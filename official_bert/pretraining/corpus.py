"""The pre-training corpus as a stream of shards: text files -> chunks of whole documents.

The input format is the original's: one sentence per line, a blank line between documents. The
end of a file also ends a document. A shard holds whole documents, about `shard_bytes` of text, so
that memory stays bounded however large the corpus is; a document longer than `2 * shard_bytes`
(for example a whole book without blank lines) is cut at a line boundary, and the cut is counted.

Tokenization happens where the shards are processed (`writer`), and the caller expands the input
globs (`pipeline`, with `official_bert.common.file_io.expand_globs`); files are read through
`official_bert.common.file_io.open_read`, so the corpus may be on any `tf.io.gfile` file system.
"""

import dataclasses

import numpy as np

from official_bert.common import file_io
from official_bert.pretraining.instances import Documents
from official_bert.pretraining.stats import MAX_LISTED_ERRORS
from official_bert.tokenization import utf8


@dataclasses.dataclass(frozen=True)
class TextPiece:
  """A run of whole lines from one file.

  Args:
    path: the file.
    first_line: 1-based line number of the first line of `data`.
    data: the raw bytes, whole lines.
    ends_document: False when the piece was cut inside a document (see the module docstring).
  """

  path: str
  first_line: int
  data: bytes
  ends_document: bool = True


@dataclasses.dataclass(frozen=True)
class Shard:
  """Consecutive pieces of the corpus, processed as one unit with its own random stream."""

  index: int
  pieces: tuple

  @property
  def num_bytes(self):
    return sum(len(p.data) for p in self.pieces)


def read_shards(files, shard_bytes):
  """Yields the corpus as `Shard`s of about `shard_bytes` each, cut at document boundaries.

  Args:
    files: list of text files.
    shard_bytes: target size of a shard in bytes.

  Yields:
    `Shard`s numbered from 0. The cut points depend only on the files and `shard_bytes`.
  """
  pieces = (piece for path in files for piece in read_pieces(path, shard_bytes))
  for index, group in enumerate(group_pieces(pieces, shard_bytes, lambda p: len(p.data))):
    yield Shard(index, tuple(group))


def group_pieces(pieces, shard_bytes, size_of):
  """Groups consecutive pieces into shards: each shard closes once it holds `shard_bytes`.

  Args:
    pieces: the pieces of all files in order (`TextPiece`s, or anything `size_of` can measure).
    shard_bytes: target size of a shard in bytes.
    size_of: `size_of(piece)`, the piece's bytes.

  Yields:
    Lists of pieces, the shards in order.
  """
  group, size = [], 0
  for piece in pieces:
    group.append(piece)
    size += size_of(piece)
    if size >= shard_bytes:
      yield group
      group, size = [], 0
  if group:
    yield group


def read_pieces(path, shard_bytes):
  """Reads one file as pieces of at least `shard_bytes` that end at blank lines (or its end).

  Args:
    path: the text file.
    shard_bytes: target size of a shard in bytes.

  Yields:
    `TextPiece`s, one after another; the pieces of a file depend only on it and `shard_bytes`.
  """
  line_number = 1
  with file_io.open_read(path) as f:
    while True:
      data = f.read(shard_bytes)
      if not data:
        return
      if not data.endswith(b"\n"):
        data += f.readline()
      # Read on, line by line, to the blank line that ends the current document.
      last = data[data.rfind(b"\n", 0, len(data) - 1) + 1:]
      parts, size, ends_document = [data], len(data), True
      while last.strip():
        if size >= 2 * shard_bytes:
          ends_document = False
          break
        last = f.readline()
        parts.append(last)
        size += len(last)
      data = b"".join(parts)
      yield TextPiece(path, line_number, data, ends_document)
      line_number += data.count(b"\n")


@dataclasses.dataclass
class ShardText:
  """The sentences of a shard and the document each belongs to.

  Args:
    sentences: the non-blank lines, stripped.
    document_ids: for each sentence, the number of its document within the shard.
    num_lines: lines read.
    num_blank_lines: blank lines (document separators).
    num_undecodable_lines: lines with bytes that are not UTF-8; those bytes are dropped, the rest
      of the line is kept.
    num_undecodable_bytes: the bytes dropped.
    undecodable: `file:line` of the first `MAX_LISTED_ERRORS` of those lines.
    num_cut_documents: documents cut at the end of the shard.
  """

  sentences: list
  document_ids: list
  num_lines: int = 0
  num_blank_lines: int = 0
  num_undecodable_lines: int = 0
  num_undecodable_bytes: int = 0
  undecodable: list = dataclasses.field(default_factory=list)
  num_cut_documents: int = 0


def decode_shard(shard):
  """Splits a shard into stripped sentences and document numbers, dropping bytes that are not UTF-8.

  Args:
    shard: `Shard`.

  Returns:
    `ShardText`.
  """
  text = ShardText(sentences=[], document_ids=[])
  document = 0
  for piece in shard.pieces:
    for line in _decode_lines(piece, text):
      text.num_lines += 1
      line = line.strip()
      if line:
        text.sentences.append(line)
        text.document_ids.append(document)
      else:
        text.num_blank_lines += 1
        document += 1
    document += 1
    text.num_cut_documents += not piece.ends_document
  return text


def _decode_lines(piece, text):
  """Yields the lines of a piece as `str`, without the bytes that are not UTF-8 (as the original's
  `convert_to_unicode` did); counts those bytes and lines and lists the first lines."""
  data = piece.data[:-1] if piece.data.endswith(b"\n") else piece.data
  try:
    yield from data.decode("utf-8").split("\n")
    return
  except UnicodeDecodeError:
    pass
  for offset, raw in enumerate(data.split(b"\n")):
    line, dropped = utf8.decode(raw)
    if dropped:
      text.num_undecodable_lines += 1
      text.num_undecodable_bytes += dropped
      if len(text.undecodable) < MAX_LISTED_ERRORS:
        text.undecodable.append(f"{piece.path}:{piece.first_line + offset}: dropped {dropped} "
                                "byte(s) that are not UTF-8")
    yield line


def documents_from_tokens(text, token_ids, row_splits):
  """Builds `Documents` from tokenized sentences, dropping sentences without tokens.

  Args:
    text: the `ShardText` that was tokenized.
    token_ids: int32 `[num_tokens]`, the ids of all sentences one after another.
    row_splits: int64 `[num_sentences + 1]`.

  Returns:
    `(documents, num_empty_sentences)`.
  """
  lengths = np.diff(row_splits)
  keep = lengths > 0
  sentence_splits = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
  document_ids = np.asarray(text.document_ids, dtype=np.int64)[keep]
  starts = np.flatnonzero(np.diff(document_ids)) + 1
  document_splits = np.concatenate([[0], starts, [len(document_ids)]]).astype(np.int64)
  if not len(document_ids):
    document_splits = np.zeros(1, dtype=np.int64)
  documents = Documents(
      np.asarray(token_ids, dtype=np.int32), sentence_splits, document_splits)
  return documents, int((~keep).sum())


def read_vocab_tokens(vocab_file):
  """Reads a `vocab.txt` (one token a line, the line number is the id) into a list of tokens.

  The rules are those of `official_bert.tokenization.load_vocab` (UTF-8, stripped, no repeats);
  this one also checks the special tokens that pre-training instances need.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: a line is not UTF-8, a token repeats, or `[CLS]`, `[SEP]`, `[MASK]` or `[UNK]`
      is missing.
  """
  try:
    f = file_io.open_read(vocab_file)
  except FileNotFoundError:
    raise FileNotFoundError(f"vocab file {vocab_file!r} does not exist") from None
  tokens, seen = [], {}
  with f:
    for number, raw in enumerate(f, start=1):
      try:
        token = raw.decode("utf-8").strip()
      except UnicodeDecodeError as e:
        raise ValueError(f"{vocab_file}:{number}: token is not valid UTF-8: {e}") from e
      if token in seen:
        raise ValueError(f"{vocab_file}:{number}: token {token!r} repeats line {seen[token]}")
      seen[token] = number
      tokens.append(token)
  missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]") if t not in seen]
  if missing:
    raise ValueError(f"vocab file {vocab_file!r} lacks the special tokens {missing}; a BERT "
                     "vocabulary needs them to build pre-training instances")
  return tokens
