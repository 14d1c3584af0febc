"""In-graph SQuAD serving: (question, context) -> model inputs, and logits -> the answer text.

The context is cut into basic tokens with byte offsets (`tf_text.regex_split_with_offsets`) at the
original tokenizer's whitespace (space, tab, newline, return, Unicode Zs), its punctuation (Unicode
P* and the ASCII symbols) and its CJK ideographs. Each basic token is then WordPiece-tokenized on
its own by `BertTokenizerLayer`; the original tokenizer splits at exactly these places before
WordPiece, so the pieces are the ones `FullTokenizer` gives the whole context, and every piece
knows the bytes of the basic token it came from.

The answer is the best span `start <= end < start + max_answer_length` over the context pieces of
the one window (the question cut to `max_query_length` pieces, the context to what is left of
`max_seq_length`; no document stride). It is returned as whole basic tokens, so a span that begins
or ends inside a word is widened to the word, as `get_final_text` of the original mostly does.
"""

import tensorflow as tf
import tensorflow_text as tf_text

_WHITESPACE = r"[ \t\n\r\p{Zs}]"
# `full_tokenizer._is_punctuation` (ASCII non-alphanumeric symbols and Unicode P*) and
# `full_tokenizer._is_cjk_char`: each such character is a basic token of its own.
_KEPT = (r"[!-/:-@\[-`{-~\p{P}\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}"
         r"\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}"
         r"\x{2F800}-\x{2FA1F}]")


def _gather_per_row(ragged, index, valid):
  """`ragged[b, index[b]]` for each row, 0 where `valid` is False (even for an empty row)."""
  values = tf.concat([ragged.flat_values, tf.zeros([1], ragged.dtype)], axis=0)
  sentinel = tf.shape(ragged.flat_values, out_type=tf.int64)[0]
  flat_index = tf.where(valid, ragged.row_starts() + tf.cast(index, tf.int64), sentinel)
  return tf.gather(values, flat_index)


class SquadInputs:
  """Tokenizes and packs (question, context) string pairs as `run_squad.py` does (one window).

  Args:
    text_packer: a `signatures.TextPacker` (its tokenizer and its packer).
    max_query_length: questions are cut to this many pieces.
  """

  def __init__(self, text_packer, max_query_length):
    self.text_packer = text_packer
    self.max_query_length = max_query_length

  def __call__(self, question, context):
    """Returns `(inputs, layout)`: the encoder inputs and what `best_answer` needs."""
    tokenizer = self.text_packer.tokenizer
    query = tokenizer(question)[:, :self.max_query_length]
    words, word_starts, word_ends = tf_text.regex_split_with_offsets(
        context, f"{_WHITESPACE}|{_KEPT}", _KEPT)
    word_pieces = tokenizer(words.flat_values)
    pieces = words.with_flat_values(word_pieces).merge_dims(1, 2)
    word_of_piece = pieces.with_flat_values(tf.repeat(
        tf.ragged.range(words.row_lengths()).flat_values, word_pieces.row_lengths()))
    # The question first; the context gets what is left ([CLS] and two [SEP] included).
    budget = self.text_packer.seq_length - 3 - query.row_lengths()
    keep = tf.ragged.range(pieces.row_lengths()) < tf.expand_dims(budget, 1)
    pieces = tf.ragged.boolean_mask(pieces, keep)
    inputs = self.text_packer(query, pieces)
    layout = {
        "context_offset": tf.cast(query.row_lengths(), tf.int32) + 2,
        "context_length": tf.cast(pieces.row_lengths(), tf.int32),
        "word_of_piece": tf.ragged.boolean_mask(word_of_piece, keep),
        "word_starts": word_starts,
        "word_ends": word_ends,
    }
    return inputs, layout


def best_answer(context, start_logits, end_logits, layout, max_answer_length):
  """The highest-scoring span `start_logits[s] + end_logits[e]` in the context, as text.

  Args:
    context: the string contexts `[batch]`.
    start_logits, end_logits: float `[batch, seq]`.
    layout: the second result of `SquadInputs`.
    max_answer_length: longest answer, in pieces.

  Returns:
    A dict: `answer_text` string `[batch]`, `answer_start`, `answer_end` int32 `[batch]` in
    Unicode characters of the context (`context[answer_start:answer_end] == answer_text`), and
    `answer_score` float32 `[batch]` (the logit sum); an empty context gives "" at 0 and -inf.
  """
  start_logits = tf.cast(start_logits, tf.float32)
  end_logits = tf.cast(end_logits, tf.float32)
  seq_length = tf.shape(start_logits)[1]
  positions = tf.range(seq_length)
  first = tf.expand_dims(layout["context_offset"], 1)
  in_context = tf.logical_and(positions >= first,
                              positions < first + tf.expand_dims(layout["context_length"], 1))
  length = positions[tf.newaxis, :] - positions[:, tf.newaxis]  # [start, end]
  allowed = tf.logical_and(length >= 0, length < max_answer_length)
  allowed = tf.logical_and(allowed[tf.newaxis],
                           tf.logical_and(in_context[:, :, tf.newaxis],
                                          in_context[:, tf.newaxis, :]))
  scores = tf.where(allowed, start_logits[:, :, tf.newaxis] + end_logits[:, tf.newaxis, :],
                    float("-inf"))
  best = tf.argmax(tf.reshape(scores, [tf.shape(scores)[0], -1]), axis=1, output_type=tf.int32)
  has_answer = layout["context_length"] > 0
  start_piece = best // seq_length - layout["context_offset"]
  end_piece = best % seq_length - layout["context_offset"]

  word_of_piece = layout["word_of_piece"]
  start_word = _gather_per_row(word_of_piece, start_piece, has_answer)
  end_word = _gather_per_row(word_of_piece, end_piece, has_answer)
  begin = _gather_per_row(layout["word_starts"], start_word, has_answer)
  end = _gather_per_row(layout["word_ends"], end_word, has_answer)
  text = tf.strings.substr(context, begin, end - begin)
  answer_start = tf.strings.length(tf.strings.substr(context, tf.zeros_like(begin), begin),
                                   unit="UTF8_CHAR")
  return {
      "answer_text": text,
      "answer_start": answer_start,
      "answer_end": answer_start + tf.strings.length(text, unit="UTF8_CHAR"),
      "answer_score": tf.where(has_answer, tf.reduce_max(scores, axis=[1, 2]), float("-inf")),
  }
