"""`BertTokenizerLayer`: the original BERT tokenization in-graph, for tf.data and SavedModels.

The rules are those of `official_bert.tokenization.FullTokenizer`, built from TensorFlow and
tensorflow-text ops:

1. Delete NUL, U+FFFD and control characters (one regex).
2. When uncased: `tf.strings.lower` (full Unicode lower-casing, as `str.lower`), NFD, delete the
   non-spacing marks (Mn).
3. `FastWordpieceTokenizer` splits on whitespace, punctuation and CJK ideographs exactly as the
   original does, then runs greedy longest-match-first WordPiece.
4. Words longer than 200 characters become one `[UNK]`.

`FastBertTokenizer`'s own normaliser is not used: it applies NFKC case folding ("…" -> "...",
"ß" -> "ss") and turns control characters into spaces instead of deleting them, so it disagrees with
the original on real text. The remaining differences come from Unicode versions, which Python 3.11
(Unicode 14) and TensorFlow's libraries do not share:

- uncased, 40 capitals new in Unicode 14 (U+2C2F, U+A7C0, U+A7D0, U+A7D6, U+A7D8 and the Vithkuqi
  letters U+10570-U+10595) stay upper-case: TensorFlow's ICU has no lower-case mapping for them;
- about a hundred code points that Unicode 14 leaves unassigned are known to TensorFlow's tables
  as punctuation or marks (U+1B4E, a Balinese punctuation mark, splits a word in-graph only).

Tests check the first list exactly, over every code point that Python assigns.
"""

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from official_bert import tokenization

# Control (Cc) characters but tab, newline and return, which separate words; format (Cf)
# characters; U+FFFD. The original deletes these rather than turning them into spaces, so that a
# soft hyphen or a zero-width joiner inside a word does not split it.
_DELETED_CHARS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\p{Cf}\x{FFFD}]"
# UTF-8 needs at most 4 bytes a character: this limit lets every word of at most 200 characters
# through to WordPiece; longer ones are caught by `_unk_long_words`.
_MAX_BYTES_PER_WORD = 4 * tokenization.MAX_INPUT_CHARS_PER_WORD
_SPECIAL_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


@keras.saving.register_keras_serializable(package="official_bert")
class BertTokenizerLayer(keras.layers.Layer):
  """Maps strings `[batch]` to ragged int32 WordPiece ids `[batch, (tokens)]`, like `FullTokenizer`.

  A SavedModel holding this layer carries its `vocab.txt` in `assets/` (it feeds `ids_to_tokens`);
  the WordPiece model itself is a constant in the graph, so the SavedModel runs without the original
  file.

  Args:
    vocab_file: the `vocab.txt`, one token a line; it must contain `[UNK]`.
    do_lower_case: lower-case and strip accents (the "uncased" models).
    **kwargs: passed to `keras.layers.Layer`.

  Example:

    tokenizer = BertTokenizerLayer("vocab.txt", do_lower_case=True)
    ids = tokenizer(tf.constant(["Hello, world!"]))         # <tf.RaggedTensor [[7592, 1010, ...]]>
    ids_np = tokenizer.tokenize_numpy(["Hello, world!"])    # [array([7592, 1010, ...], int32)]
    flat_ids, row_splits = tokenizer.tokenize_flat_numpy(["Hello, world!", "Bye."])
  """

  def __init__(self, vocab_file, do_lower_case=True, **kwargs):
    super().__init__(**kwargs)
    self.vocab_file = str(vocab_file)
    self.do_lower_case = bool(do_lower_case)
    vocab = tokenization.load_vocab(self.vocab_file)
    if tokenization.UNK_TOKEN not in vocab:
      raise ValueError(
          f"{self.vocab_file} has no {tokenization.UNK_TOKEN} line: WordPiece needs it for words "
          "it cannot split. Use the vocab.txt that came with the checkpoint.")
    tokens = sorted(vocab, key=vocab.get)
    self._vocab_size = len(tokens)
    self._special_ids = {name: vocab.get(token) for name, token in _SPECIAL_TOKENS.items()}
    # The id -> token table reads the file through an initializer, which a SavedModel (from
    # `tf.saved_model.save` or Keras `model.export`) stores as an asset: the vocabulary travels
    # with the model and `ids_to_tokens` works in serving.
    self._id_to_token = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            self.vocab_file, key_dtype=tf.int64, key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            value_dtype=tf.string, value_index=tf.lookup.TextFileIndex.WHOLE_LINE),
        default_value=tokenization.UNK_TOKEN)
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=tokens,
        suffix_indicator="##",
        max_bytes_per_word=_MAX_BYTES_PER_WORD,
        token_out_type=tf.int32,
        unknown_token=tokenization.UNK_TOKEN)
    # A word's first piece never starts with "##" ("#" is punctuation, a word of its own), so this
    # table tells where words begin in the flat list of pieces.
    self._is_continuation = tf.constant([t.startswith("##") for t in tokens], dtype=tf.bool)
    self._numpy_fn = tf.function(
        self._tokenize_batch, input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False)

  @property
  def vocab_size(self):
    """The number of lines of the vocabulary."""
    return self._vocab_size

  def _special_id(self, name):
    index = self._special_ids[name]
    if index is None:
      raise ValueError(f"{self.vocab_file} has no {_SPECIAL_TOKENS[name]} line.")
    return index

  @property
  def pad_id(self):
    """Id of `[PAD]`."""
    return self._special_id("pad")

  @property
  def unk_id(self):
    """Id of `[UNK]`."""
    return self._special_id("unk")

  @property
  def cls_id(self):
    """Id of `[CLS]`."""
    return self._special_id("cls")

  @property
  def sep_id(self):
    """Id of `[SEP]`."""
    return self._special_id("sep")

  @property
  def mask_id(self):
    """Id of `[MASK]`."""
    return self._special_id("mask")

  def _normalize(self, text):
    """Steps 1 and 2 of the module docstring."""
    text = tf.strings.regex_replace(text, _DELETED_CHARS, "")
    if self.do_lower_case:
      # Lower-casing before NFD, as the original: "İ" lower-cases to "i" plus a combining dot.
      text = tf.strings.lower(text, encoding="utf-8")
      text = tf_text.normalize_utf8(text, "NFD")
      text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    return text

  def _unk_long_words(self, text, ids, starts, ends):
    """Replaces the pieces of each word longer than 200 characters by one `[UNK]`."""
    flat_ids = ids.flat_values
    is_word_start = tf.logical_not(tf.gather(self._is_continuation, flat_ids))
    word_index = tf.cumsum(tf.cast(is_word_start, tf.int32)) - 1
    word_begin = tf.boolean_mask(starts.flat_values, is_word_start)
    word_end = tf.math.segment_max(ends.flat_values, word_index)
    word_bytes = word_end - word_begin
    # Bytes bound characters from above, so only the rare words over 200 bytes are measured.
    candidates = tf.where(word_bytes > tokenization.MAX_INPUT_CHARS_PER_WORD)[:, 0]
    word_row = tf.boolean_mask(ids.value_rowids(), is_word_start)
    candidate_text = tf.strings.substr(
        tf.gather(text, tf.gather(word_row, candidates)),
        tf.gather(word_begin, candidates),
        tf.gather(word_bytes, candidates))
    too_long = tf.strings.length(candidate_text, unit="UTF8_CHAR") > (
        tokenization.MAX_INPUT_CHARS_PER_WORD)
    word_too_long = tf.scatter_nd(
        candidates[:, None], too_long, tf.shape(word_bytes, out_type=tf.int64))
    piece_in_long_word = tf.gather(word_too_long, word_index)
    new_ids = tf.where(piece_in_long_word, self.unk_id, flat_ids)
    keep = tf.logical_or(is_word_start, tf.logical_not(piece_in_long_word))
    return tf.ragged.boolean_mask(ids.with_flat_values(new_ids), ids.with_flat_values(keep))

  def call(self, inputs):
    """Tokenizes a string tensor `[batch]` into ragged int32 ids `[batch, (tokens)]`."""
    text = self._normalize(tf.convert_to_tensor(inputs, dtype=tf.string))
    ids, starts, ends = self._wordpiece.tokenize_with_offsets(text)
    return self._unk_long_words(text, ids, starts, ends)

  def _tokenize_batch(self, texts):
    """`call` for offline batches: the long-word rewrite runs only for a batch that needs it.

    Most batches of real text hold no word over 200 characters, and the rewrite is a large
    share of the tokenizer's time; a batch is rewritten when a text holds a run of more than
    200 characters without whitespace, which every such word is.
    """
    text = self._normalize(texts)
    ids, starts, ends = self._wordpiece.tokenize_with_offsets(text)
    long_run = tf.strings.regex_full_match(
        text, rf"(?s).*\S{{{tokenization.MAX_INPUT_CHARS_PER_WORD + 1}}}.*")
    return tf.cond(tf.reduce_any(long_run),
                   lambda: self._unk_long_words(text, ids, starts, ends), lambda: ids)

  def ids_to_tokens(self, ids):
    """Maps ids (a `Tensor` or `RaggedTensor` of ints) to their token strings, in-graph."""
    tokens = tf.ragged.map_flat_values(self._id_to_token.lookup, tf.cast(ids, tf.int64))
    # `load_vocab` strips each line; the table reads whole lines (a CRLF file keeps "\r").
    return tf.ragged.map_flat_values(tf.strings.strip, tokens)

  def tokenize_flat_numpy(self, texts, batch_size=1024):
    """Tokenizes Python strings through a compiled graph, for offline data preparation.

    Args:
      texts: a sequence of `str` or UTF-8 `bytes`.
      batch_size: how many texts go through the graph at once (memory grows with it).

    Returns:
      `(ids, row_splits)`: all ids as one int32 array, and int64 `row_splits` (length
      `len(texts) + 1`) such that the ids of text `i` are `ids[row_splits[i]:row_splits[i + 1]]`.
    """
    ids, lengths = [np.zeros([0], np.int32)], [np.zeros([1], np.int64)]
    for begin in range(0, len(texts), batch_size):
      ragged = self._numpy_fn(tf.constant(texts[begin:begin + batch_size], dtype=tf.string))
      ids.append(ragged.flat_values.numpy())
      lengths.append(ragged.row_lengths().numpy())
    return np.concatenate(ids), np.cumsum(np.concatenate(lengths))

  def tokenize_numpy(self, texts, batch_size=1024):
    """Like `tokenize_flat_numpy`, but returns a list with one int32 array of ids per text."""
    ids, row_splits = self.tokenize_flat_numpy(list(texts), batch_size)
    return np.split(ids, row_splits[1:-1])

  def compute_output_spec(self, inputs):
    batch = inputs.shape[0] if inputs.shape else None
    return keras.KerasTensor((batch, None), dtype="int32", ragged=True)

  def get_config(self):
    config = super().get_config()
    config.update({"vocab_file": self.vocab_file, "do_lower_case": self.do_lower_case})
    return config
