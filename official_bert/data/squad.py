"""SQuAD v1.1 / v2.0: JSON -> examples -> windowed WordPiece features -> TFRecords -> `tf.data`.

The rules are those of the original BERT `run_squad.py`, so features, TFRecords and scores match it:

* the context is split on whitespace (space, tab, CR, LF and U+202F) into `doc_tokens`, and each
  character maps to the whitespace token it belongs to, which turns `answer_start` into token spans;
* each whitespace token is WordPiece-tokenised on its own, so `tok_to_orig_index` maps pieces back;
* a context longer than the room left after `[CLS] question [SEP] ... [SEP]` is cut into windows
  that start `doc_stride` WordPieces apart, and a token is scored only in the window that gives it
  the most context (`min(left, right) + 0.01 * window length`);
* an answer that a window does not fully contain, and every unanswerable v2.0 question, points at
  `[CLS]` (position 0).

Example:

  examples, skipped = read_squad_examples("train-v1.1.json", is_training=True)
  features = convert_examples_to_features(examples, tokenizer, max_seq_length=384, doc_stride=128,
                                          max_query_length=64, is_training=True)
  write_features(features, "train.tf_record", is_training=True)
  dataset = create_squad_dataset("train.tf_record", 384, batch_size=32, is_training=True)
"""

import dataclasses
import json

from absl import logging
import tensorflow as tf

from official_bert.common import file_io, tfrecord_errors
from official_bert.common.errors import UserError

# The original numbers features from here, so its `unique_ids` stay recognisable in TFRecords.
FIRST_UNIQUE_ID = 1000000000
_LOG_EVERY_ARTICLES = 50
_LOG_EVERY_EXAMPLES = 1000
BAD_ANSWER_POLICIES = ("skip", "error")
_IDS_LISTED = 20


class SquadFormatError(UserError):
  """A SQuAD file that is not valid JSON or lacks a field; the message says where."""


@dataclasses.dataclass
class SquadExample:
  """One question about one context.

  Attributes:
    qas_id: the question's `id` in the JSON file.
    question_text: the question.
    doc_tokens: the context split on whitespace (shared by all questions of one paragraph).
    orig_answer_text: the first answer's text (training only; "" for an unanswerable question).
    start_position: index into `doc_tokens` of the answer's first token (training only; -1 when
      unanswerable).
    end_position: index into `doc_tokens` of the answer's last token (inclusive).
    is_impossible: the v2.0 flag: the context holds no answer.
  """
  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: str | None = None
  start_position: int | None = None
  end_position: int | None = None
  is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
  """One window of one example, ready for the model.

  Attributes:
    unique_id: the feature's number, from `FIRST_UNIQUE_ID` up; logits come back keyed by it.
    example_index: position of the example in the list given to `convert_examples_to_features`.
    doc_span_index: which window of the example's context this is.
    tokens: `[CLS] question [SEP] window [SEP]` as WordPiece strings (no padding).
    token_to_orig_map: position in `tokens` -> index into the example's `doc_tokens`, for context
      tokens only.
    token_is_max_context: position in `tokens` -> whether this window gives the token the most
      context.
    input_ids, input_mask, segment_ids: the model inputs, padded with 0 to `max_seq_length`.
    start_position, end_position: the answer's positions in `tokens`; 0 (`[CLS]`) when this window
      does not contain the answer or there is none; None when not training.
    is_impossible: the example's v2.0 flag.
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: list
  token_to_orig_map: dict
  token_is_max_context: dict
  input_ids: list
  input_mask: list
  segment_ids: list
  start_position: int | None = None
  end_position: int | None = None
  is_impossible: bool = False


def _is_whitespace(char):
  # Exactly the original's set: U+202F (narrow no-break space) separates words in some SQuAD
  # contexts, while other Unicode spaces stay inside tokens as they do there.
  return char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F


def split_context(text):
  """Splits a context on whitespace the way the original does.

  Args:
    text: the paragraph's context.

  Returns:
    `(doc_tokens, char_to_word_offset)`: the whitespace tokens, and for every character of `text`
    the index of the token it belongs to (a whitespace character belongs to the token before it).
  """
  doc_tokens, char_to_word_offset = [], []
  previous_is_whitespace = True
  for char in text:
    if _is_whitespace(char):
      previous_is_whitespace = True
    else:
      if previous_is_whitespace:
        doc_tokens.append(char)
      else:
        doc_tokens[-1] += char
      previous_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def _field(record, name, kind, where):
  if not isinstance(record, dict) or name not in record:
    raise SquadFormatError(f"{where}: missing field '{name}'")
  value = record[name]
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    raise SquadFormatError(f"{where}: field '{name}' must be {kind.__name__}, got "
                           f"{type(value).__name__}")
  return value


def _load_json(input_file):
  with tf.io.gfile.GFile(input_file, "r") as f:
    text = f.read()
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise SquadFormatError(f"{input_file}: invalid JSON at line {e.lineno}, column {e.colno} "
                           f"(character {e.pos}): {e.msg}") from None


def check_version(input_file, data, version_2_with_negative):
  """Checks that a SQuAD file is the version the run reads it as.

  A v2.0 file read as v1.1 would drop every `is_impossible` flag: its unanswerable questions
  would be trained towards a span or scored as answerable. A v1.1 file read as v2.0 only lacks
  unanswerable questions, which is worth a warning.

  Args:
    input_file: the file's path, for the messages.
    data: its parsed JSON.
    version_2_with_negative: whether the run reads SQuAD v2.0.

  Raises:
    SquadFormatError: the file declares `"version": "v2.0"` or has `is_impossible` questions, and
      the run reads v1.1.
  """
  declared = data.get("version")
  declares_v2 = _is_v2_version(declared)
  qas = [qa for article in data.get("data") or [] if isinstance(article, dict)
         for paragraph in article.get("paragraphs") or [] if isinstance(paragraph, dict)
         for qa in paragraph.get("qas") or [] if isinstance(qa, dict)]
  impossible = sum(1 for qa in qas if qa.get("is_impossible") is True)
  # A labelled v1.1 file gives every question an answer; v2.0 gives its unanswerable ones none.
  # (A file of questions to predict may have no answers at all: that says nothing.)
  labelled = any(qa.get("answers") for qa in qas)
  unanswered = sum(1 for qa in qas if qa.get("answers") == []) if labelled else 0
  if not version_2_with_negative and (declares_v2 or impossible or unanswered):
    signs = ([f'declares "version": {json.dumps(declared)}'] if declares_v2 else []) + (
        [f"has {impossible} question(s) marked is_impossible"] if impossible else []) + (
        [f"has {unanswered} question(s) with no answer beside answered ones"]
        if unanswered else [])
    raise SquadFormatError(f"{input_file} {' and '.join(signs)}: it is SQuAD v2.0, read here as "
                           "v1.1, which would treat its unanswerable questions as answerable. "
                           "Pass --version_2_with_negative (version_2_with_negative=True).")
  if version_2_with_negative and declared is not None and not declares_v2 and not impossible:
    logging.warning("%s declares version %r and has no unanswerable question, but is read as "
                    "SQuAD v2.0 (--version_2_with_negative).", input_file, declared)


def _is_v2_version(declared):
  """Whether a `version` field names SQuAD 2: `v2.0` as released, or `2.0`, `2`, `V2.0`."""
  text = str(declared).strip().lower().removeprefix("v") if declared is not None else ""
  return text == "2" or text.startswith("2.")


def read_squad_examples(input_file, is_training, version_2_with_negative=False,
                        bad_answer_policy="skip"):
  """Reads a SQuAD JSON file into `SquadExample`s.

  For training each answerable question must have exactly one answer, and its text must stand at
  its `answer_start` in the context (whitespace runs count as one space) and be found in the
  whitespace tokens there, as the original requires. A question whose answer is not there has a
  wrong `answer_start` and would train the model towards another span: it is skipped, counted
  and logged by id (`bad_answer_policy="skip"`, the original's choice), or stops the run
  (`"error"`).

  Args:
    input_file: path of a SQuAD v1.1 or v2.0 JSON file.
    is_training: read the answers (needed for training features).
    version_2_with_negative: read each question's `is_impossible` flag (SQuAD v2.0); checked
      against the file (`check_version`).
    bad_answer_policy: `skip` or `error` for training answers that are not at `answer_start`.

  Returns:
    `(examples, skipped_qas_ids)`: the examples in file order, and the ids of the questions skipped
    because their answer was not found.

  Raises:
    SquadFormatError: invalid JSON (with line and column), a missing or wrong field, naming the
      article (index and title), paragraph index and question id; a v2.0 file read as v1.1; with
      `bad_answer_policy="error"`, answers not at their `answer_start`.
  """
  if bad_answer_policy not in BAD_ANSWER_POLICIES:
    raise ValueError(f"bad_answer_policy must be one of {BAD_ANSWER_POLICIES}, got "
                     f"{bad_answer_policy!r}.")
  data = _load_json(input_file)
  articles = _field(data, "data", list, f"{input_file}: top level")
  check_version(input_file, data, version_2_with_negative)
  examples, skipped = [], []
  for article_index, article in enumerate(articles):
    title = article.get("title", "") if isinstance(article, dict) else ""
    article_where = f"{input_file}: article {article_index} ('{title}')"
    paragraphs = _field(article, "paragraphs", list, article_where)
    for paragraph_index, paragraph in enumerate(paragraphs):
      paragraph_where = f"{article_where}, paragraph {paragraph_index}"
      context = _field(paragraph, "context", str, paragraph_where)
      if not context.strip() and paragraph.get("qas"):
        # No token to answer from: its questions would get no feature and no prediction.
        raise SquadFormatError(f"{paragraph_where}: the context is empty, but the paragraph has "
                               "questions")
      doc_tokens, char_to_word_offset = split_context(context)
      for qa_index, qa in enumerate(_field(paragraph, "qas", list, paragraph_where)):
        where = f"{paragraph_where}, question {qa_index}"
        qas_id = _field(qa, "id", str, where)
        where = f"{paragraph_where}, question '{qas_id}'"
        example = SquadExample(qas_id, _field(qa, "question", str, where), doc_tokens)
        if is_training:
          if not _read_answer(example, qa, context, char_to_word_offset, version_2_with_negative,
                              where):
            skipped.append(qas_id)
            continue
        examples.append(example)
    if (article_index + 1) % _LOG_EVERY_ARTICLES == 0:
      logging.info("Read %d of %d articles (%d questions)", article_index + 1, len(articles),
                   len(examples))
  if skipped:
    listed = ", ".join(skipped[:_IDS_LISTED]) + (", ..." if len(skipped) > _IDS_LISTED else "")
    message = (f"{input_file}: {len(skipped)} training answer(s) are not at their answer_start "
               f"(question ids {listed})")
    if bad_answer_policy == "error":
      raise SquadFormatError(f"{message}. Fix their answer_start, or skip them "
                             "(--bad_answer_policy=skip).")
    logging.warning("%s: skipped.", message)
  logging.info("Read %d questions from %s; skipped %d whose answer was not found in the context",
               len(examples), input_file, len(skipped))
  return examples, skipped


def _read_answer(example, qa, context, char_to_word_offset, version_2_with_negative, where):
  """Fills the answer fields of `example`; False when the answer text is not where it should be."""
  if version_2_with_negative:
    example.is_impossible = _field(qa, "is_impossible", bool, where)
  answers = _field(qa, "answers", list, where)
  if example.is_impossible:
    example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
    return True
  if len(answers) != 1:
    raise SquadFormatError(f"{where}: for training, each question must have exactly 1 answer, "
                           f"found {len(answers)}")
  answer_where = f"{where}, answer 0"
  text = _field(answers[0], "text", str, answer_where)
  answer_start = _field(answers[0], "answer_start", int, answer_where)
  answer_end = answer_start + len(text) - 1
  if not text.strip():
    raise SquadFormatError(f"{answer_where}: the answer text is empty")
  if answer_start < 0 or answer_end >= len(context):
    raise SquadFormatError(f"{answer_where}: answer_start {answer_start} with a {len(text)}-"
                           f"character answer is outside the {len(context)}-character context")
  example.orig_answer_text = text
  example.start_position = char_to_word_offset[answer_start]
  example.end_position = char_to_word_offset[answer_end]
  cleaned_answer_text = " ".join(text.split())
  # The text at answer_start must be the answer: the token check below alone keeps an offset that
  # is a few characters off when the tokens it lands on still contain the answer (a space before
  # the answer maps to the previous word), and the label would then be another span.
  at_start = context[answer_start:answer_start + 2 * len(text) + 1]
  if at_start[:1] != text[:1] or not " ".join(at_start.split()).startswith(cleaned_answer_text):
    logging.warning("%s: the text at answer_start %d is %r, not the answer %r", where,
                    answer_start, context[answer_start:answer_end + 1], text)
    return False
  # Only answers recoverable from the whitespace tokens are usable as labels; differences such as
  # an answer that starts or ends inside a word are fine, misplaced offsets are not.
  actual_text = " ".join(example.doc_tokens[example.start_position:example.end_position + 1])
  if example.start_position < 0 or cleaned_answer_text not in actual_text:
    logging.warning("%s: could not find answer: '%s' vs. '%s'", where, actual_text,
                    cleaned_answer_text)
    return False
  return True


def _improve_answer_span(doc_tokens, start, end, tokenizer, orig_answer_text):
  """Narrows a whitespace-token span to the WordPieces that spell exactly the answer.

  The answer "1895" inside the whitespace token "(1895-1943)." is the WordPiece "1895" alone; the
  whitespace span would also take the brackets and the other year.
  """
  answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == answer_text:
        return new_start, new_end
  return start, end


def _doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """The windows `(start, length)` over `num_tokens` WordPieces of context."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def _is_max_context(spans, span_index, position):
  """Whether window `span_index` gives the token at `position` more context than any other."""
  best_score, best_index = None, None
  for index, (start, length) in enumerate(spans):
    end = start + length - 1
    if start <= position <= end:
      score = min(position - start, end - position) + 0.01 * length
      if best_score is None or score > best_score:
        best_score, best_index = score, index
  return span_index == best_index


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                 is_training):
  """Turns examples into windowed features (a generator, so training sets can stream to disk).

  Args:
    examples: `SquadExample`s from `read_squad_examples`.
    tokenizer: a `FullTokenizer` (`tokenize`, `convert_tokens_to_ids`).
    max_seq_length: length of every feature, `[CLS]` and both `[SEP]` included.
    doc_stride: distance in WordPieces between the starts of consecutive windows.
    max_query_length: questions are cut to this many WordPieces.
    is_training: set `start_position` / `end_position` from the examples' answers.

  Yields:
    `InputFeatures`, with `unique_id` counting up from `FIRST_UNIQUE_ID`.
  """
  unique_id = FIRST_UNIQUE_ID
  cached_doc_tokens = None
  for example_index, example in enumerate(examples):
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    if max_tokens_for_doc <= 0:
      raise ValueError(f"max_seq_length {max_seq_length} leaves no room for the context after a "
                       f"{len(query_tokens)}-token question; raise it above max_query_length + 3")
    # The questions of one paragraph share their `doc_tokens`; tokenise the context once for them.
    if example.doc_tokens is not cached_doc_tokens:
      cached_doc_tokens = example.doc_tokens
      tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
      for orig_index, token in enumerate(example.doc_tokens):
        orig_to_tok_index.append(len(all_doc_tokens))
        for sub_token in tokenizer.tokenize(token):
          tok_to_orig_index.append(orig_index)
          all_doc_tokens.append(sub_token)

    tok_start = tok_end = None
    if is_training and example.is_impossible:
      tok_start = tok_end = -1
    elif is_training:
      tok_start = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end = len(all_doc_tokens) - 1
      tok_start, tok_end = _improve_answer_span(all_doc_tokens, tok_start, tok_end, tokenizer,
                                                example.orig_answer_text)

    spans = _doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    for span_index, (span_start, span_length) in enumerate(spans):
      tokens = ["[CLS]", *query_tokens, "[SEP]"]
      segment_ids = [0] * len(tokens)
      token_to_orig_map, token_is_max_context = {}, {}
      for split_index in range(span_start, span_start + span_length):
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_index]
        token_is_max_context[len(tokens)] = _is_max_context(spans, span_index, split_index)
        tokens.append(all_doc_tokens[split_index])
      tokens.append("[SEP]")
      segment_ids += [1] * (span_length + 1)
      input_ids = tokenizer.convert_tokens_to_ids(tokens)
      padding = [0] * (max_seq_length - len(input_ids))
      input_mask = [1] * len(input_ids) + padding

      start_position = end_position = None
      if is_training:
        start_position = end_position = 0
        span_end = span_start + span_length - 1
        if not example.is_impossible and span_start <= tok_start and tok_end <= span_end:
          doc_offset = len(query_tokens) + 2
          start_position = tok_start - span_start + doc_offset
          end_position = tok_end - span_start + doc_offset

      yield InputFeatures(unique_id, example_index, span_index, tokens, token_to_orig_map,
                          token_is_max_context, input_ids + padding, input_mask,
                          segment_ids + padding, start_position, end_position,
                          example.is_impossible)
      unique_id += 1
    if (example_index + 1) % _LOG_EVERY_EXAMPLES == 0:
      logging.info("Converted %d of %d examples into %d features", example_index + 1,
                   len(examples), unique_id - FIRST_UNIQUE_ID)
  logging.info("Converted %d examples into %d features", len(examples),
               unique_id - FIRST_UNIQUE_ID)


def _int64_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def write_features(features, output_file, is_training):
  """Writes features as `tf.train.Example`s with the original BERT feature names.

  Every record has `unique_ids`, `input_ids`, `input_mask`, `segment_ids`; training records also
  have `start_positions`, `end_positions` and `is_impossible` (all int64). The file appears only
  when complete (written under a temporary name, then renamed).

  Args:
    features: an iterable of `InputFeatures` (e.g. the generator `convert_examples_to_features`).
    output_file: the TFRecord file to write.
    is_training: write the answer positions.

  Returns:
    The number of records written.
  """
  count = 0
  with file_io.atomic_path(output_file) as temporary, tf.io.TFRecordWriter(temporary) as writer:
    for feature in features:
      record = {"unique_ids": _int64_feature([feature.unique_id]),
                "input_ids": _int64_feature(feature.input_ids),
                "input_mask": _int64_feature(feature.input_mask),
                "segment_ids": _int64_feature(feature.segment_ids)}
      if is_training:
        if feature.start_position is None:
          raise ValueError(f"feature {feature.unique_id} has no answer position; make training "
                           "features with convert_examples_to_features(..., is_training=True)")
        record["start_positions"] = _int64_feature([feature.start_position])
        record["end_positions"] = _int64_feature([feature.end_position])
        record["is_impossible"] = _int64_feature([int(feature.is_impossible)])
      writer.write(tf.train.Example(features=tf.train.Features(feature=record))
                   .SerializeToString())
      count += 1
  logging.info("Wrote %d features to %s", count, output_file)
  return count


def create_squad_dataset(file_pattern, seq_length, batch_size, is_training, shuffle_buffer_size=100,
                         input_context=None):
  """A `tf.data.Dataset` of batches read from SQuAD TFRecords.

  Args:
    file_pattern: TFRecord file(s) written by `write_features` (a glob pattern or a list).
    seq_length: the `max_seq_length` the features were made with.
    batch_size: examples per batch (per replica when `input_context` is given).
    is_training: shuffle, repeat forever, drop the last partial batch and read the answer labels.
    shuffle_buffer_size: records held for shuffling when training (100 in the original).
    input_context: a `tf.distribute.InputContext`; each input pipeline then reads its own shard.

  Returns:
    A dataset of `(inputs, labels)`: `inputs` holds int32 `[batch, seq_length]` tensors
    `input_word_ids`, `input_mask`, `input_type_ids`; for training `labels` holds int32 `[batch]`
    `start_positions`, `end_positions`, `is_impossible`, otherwise int64 `[batch]` `unique_ids` (the
    key that joins logits to features in post-processing).
  """
  files = file_io.expand_globs(file_pattern, what="SQuAD TFRecord file")
  name_to_features = {"unique_ids": tf.io.FixedLenFeature([], tf.int64)}
  for name in ("input_ids", "input_mask", "segment_ids"):
    name_to_features[name] = tf.io.FixedLenFeature([seq_length], tf.int64)
  if is_training:
    for name in ("start_positions", "end_positions", "is_impossible"):
      name_to_features[name] = tf.io.FixedLenFeature([], tf.int64)

  def parse(serialized):
    record = tf.io.parse_single_example(serialized, name_to_features)
    inputs = {"input_word_ids": tf.cast(record["input_ids"], tf.int32),
              "input_mask": tf.cast(record["input_mask"], tf.int32),
              "input_type_ids": tf.cast(record["segment_ids"], tf.int32)}
    if is_training:
      labels = {name: tf.cast(record[name], tf.int32)
                for name in ("start_positions", "end_positions", "is_impossible")}
    else:
      labels = {"unique_ids": record["unique_ids"]}
    return inputs, labels

  tfrecord_errors.note_tfrecord_files(files)
  dataset = tf.data.TFRecordDataset(files)
  if input_context is not None:
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size).repeat()
  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.batch(batch_size, drop_remainder=is_training).prefetch(tf.data.AUTOTUNE)
