"""The original BERT tokenization, rule for rule: basic splitting, then greedy WordPiece.

Text goes through these steps, each one a function below:

1. `_clean_text`: drop NUL, U+FFFD and control characters; whitespace characters become spaces.
2. `_tokenize_chinese_chars`: put spaces around CJK ideographs, so each is a word of its own.
3. `whitespace_tokenize`: split on whitespace.
4. When uncased, `str.lower` and `_strip_accents` (NFD, then drop the combining marks).
5. `_split_on_punctuation`: every punctuation character becomes a word of its own.
6. `WordpieceTokenizer`: greedy longest-match-first pieces, `##` marking a continuation, `[UNK]` for
   a word that cannot be split or is longer than 200 characters.

The same rules run in-graph in `official_bert.preprocessing.BertTokenizerLayer`; tests check that
the two agree on real text.

Example:

  tokenizer = FullTokenizer("vocab.txt", do_lower_case=True)
  tokens = tokenizer.tokenize("Héllo, wörld!")  # ['hello', ',', 'world', '!']
  ids = tokenizer.convert_tokens_to_ids(tokens)
"""

import json
import posixpath
import unicodedata

from absl import logging
import tensorflow as tf

from official_bert.tokenization import utf8

UNK_TOKEN = "[UNK]"
MAX_INPUT_CHARS_PER_WORD = 200

# The CJK Unified Ideographs blocks and their extensions A-E, plus the two compatibility blocks, as
# in the original release. Hangul, Hiragana and Katakana are not in them: Korean separates words
# with spaces, kana runs are left to WordPiece, and the released vocabularies were built that way.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def convert_to_unicode(text):
  """Returns `text` as `str`, decoding UTF-8 bytes as the original did.

  Bytes that are not UTF-8 are dropped (the original's `decode("utf-8", "ignore")`), with a
  warning that counts them; the file readers decode line by line themselves and report the file
  and lines (`official_bert.tokenization.utf8`).

  Args:
    text: `str`, `bytes` or `bytearray`.

  Returns:
    The text as `str`.

  Raises:
    ValueError: another type.
  """
  if isinstance(text, str):
    return text
  if isinstance(text, (bytes, bytearray)):
    decoded, dropped = utf8.decode(bytes(text))
    if dropped:
      logging.warning("Dropped %d byte(s) that are not UTF-8 from the text %r, as the original "
                      "did.", dropped, bytes(text)[:60])
    return decoded
  raise ValueError(f"Expected str or bytes text, got {type(text).__name__}: {text!r:.80}")


def load_vocab(vocab_file):
  """Reads a `vocab.txt` (one token a line; the line number is the id) into a dict token -> id.

  Args:
    vocab_file: path of the vocabulary (local or any `tf.io.gfile` file system).

  Returns:
    A dict from token to id, in file order.

  Raises:
    ValueError: a line is not UTF-8, or a token appears twice (ids would be ambiguous).
  """
  vocab = {}
  # One read: GFile's line iterator costs a call into TensorFlow per line (30k for BERT's).
  with tf.io.gfile.GFile(vocab_file, "rb") as f:
    lines = f.read().split(b"\n")
  if lines[-1] == b"":
    lines.pop()  # the newline that ends the last line
  for index, raw_line in enumerate(lines):
    try:
      token = raw_line.decode("utf-8").strip()
    except UnicodeDecodeError as e:
      raise ValueError(f"{vocab_file}, line {index + 1}: token is not valid UTF-8: {e}") from e
    if token in vocab:
      raise ValueError(
          f"{vocab_file}, line {index + 1}: token {token!r} repeats line {vocab[token] + 1}; "
          "each token must appear once.")
    vocab[token] = index
  return vocab


def whitespace_tokenize(text):
  """Splits on whitespace (Python's `str.split`, as the original does).

  Args:
    text: `str`.

  Returns:
    The list of non-empty words.
  """
  return text.split()


def _is_whitespace(char):
  """Space, tab, newline, carriage return and the Unicode space separators (Zs)."""
  # Tab, newline and return are category Cc, but they separate words, so they count as whitespace
  # and are not deleted as control characters.
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def _is_control(char):
  """Control (Cc) and format (Cf) characters, except the whitespace among them."""
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  """ASCII non-alphanumeric symbols plus every Unicode punctuation category (P*)."""
  cp = ord(char)
  # `$`, `+`, `^`, `` ` `` and others are symbols (S*) in Unicode, yet the original splits every
  # non-alphanumeric ASCII character, so these ranges are listed explicitly.
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _is_cjk_char(cp):
  """Whether code point `cp` lies in one of `CJK_RANGES`."""
  return any(low <= cp <= high for low, high in CJK_RANGES)


def _clean_text(text):
  """Deletes NUL, U+FFFD and control characters; turns whitespace into plain spaces."""
  # U+FFFD marks bytes that an earlier decoder could not read; the original drops it with NUL so
  # that broken input does not leave [UNK] tokens behind.
  output = []
  for char in text:
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
      continue
    output.append(" " if _is_whitespace(char) else char)
  return "".join(output)


def _tokenize_chinese_chars(text):
  """Surrounds each CJK ideograph with spaces: Chinese is written without spaces between words."""
  output = []
  for char in text:
    if _is_cjk_char(ord(char)):
      output.extend((" ", char, " "))
    else:
      output.append(char)
  return "".join(output)


def _strip_accents(text):
  """Decomposes (NFD) and drops the non-spacing marks (Mn), so "é" becomes "e"."""
  # The result stays decomposed: Hangul syllables become jamo, as in the released uncased models.
  return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def character_replacements(do_lower_case):
  """Steps 1 and 4 one character at a time: `{character: what it becomes}` for every character
  that they change.

  Those steps act on each character alone, except `str.lower`'s one rule of context: a capital
  sigma that ends a word becomes "ς", where this map gives "σ". The map is what an in-graph
  normalizer with a per-character table (tf.text's `FastBertNormalizer`) needs to apply the
  original's rules rather than its own.

  Args:
    do_lower_case: include lower-casing and accent stripping (the uncased models).

  Returns:
    A dict from each changed character (NUL included) to its replacement, "" for deleted ones.

  >>> cased = character_replacements(do_lower_case=False)
  >>> cased[chr(0xAD)], cased[chr(0xA0)], chr(0xB5) in cased  # soft hyphen, no-break space, µ
  ('', ' ', False)
  """
  replacements = {}
  for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:  # Surrogates never occur in text decoded from UTF-8.
      continue
    char = chr(cp)
    # No step changes an unassigned or private-use character; skipping them saves most of the time.
    if unicodedata.category(char) in ("Cn", "Co"):
      continue
    new = _clean_text(char)
    if do_lower_case and new:
      new = _strip_accents(new.lower())
    if new != char:
      replacements[char] = new
  return replacements


def _split_on_punctuation(text):
  """Splits a word so that every punctuation character is a word of its own."""
  words = []
  start_new_word = True
  for char in text:
    if _is_punctuation(char):
      words.append(char)
      start_new_word = True
    else:
      if start_new_word:
        words.append("")
        start_new_word = False
      words[-1] += char
  return words


class BasicTokenizer:
  """Splits text into words: cleaning, CJK, whitespace, lower-casing and accents, punctuation.

  Args:
    do_lower_case: lower-case and strip accents (the "uncased" models).
  """

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    """Returns the list of words of `text` (`str` or UTF-8 `bytes`)."""
    text = _clean_text(convert_to_unicode(text))
    text = _tokenize_chinese_chars(text)
    words = []
    for word in whitespace_tokenize(text):
      # Lower-casing before the accent stripping matters: "İ".lower() is "i" plus a combining dot,
      # which the stripping then removes.
      if self.do_lower_case:
        word = _strip_accents(word.lower())
      words.extend(_split_on_punctuation(word))
    return whitespace_tokenize(" ".join(words))


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece: "unaffable" -> ["un", "##aff", "##able"].

  Args:
    vocab: dict (or set) of the pieces; continuation pieces start with `##`.
    unk_token: what a word that cannot be split becomes.
    max_input_chars_per_word: longer words become `unk_token` without trying.
  """

  def __init__(self, vocab, unk_token=UNK_TOKEN, max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    """Splits each whitespace-separated word of `text` into pieces.

    Args:
      text: words already split by `BasicTokenizer`, joined by spaces (or a single word).

    Returns:
      The list of pieces.
    """
    pieces = []
    for word in whitespace_tokenize(convert_to_unicode(text)):
      pieces.extend(self._tokenize_word(word))
    return pieces

  def _tokenize_word(self, word):
    # Counting characters, not bytes, as the original: the limit is the same for every script.
    if len(word) > self.max_input_chars_per_word:
      return [self.unk_token]
    pieces = []
    start = 0
    while start < len(word):
      end = len(word)
      while end > start:
        piece = word[start:end] if start == 0 else "##" + word[start:end]
        if piece in self.vocab:
          break
        end -= 1
      if end == start:
        # One unknown character spoils the whole word: partial pieces would mislead the model.
        return [self.unk_token]
      pieces.append(piece)
      start = end
    return pieces


class FullTokenizer:
  """`BasicTokenizer` then `WordpieceTokenizer`, with the vocabulary of a `vocab.txt`.

  Args:
    vocab_file: the vocabulary, one token a line; it must contain `[UNK]`.
    do_lower_case: lower-case and strip accents (must match the checkpoint: see
      `validate_case_matches_checkpoint`).

  Raises:
    ValueError: the vocabulary has no `[UNK]` token.
  """

  def __init__(self, vocab_file, do_lower_case=True):
    self.vocab = load_vocab(vocab_file)
    if UNK_TOKEN not in self.vocab:
      raise ValueError(
          f"{vocab_file} has no {UNK_TOKEN} line: WordPiece needs it for words it cannot split. "
          "Use the vocab.txt that came with the checkpoint.")
    self.inv_vocab = {index: token for token, index in self.vocab.items()}
    self.do_lower_case = do_lower_case
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text):
    """Returns the WordPiece tokens of `text` (`str` or UTF-8 `bytes`)."""
    tokens = []
    for word in self.basic_tokenizer.tokenize(text):
      tokens.extend(self.wordpiece_tokenizer.tokenize(word))
    return tokens

  def convert_tokens_to_ids(self, tokens):
    """Maps tokens to ids; raises KeyError naming a token that is not in the vocabulary."""
    try:
      return [self.vocab[token] for token in tokens]
    except KeyError as e:
      raise KeyError(f"Token {e.args[0]!r} is not in the vocabulary") from None

  def convert_ids_to_tokens(self, ids):
    """Maps ids to tokens; raises KeyError naming an id outside the vocabulary."""
    try:
      return [self.inv_vocab[int(index)] for index in ids]
    except KeyError as e:
      raise KeyError(f"Id {e.args[0]} is outside the vocabulary (size {len(self.vocab)})") from None


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Shortens two lists in place, one token at a time from the end of the longer, to `max_length`.

  On a tie the second list loses a token: the original behaviour, which checkpoints were trained
  with. `BertInputPacker` reproduces it in-graph.

  Args:
    tokens_a: first segment (list, modified in place).
    tokens_b: second segment (list, modified in place).
    max_length: the most tokens the two may hold together.
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def _google_model_cases():
  """Folder names of Google's released checkpoints -> whether they were trained lower-cased."""
  cases = {
      "uncased_L-12_H-768_A-12": True,
      "uncased_L-24_H-1024_A-16": True,
      "wwm_uncased_L-24_H-1024_A-16": True,
      "multilingual_L-12_H-768_A-12": True,
      "chinese_L-12_H-768_A-12": True,
      "cased_L-12_H-768_A-12": False,
      "cased_L-24_H-1024_A-16": False,
      "wwm_cased_L-24_H-1024_A-16": False,
      "multi_cased_L-12_H-768_A-12": False,
  }
  # The 24 small BERTs (Turc et al., 2019) are all uncased.
  for layers in (2, 4, 6, 8, 10, 12):
    for hidden in (128, 256, 512, 768):
      cases[f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"] = True
  return cases


_GOOGLE_MODEL_CASES = _google_model_cases()
_CASE_CONFIG_FILES = ("bert_config.json", "tokenizer_config.json", "config.json")


def _case_from_config_files(checkpoint_dir):
  """Returns `(do_lower_case, file)` from the first config in `checkpoint_dir` that records it."""
  for name in _CASE_CONFIG_FILES:
    path = posixpath.join(checkpoint_dir, name)
    if not tf.io.gfile.exists(path):
      continue
    with tf.io.gfile.GFile(path, "r") as f:
      try:
        config = json.load(f)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from e
    if isinstance(config, dict) and isinstance(config.get("do_lower_case"), bool):
      return config["do_lower_case"], path
  return None, None


def model_tokenizer(vocab_file, do_lower_case, vocab_size):
  """A `FullTokenizer` over `vocab_file`, checked to fit a model of `vocab_size` tokens.

  Args:
    vocab_file: the vocabulary.
    do_lower_case: lower-case and strip accents.
    vocab_size: the model's `vocab_size`; a larger vocabulary is not the model's.

  Raises:
    ValueError: the vocabulary has more tokens than the model's embedding table.
  """
  tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  if len(tokenizer.vocab) > vocab_size:
    raise ValueError(f"{vocab_file} has {len(tokenizer.vocab)} tokens but the model's vocab_size "
                     f"is {vocab_size}: it is not this model's vocabulary.")
  return tokenizer


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises when `do_lower_case` contradicts how the checkpoint was pre-trained.

  An uncased model fed cased text (or the reverse) still trains, only worse, so the mistake would
  go unnoticed. The checkpoint's case is read from a `do_lower_case` field of `bert_config.json`,
  `tokenizer_config.json` or `config.json` (Hugging Face) in its folder, else from its folder name
  when that is one of Google's released models (`uncased_L-12_H-768_A-12`, ...). Other checkpoints
  pass unchecked.

  Args:
    do_lower_case: the value of the `--do_lower_case` flag.
    init_checkpoint: checkpoint prefix (`.../uncased_L-12_H-768_A-12/bert_model.ckpt`) or folder;
      empty or None to skip the check.

  Raises:
    ValueError: the two disagree; the message says which flag value to pass.
  """
  if not init_checkpoint:
    return
  path = str(init_checkpoint).rstrip("/")
  checkpoint_dir = path if tf.io.gfile.isdir(path) else posixpath.dirname(path)
  expected, source = _case_from_config_files(checkpoint_dir) if checkpoint_dir else (None, None)
  if expected is None:
    model_name = posixpath.basename(checkpoint_dir)
    if model_name not in _GOOGLE_MODEL_CASES:
      return
    expected = _GOOGLE_MODEL_CASES[model_name]
    source = f"the released model name {model_name!r}"
  if bool(do_lower_case) != expected:
    kind = "an uncased" if expected else "a cased"
    raise ValueError(
        f"--do_lower_case={bool(do_lower_case)} does not match "
        f"--init_checkpoint={init_checkpoint}: {source} says it is {kind} model. Pass "
        f"--do_lower_case={expected} so that fine-tuning sees text the way pre-training did.")
