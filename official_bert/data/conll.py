"""Token classification (NER) data in CoNLL format: reading, WordPiece features, predictions back.

A CoNLL file has one token a line, columns separated by whitespace, the tag in the last column, a
blank line between sentences and `-DOCSTART-` lines between documents (CoNLL-2003). A test file may
have the token column only. IOB1 and IOB2 tags are both read as they are: each tag is a class.

The label of a word goes on its first WordPiece; the other pieces, `[CLS]`, `[SEP]` and padding get
label id -1 (`IGNORED_LABEL_ID`) and `label_mask` 0, so they count neither in the loss nor in the
predictions. A sentence with more pieces than fit in one sequence is split between words into
several features; `word_index` maps every feature position back to its word, so the predictions
re-assemble into exactly one tag per original word.

Example:

  train = read_conll_file(find_split_file("wnut17", "train"))
  labels = get_label_list(train)
  features = convert_sentences_to_features(train, labels, tokenizer, max_seq_length=128)
  dataset = make_dataset(features, batch_size=32, is_training=True)  # train a model on it, then
  dev = read_conll_file(find_split_file("wnut17", "dev"))
  dev_features = convert_sentences_to_features(dev, labels, tokenizer, max_seq_length=128)
  logits = model.predict(make_dataset(dev_features, batch_size=32))["logits"]
  write_predictions("dev.out", dev, predictions_to_tags(dev_features, logits, dev, labels))
"""

import dataclasses
import os

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.data.indexed_batches import indexed_batches

IGNORED_LABEL_ID = -1
OUTSIDE_LABEL = "O"
DOCSTART = "-DOCSTART-"
# File names of each split in a data directory: CoNLL-2003 (`valid.txt`), WNUT-17 (`dev.conll`).
SPLIT_FILE_NAMES = {
    "train": ("train.txt", "train.conll"),
    "dev": ("dev.txt", "valid.txt", "dev.conll", "valid.conll"),
    "test": ("test.txt", "test.conll"),
}


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
  """One sentence of a CoNLL file.

  Attributes:
    words: the tokens (first column).
    tags: one tag per word (last column), or None when the file has no tag column.
    path: the file the sentence came from.
    line: the line of its first word (word `i` is on line `line + i`).
  """
  words: tuple
  tags: tuple | None
  path: str
  line: int


@dataclasses.dataclass(frozen=True)
class TokenClassificationFeatures:
  """WordPiece features of a list of sentences, all int32 numpy arrays.

  Attributes:
    input_word_ids: `[num_features, seq_length]` WordPiece ids, padded with 0.
    input_mask: 1 on real tokens, 0 on padding.
    input_type_ids: all 0 (a single segment).
    label_ids: the label id on the first piece of each word, `IGNORED_LABEL_ID` (-1) elsewhere and
      everywhere in sentences without tags.
    word_index: the index in its sentence of the word whose first piece is at this position, -1
      elsewhere.
    sentence_index: `[num_features]`, the sentence each feature comes from.
    num_sentences: how many sentences were converted.
    num_split_sentences: sentences that needed more than one feature.
    num_truncated_words: words with more pieces than fit in one feature; only their first
      `seq_length - 2` pieces were kept (their label and prediction are not affected).
    num_empty_words: words the tokenizer turned into no piece at all (e.g. only control
      characters); they were given `[UNK]`.
  """
  input_word_ids: np.ndarray
  input_mask: np.ndarray
  input_type_ids: np.ndarray
  label_ids: np.ndarray
  word_index: np.ndarray
  sentence_index: np.ndarray
  num_sentences: int
  num_split_sentences: int
  num_truncated_words: int
  num_empty_words: int

  @property
  def label_mask(self):
    """1 on the first piece of every word (where a tag is learned and predicted), else 0."""
    return (self.word_index >= 0).astype(np.int32)

  def __len__(self):
    return len(self.sentence_index)


def read_conll_file(path):
  """Reads the sentences of one CoNLL-style file.

  Every token line must have as many columns as the file's first token line; with two or more, the
  last is the tag, with one the file is untagged. Lines holding only whitespace (or a byte-order
  mark) separate sentences; `-DOCSTART-` lines are document markers, not words.

  Args:
    path: the file, UTF-8.

  Returns:
    A list of `TaggedSentence`, in file order.

  Raises:
    ValueError: naming the file and line, for text that is not UTF-8 or a line whose number of
      columns differs from the first token line; or a file without any sentence.
  """
  sentences, words, tags = [], [], []
  first_line = num_columns = columns_line = None
  num_documents = 0

  def end_sentence():
    if words:
      sentences.append(TaggedSentence(tuple(words), tuple(tags) if num_columns > 1 else None,
                                      str(path), first_line))
      words.clear()
      tags.clear()

  with file_io.open_read(path) as f:
    for line_number, raw_line in enumerate(f, start=1):
      try:
        line = raw_line.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{line_number}: not valid UTF-8 at column {e.start + 1}") from e
      columns = line.lstrip("\ufeff").split()
      if not columns or columns[0] == DOCSTART:
        num_documents += bool(columns)
        end_sentence()
        continue
      if num_columns is None:
        num_columns, columns_line = len(columns), line_number
      if len(columns) != num_columns:
        raise ValueError(
            f"{path}:{line_number}: {len(columns)} column(s), but the first token line "
            f"({columns_line}) has {num_columns}; expected `token [other columns] tag` or just "
            "`token` on every line, and no spaces inside a token")
      if not words:
        first_line = line_number
      words.append(columns[0])
      tags.append(columns[-1])
  end_sentence()
  if not sentences:
    raise ValueError(f"{path}: no sentences (the file is empty or holds only -DOCSTART- lines)")
  logging.info("Read %d sentences (%d words, %d -DOCSTART- lines) from %s%s.", len(sentences),
               sum(len(s.words) for s in sentences), num_documents, path,
               "" if num_columns != 1 else " (no tag column)")
  return sentences


def find_split_file(data_dir, split):
  """Returns the file of `split` ("train", "dev" or "test") in `data_dir`.

  Args:
    data_dir: a folder with e.g. `train.txt`, `valid.txt`, `test.txt` (CoNLL-2003) or
      `train.conll`, `dev.conll`, `test.conll` (WNUT-17); see `SPLIT_FILE_NAMES`.
    split: "train", "dev" or "test".

  Returns:
    The path of the one matching file.

  Raises:
    FileNotFoundError: no file of that split; ValueError: more than one, or an unknown split.
  """
  if split not in SPLIT_FILE_NAMES:
    raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_FILE_NAMES)}")
  found = [os.path.join(data_dir, name) for name in SPLIT_FILE_NAMES[split]
           if file_io.is_file(os.path.join(data_dir, name))]
  if not found:
    raise FileNotFoundError(f"{data_dir} has none of {list(SPLIT_FILE_NAMES[split])} for the "
                            f"{split} split")
  if len(found) > 1:
    raise ValueError(f"{data_dir} has several {split} files {found}; pass the file explicitly")
  return found[0]


def get_label_list(sentences):
  """Returns the labels of the training sentences: `O` first, then the other tags sorted.

  Args:
    sentences: tagged `TaggedSentence`s, normally those of the training file.

  Returns:
    A list of tag strings; the position of a tag is its label id.

  Raises:
    ValueError: a sentence has no tags.
  """
  tags = set()
  for sentence in sentences:
    if sentence.tags is None:
      raise ValueError(f"{sentence.path}:{sentence.line}: the labels come from tagged sentences, "
                       "but this file has no tag column")
    tags.update(sentence.tags)
  return [OUTSIDE_LABEL] + sorted(tags - {OUTSIDE_LABEL})


def _word_pieces(sentence, tokenizer, max_pieces, counts):
  """Returns the WordPiece list of every word, never empty and at most `max_pieces` long."""
  word_pieces = []
  for i, word in enumerate(sentence.words):
    pieces = tokenizer.tokenize(word)
    if not pieces:
      counts["empty"] += 1
      pieces = ["[UNK]"]
    if len(pieces) > max_pieces:
      counts["truncated"] += 1
      logging.warning("%s:%d: word %r has %d WordPieces, more than the %d that fit in a sequence; "
                      "keeping the first %d.", sentence.path, sentence.line + i, word[:50],
                      len(pieces), max_pieces, max_pieces)
      pieces = pieces[:max_pieces]
    word_pieces.append(pieces)
  return word_pieces


def check_tags(sentences, label_list):
  """Checks that every tag of `sentences` is one of the labels, before any tokenizing.

  Args:
    sentences: `TaggedSentence`s; untagged ones have nothing to check.
    label_list: the labels (`get_label_list` of the training sentences).

  Raises:
    ValueError: naming the file and line of the first tag that is not in `label_list`.

  Example:

  >>> dev = [TaggedSentence(("John", "Berlin"), ("B-PER", "B-GPE"), "dev.txt", 40)]
  >>> check_tags(dev, ["O", "B-PER"])
  Traceback (most recent call last):
  ...
  ValueError: dev.txt:41: tag 'B-GPE' is not among the labels of the training data ['O', 'B-PER']
  """
  known = set(label_list)
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags or ()):
      if tag not in known:
        raise ValueError(f"{sentence.path}:{sentence.line + i}: tag {tag!r} is not among the "
                         f"labels of the training data {label_list}")


def _word_label_ids(sentence, label_to_id):
  """Returns the label id of every word (all ignored for an untagged sentence)."""
  if sentence.tags is None:
    return [IGNORED_LABEL_ID] * len(sentence.words)
  return [label_to_id[tag] for tag in sentence.tags]


def _pad(rows, length, value):
  """Stacks lists of at most `length` ints into an int32 array, padding with `value`."""
  array = np.full([len(rows), length], value, np.int32)
  for n, row in enumerate(rows):
    array[n, :len(row)] = row
  return array


def _split_into_windows(word_pieces, max_pieces):
  """Groups consecutive words greedily into windows of at most `max_pieces` pieces."""
  windows, current, length = [], [], 0
  for i, pieces in enumerate(word_pieces):
    if current and length + len(pieces) > max_pieces:
      windows.append(current)
      current, length = [], 0
    current.append(i)
    length += len(pieces)
  windows.append(current)
  return windows


def convert_sentences_to_features(sentences, label_list, tokenizer, max_seq_length):
  """Tokenizes words into WordPieces, labels first pieces, and splits long sentences.

  Args:
    sentences: `TaggedSentence`s, tagged or not.
    label_list: the labels (`get_label_list` of the training sentences); a tag outside it is an
      error.
    tokenizer: a `tokenization.FullTokenizer` (anything with `tokenize` and
      `convert_tokens_to_ids` whose vocabulary has `[CLS]`, `[SEP]` and `[UNK]`).
    max_seq_length: length of each feature, at least 3.

  Returns:
    `TokenClassificationFeatures`; the counts of split sentences and of truncated and empty words
    are also logged.

  Raises:
    ValueError: naming the file and line of a tag that is not in `label_list`.
  """
  if max_seq_length < 3:
    raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
  check_tags(sentences, label_list)
  label_to_id = {label: i for i, label in enumerate(label_list)}
  max_pieces = max_seq_length - 2
  counts = {"empty": 0, "truncated": 0, "split": 0}
  sentence_index, token_ids, word_index, label_ids = [], [], [], []
  for n, sentence in enumerate(sentences):
    word_labels = _word_label_ids(sentence, label_to_id)
    word_pieces = _word_pieces(sentence, tokenizer, max_pieces, counts)
    windows = _split_into_windows(word_pieces, max_pieces)
    counts["split"] += len(windows) > 1
    for window in windows:
      tokens, words, labels = ["[CLS]"], [-1], [IGNORED_LABEL_ID]
      for i in window:
        others = len(word_pieces[i]) - 1
        tokens += word_pieces[i]
        words += [i] + [-1] * others
        labels += [word_labels[i]] + [IGNORED_LABEL_ID] * others
      sentence_index.append(n)
      token_ids.append(tokenizer.convert_tokens_to_ids(tokens + ["[SEP]"]))
      word_index.append(words + [-1])
      label_ids.append(labels + [IGNORED_LABEL_ID])
  logging.info("Converted %d sentences into %d features of length %d: %d sentences split, "
               "%d words truncated, %d empty words given [UNK].", len(sentences), len(token_ids),
               max_seq_length, counts["split"], counts["truncated"], counts["empty"])
  return TokenClassificationFeatures(
      input_word_ids=_pad(token_ids, max_seq_length, 0),
      input_mask=_pad([[1] * len(ids) for ids in token_ids], max_seq_length, 0),
      input_type_ids=np.zeros([len(token_ids), max_seq_length], np.int32),
      label_ids=_pad(label_ids, max_seq_length, IGNORED_LABEL_ID),
      word_index=_pad(word_index, max_seq_length, -1),
      sentence_index=np.array(sentence_index, np.int32),
      num_sentences=len(sentences), num_split_sentences=counts["split"],
      num_truncated_words=counts["truncated"], num_empty_words=counts["empty"])


def predictions_to_tags(features, predictions, sentences, label_list):
  """Re-assembles feature-level predictions into one tag per original word.

  Args:
    features: the `TokenClassificationFeatures` the predictions were made on.
    predictions: `[num_features, seq_length]` predicted label ids, or
      `[num_features, seq_length, num_labels]` logits or probabilities (their argmax is taken).
    sentences: the sentences `features` were converted from.
    label_list: the labels the ids index.

  Returns:
    A list with, for each sentence, the list of predicted tags, one per word.

  Raises:
    ValueError: shapes that do not match the features, or a word left without a prediction.
  """
  predictions = np.asarray(predictions)
  if predictions.ndim == 3:
    predictions = predictions.argmax(axis=-1)
  if predictions.shape != features.word_index.shape:
    raise ValueError(f"predictions have shape {predictions.shape}, the features "
                     f"{features.word_index.shape}")
  if len(sentences) != features.num_sentences:
    raise ValueError(f"{len(sentences)} sentences, but the features come from "
                     f"{features.num_sentences}")
  tags = [[None] * len(sentence.words) for sentence in sentences]
  rows, positions = np.nonzero(features.word_index >= 0)
  for row, position in zip(rows, positions):
    label_id = int(predictions[row, position])
    tags[features.sentence_index[row]][features.word_index[row, position]] = label_list[label_id]
  for sentence, sentence_tags in zip(sentences, tags):
    if None in sentence_tags:
      i = sentence_tags.index(None)
      raise ValueError(f"{sentence.path}:{sentence.line + i}: word {sentence.words[i]!r} got no "
                       "prediction; were the features made from these sentences?")
  return tags


def write_predictions(path, sentences, predicted_tags):
  """Writes predictions in CoNLL format, atomically (`file_io.write_text`).

  Each word gives a line `token gold predicted` (or `token predicted` for untagged sentences),
  separated by single spaces as `conlleval` expects; a blank line follows each sentence.

  Args:
    path: the output file.
    sentences: the `TaggedSentence`s.
    predicted_tags: one list of tags per sentence (`predictions_to_tags`).

  Raises:
    ValueError: a sentence and its predictions differ in length.
  """
  if len(sentences) != len(predicted_tags):
    raise ValueError(f"{len(sentences)} sentences but {len(predicted_tags)} predictions")
  lines = []
  for sentence, predicted in zip(sentences, predicted_tags):
    if len(predicted) != len(sentence.words):
      raise ValueError(f"{sentence.path}:{sentence.line}: {len(sentence.words)} words but "
                       f"{len(predicted)} predicted tags")
    gold = sentence.tags or [None] * len(predicted)
    for word, gold_tag, predicted_tag in zip(sentence.words, gold, predicted):
      lines.append(" ".join(c for c in (word, gold_tag, predicted_tag) if c is not None) + "\n")
    lines.append("\n")
  file_io.write_text(path, "".join(lines))
  logging.info("Wrote predictions for %d sentences to %s.", len(sentences), path)


def make_dataset(features, batch_size, is_training=False, seed=None, drop_remainder=None):
  """Builds the `tf.data` input for `BertTokenClassifier` from features.

  Args:
    features: `TokenClassificationFeatures`.
    batch_size: features per batch.
    is_training: if True, shuffles (anew each pass) and repeats forever; otherwise one pass in
      order, matching `features` row by row (as `predictions_to_tags` needs).
    seed: shuffle seed, for reproducible training order.
    drop_remainder: drop a last, smaller batch; defaults to `is_training`.

  Returns:
    A `tf.data.Dataset` of `(inputs, label_ids, label_mask)`, which Keras reads as
    `(x, y, sample_weight)`: `inputs` a dict of int32 `[batch, seq_length]` tensors
    `input_word_ids`, `input_mask`, `input_type_ids`; `label_ids` int32 `[batch, seq_length]` with
    -1 on ignored positions (use a loss with `ignore_class=-1`); `label_mask` float32, 1 on the
    first piece of each word.
  """
  inputs = {name: getattr(features, name)
            for name in ("input_word_ids", "input_mask", "input_type_ids")}
  label_mask = tf.constant(features.label_mask, tf.float32)
  return indexed_batches((inputs, features.label_ids, label_mask), len(features), batch_size,
                         is_training, seed, drop_remainder)
