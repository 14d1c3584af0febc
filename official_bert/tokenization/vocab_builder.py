"""Learns a WordPiece `vocab.txt` from text files, for the BERT tokenizer of this package.

Words come from `official_bert.tokenization.BasicTokenizer`, the same splitting that
`FullTokenizer` and `BertTokenizerLayer` apply before WordPiece, so every learned piece can be
reached at tokenization time. The pieces are learned by tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib`). Its wrapper
`bert_vocab_from_dataset` is not used: it splits words with tf.text's `BasicTokenizer`, which
case-folds with NFKC and so learns pieces ("ss" for "ß", "..." for "…") that the original rules
never produce.

Example:

  stats = build_vocab(["corpus/*.txt"], "vocab.txt", vocab_size=8000)
  print(stats.unk_rate)
"""

import collections
import dataclasses
import os
import time

from absl import logging
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from official_bert import tokenization
from official_bert.common import file_io

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Learner settings (tensorflow-text's defaults): longer words are left out of learning, and only the
# most frequent characters get pieces of their own, so rare symbols do not crowd the vocabulary.
MAX_TOKEN_LENGTH = 50
MAX_UNIQUE_CHARS = 1000
_LOG_EVERY_LINES = 200_000


@dataclasses.dataclass
class VocabStats:
  """What `build_vocab` read and wrote.

  Attributes:
    files: the input files, after glob expansion.
    num_lines: lines read.
    num_words: words (after `BasicTokenizer`) in those lines.
    num_distinct_words: distinct words.
    vocab_size: lines written to the vocabulary (at most the requested size).
    min_count: the frequency threshold of the learner that gave this size.
    num_tokens: WordPiece tokens of the whole input under the new vocabulary.
    num_unk: how many of them are `[UNK]`.
    seconds: wall time.
  """
  files: list
  num_lines: int
  num_words: int
  num_distinct_words: int
  vocab_size: int
  min_count: int
  num_tokens: int
  num_unk: int
  seconds: float

  @property
  def unk_rate(self):
    """Fraction of `[UNK]` tokens."""
    return self.num_unk / max(self.num_tokens, 1)


def count_words(files, do_lower_case=True, max_input_lines=None):
  """Counts the `BasicTokenizer` words of text files.

  Space-separated chunks are counted first and each distinct chunk is tokenized once: a plain space
  always separates words in the original rules, so this gives the same counts as tokenizing every
  line, many times faster.

  Args:
    files: paths of UTF-8 text files.
    do_lower_case: lower-case and strip accents, as the tokenizer will.
    max_input_lines: stop after this many lines in all (None: read everything).

  Returns:
    `(word_counts, num_lines)`: a `collections.Counter` of words and the number of lines read.

  Raises:
    ValueError: a line is not valid UTF-8 (the message names file and line).
  """
  chunk_counts = collections.Counter()
  num_lines = 0
  for path in files:
    with tf.io.gfile.GFile(path, "rb") as f:
      for line_number, raw_line in enumerate(f, start=1):
        if max_input_lines is not None and num_lines >= max_input_lines:
          break
        try:
          line = raw_line.decode("utf-8")
        except UnicodeDecodeError as e:
          raise ValueError(f"{path}, line {line_number}: not valid UTF-8 ({e}).") from e
        chunk_counts.update(line.split(" "))
        num_lines += 1
        if num_lines % _LOG_EVERY_LINES == 0:
          logging.info("Read %d lines (now in %s).", num_lines, path)
  basic_tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  word_counts = collections.Counter()
  for chunk, count in chunk_counts.items():
    for word in basic_tokenizer.tokenize(chunk):
      word_counts[word] += count
  return word_counts, num_lines


def learn_vocab(word_counts, vocab_size, reserved_tokens=RESERVED_TOKENS):
  """Learns the largest WordPiece vocabulary of at most `vocab_size` lines.

  The learner keeps the pieces seen at least `min_count` times; a binary search finds the smallest
  `min_count` whose vocabulary fits. (The library's own `learn` may return a vocabulary over the
  requested size when the search ends at its lower bound.)

  Args:
    word_counts: mapping word -> count.
    vocab_size: the most lines the vocabulary may have, reserved tokens included.
    reserved_tokens: tokens placed first, in this order.

  Returns:
    `(tokens, min_count)`: the vocabulary in id order and the threshold that produced it.

  Raises:
    ValueError: no words, or `vocab_size` is too small for even the single characters.
  """
  reserved_tokens = list(reserved_tokens)
  words = learner.get_input_words(list(word_counts.items()), reserved_tokens, MAX_TOKEN_LENGTH)
  if not words:
    raise ValueError("The input has no words to learn a vocabulary from.")
  allowed_chars = learner.get_allowed_chars(words, MAX_UNIQUE_CHARS)
  words = learner.filter_input_words(words, allowed_chars, max_input_tokens=-1)
  params = learner.Params(
      upper_thresh=None, lower_thresh=None, num_iterations=4, max_input_tokens=-1,
      max_token_length=MAX_TOKEN_LENGTH, max_unique_chars=MAX_UNIQUE_CHARS,
      vocab_size=vocab_size, slack_ratio=0.0, include_joiner_token=True, joiner="##",
      reserved_tokens=reserved_tokens)

  results = {}

  def learn_at(min_count):
    if min_count not in results:
      results[min_count] = learner.learn_with_thresh(words, min_count, params)
      logging.info("min_count %d -> %d pieces", min_count, len(results[min_count]))
    return results[min_count]

  def fits(min_count):
    return len(learn_at(min_count)) <= vocab_size

  counts = sorted((count for _, count in words), reverse=True)
  ceiling = counts[0] + 1
  if not fits(ceiling):
    raise ValueError(
        f"vocab_size={vocab_size} is too small: the reserved tokens and the {len(allowed_chars)} "
        f"characters of the input (each also as a ## continuation) already need "
        f"{len(learn_at(ceiling))} lines.")
  # Each learner run costs seconds, so the search starts near the answer: about `vocab_size`
  # words are seen at least as often as the `vocab_size`-th most frequent word. It then doubles or
  # halves to bracket the answer in `(low - 1, high]` before bisecting.
  guess = max(counts[min(vocab_size, len(counts)) - 1], 1)
  if fits(guess):
    high = guess
    while high > 1 and fits(high // 2):
      high //= 2
    low = high // 2 + 1
  else:
    low = guess + 1
    while not fits(min(low * 2, ceiling)):
      low = low * 2 + 1
    high = min(low * 2, ceiling)
  while low < high:
    middle = (low + high) // 2
    if len(learn_at(middle)) <= vocab_size:
      high = middle
    else:
      low = middle + 1
  return learn_at(high), high


def write_vocab(tokens, output_file):
  """Writes one token a line, atomically: a crash never leaves a partial `vocab.txt` behind."""
  output_dir = os.path.dirname(output_file)
  if output_dir:
    tf.io.gfile.makedirs(output_dir)
  file_io.write_text(output_file, "".join(token + "\n" for token in tokens))


def count_unknown(word_counts, tokens):
  """Returns `(num_tokens, num_unk)` of the counted words under the vocabulary `tokens`."""
  wordpiece = tokenization.WordpieceTokenizer({token: i for i, token in enumerate(tokens)})
  num_tokens = num_unk = 0
  for word, count in word_counts.items():
    pieces = wordpiece.tokenize(word)
    num_tokens += count * len(pieces)
    num_unk += count * pieces.count(tokenization.UNK_TOKEN)
  return num_tokens, num_unk


def build_vocab(input_patterns, output_file, vocab_size=30522, do_lower_case=True,
                max_input_lines=None, reserved_tokens=RESERVED_TOKENS):
  """Learns a WordPiece vocabulary from text files and writes it as a `vocab.txt`.

  Args:
    input_patterns: comma-separated file names or globs of UTF-8 text (a string or a list of
      them).
    output_file: where to write the vocabulary (reserved tokens first, then the pieces).
    vocab_size: the most lines the vocabulary may have.
    do_lower_case: learn an uncased vocabulary (lower-cased, accents stripped).
    max_input_lines: read at most this many lines in all.
    reserved_tokens: the first lines, in order.

  Returns:
    A `VocabStats`, including the `[UNK]` rate of the input under the new vocabulary.
  """
  start = time.time()
  files = file_io.expand_globs(input_patterns, what="input file")
  logging.info("Counting words in %d files.", len(files))
  word_counts, num_lines = count_words(files, do_lower_case, max_input_lines)
  logging.info("%d lines, %d distinct words.", num_lines, len(word_counts))
  tokens, min_count = learn_vocab(word_counts, vocab_size, reserved_tokens)
  write_vocab(tokens, output_file)
  num_tokens, num_unk = count_unknown(word_counts, tokens)
  return VocabStats(
      files=files, num_lines=num_lines, num_words=sum(word_counts.values()),
      num_distinct_words=len(word_counts), vocab_size=len(tokens), min_count=min_count,
      num_tokens=num_tokens, num_unk=num_unk, seconds=time.time() - start)
