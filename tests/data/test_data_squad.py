"""SQuAD reading, windowed features, TFRecords, and the round trip to answers and back."""

import json

import numpy as np
import pytest
import tensorflow as tf

from official_bert.data import squad
from official_bert.evaluation import squad_evaluate, squad_postprocessing
from official_bert.tokenization import BasicTokenizer, FullTokenizer

from testing import SPECIAL_TOKENS, shared_data, tiny_tokenizer


def _tokenizer(tmp_path, words):
  return tiny_tokenizer(tmp_path / "vocab.txt", SPECIAL_TOKENS[:4] + list(dict.fromkeys(words)))


def _squad_file(tmp_path, paragraphs, name="data.json", title="Test"):
  path = tmp_path / name
  path.write_text(json.dumps({"version": "1.1", "data": [{"title": title,
                                                          "paragraphs": paragraphs}]}))
  return str(path)


def _qa(qas_id, question, context, answer, occurrence=0, **extra):
  start = -1
  for _ in range(occurrence + 1):
    start = context.index(answer, start + 1)
  return {"id": qas_id, "question": question,
          "answers": [{"text": answer, "answer_start": start}], **extra}


def test_split_context_uses_the_original_whitespace():
  tokens, offsets = squad.split_context(" The cat\u202fsat  on\tthe mat.")
  assert tokens == ["The", "cat", "sat", "on", "the", "mat."]
  # A leading space belongs to no token; later whitespace belongs to the token before it.
  assert offsets[:6] == [-1, 0, 0, 0, 0, 1]
  assert offsets[8] == 1 and offsets[9] == 2 and offsets[13] == 2 and offsets[14] == 3


def test_read_examples_positions_and_counted_skips(tmp_path):
  context = "The bobcat sat on the mat.  It was born (1895-1943)."
  paragraphs = [{"context": context, "qas": [
      _qa("inside", "What sat?", context, "cat"),
      _qa("year", "When?", context, "1895"),
      # Offsets that point at the wrong words: the original drops such a question.
      {"id": "wrong", "question": "Where?", "answers": [{"text": "mat", "answer_start": 0}]},
  ]}]
  path = _squad_file(tmp_path, paragraphs)
  examples, skipped = squad.read_squad_examples(path, is_training=True)
  assert skipped == ["wrong"]
  assert [e.qas_id for e in examples] == ["inside", "year"]
  assert examples[0].doc_tokens == ["The", "bobcat", "sat", "on", "the", "mat.", "It", "was",
                                    "born", "(1895-1943)."]
  assert (examples[0].start_position, examples[0].end_position) == (1, 1)
  assert (examples[1].start_position, examples[1].end_position) == (9, 9)
  assert examples[1].orig_answer_text == "1895"
  # Evaluation reads no answers, so nothing is skipped.
  examples, skipped = squad.read_squad_examples(path, is_training=False)
  assert len(examples) == 3 and skipped == [] and examples[2].start_position is None


def test_read_version_2_unanswerable(tmp_path):
  context = "The cat sat."
  paragraphs = [{"context": context, "qas": [
      {"id": "none", "question": "Why?", "answers": [], "is_impossible": True},
      _qa("cat", "Who sat?", context, "cat", is_impossible=False)]}]
  path = _squad_file(tmp_path, paragraphs)
  examples, _ = squad.read_squad_examples(path, True, version_2_with_negative=True)
  assert examples[0].is_impossible and examples[0].start_position == -1
  assert examples[0].orig_answer_text == ""
  assert not examples[1].is_impossible and examples[1].start_position == 1


@pytest.mark.parametrize("paragraphs, is_training, version_2, message", [
    ([{"context": "x", "qas": []}, {"qas": []}], False, False,
     "article 0 ('Test'), paragraph 1: missing field 'context'"),
    ([{"context": "a cat", "qas": [{"id": "q1", "question": "?",
                                    "answers": [{"text": "cat", "answer_start": 500}]}]}],
     True, False, "paragraph 0, question 'q1', answer 0: answer_start 500 with a 3-character"),
    ([{"context": "a cat", "qas": [{"id": "q1", "question": "?",
                                    "answers": [{"text": "cat", "answer_start": "2"}]}]}],
     True, False, "question 'q1', answer 0: field 'answer_start' must be int, got str"),
    ([{"context": "a cat", "qas": [{"id": "q2", "question": "?", "answers": [
        {"text": "cat", "answer_start": 2}, {"text": "a", "answer_start": 0}]}]}],
     True, False, "question 'q2': for training, each question must have exactly 1 answer"),
    ([{"context": "a cat", "qas": [{"id": "q3", "question": "?", "answers": []}]}],
     True, True, "question 'q3': missing field 'is_impossible'"),
    ([{"context": "a cat", "qas": [{"question": "?", "answers": []}]}],
     False, False, "paragraph 0, question 0: missing field 'id'"),
])
def test_malformed_files_name_the_place(tmp_path, paragraphs, is_training, version_2, message):
  path = _squad_file(tmp_path, paragraphs)
  with pytest.raises(squad.SquadFormatError) as error:
    squad.read_squad_examples(path, is_training, version_2)
  assert path in str(error.value) and message in str(error.value)


def test_invalid_json_names_file_and_position(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"data": [\n  {"title": "x",,}]}')
  with pytest.raises(squad.SquadFormatError, match=r"broken.json: invalid JSON at line 2, col"):
    squad.read_squad_examples(str(path), is_training=False)


def test_answer_is_realigned_to_wordpieces(tmp_path):
  tokenizer = _tokenizer(tmp_path, ["he", "was", "born", "(", ")", "-", ".", "1895", "19", "##43",
                                    "what", "year", "?"])
  context = "He was born (1895-1943)."
  path = _squad_file(tmp_path, [{"context": context,
                                 "qas": [_qa("q", "What year was he born?", context, "1895")]}])
  examples, _ = squad.read_squad_examples(path, is_training=True)
  (feature,) = squad.convert_examples_to_features(examples, tokenizer, 32, 8, 16, True)
  assert feature.tokens == ["[CLS]", "what", "year", "was", "he", "born", "?", "[SEP]", "he", "was",
                            "born", "(", "1895", "-", "19", "##43", ")", ".", "[SEP]"]
  # The whitespace token "(1895-1943)." spans pieces 11-17; the answer is piece 12 alone.
  assert (feature.start_position, feature.end_position) == (12, 12)
  assert feature.token_to_orig_map == {8: 0, 9: 1, 10: 2, **{i: 3 for i in range(11, 18)}}
  assert feature.segment_ids[:19] == [0] * 8 + [1] * 11 and feature.segment_ids[19:] == [0] * 13
  assert feature.input_mask == [1] * 19 + [0] * 13
  assert feature.input_ids[:3] == [2, 14, 15] and len(feature.input_ids) == 32


def _window_examples(tmp_path):
  words = [f"w{i}" for i in range(14)]
  tokenizer = _tokenizer(tmp_path, words + ["q"])
  context = " ".join(words)
  path = _squad_file(tmp_path, [{"context": context, "qas": [
      _qa("one", "q", context, "w7"), _qa("two", "q", context, "w12 w13")]}])
  return squad.read_squad_examples(path, is_training=True)[0], tokenizer


def test_windows_max_context_and_positions(tmp_path):
  examples, tokenizer = _window_examples(tmp_path)
  # 10 = [CLS] q [SEP] + 6 context pieces + [SEP]; windows start 3 apart: 0-5, 3-8, 6-11, 9-13.
  features = list(squad.convert_examples_to_features(examples, tokenizer, 10, 3, 8, True))
  assert len(features) == 8
  first = features[:4]
  assert [f.unique_id for f in features] == list(range(1000000000, 1000000008))
  assert [f.doc_span_index for f in first] == [0, 1, 2, 3]
  assert [f.example_index for f in features] == [0] * 4 + [1] * 4
  assert first[1].tokens == ["[CLS]", "q", "[SEP]", "w3", "w4", "w5", "w6", "w7", "w8", "[SEP]"]
  assert first[3].input_mask == [1] * 9 + [0]
  # Hand-computed: piece 4 ties between windows 0 and 1 (1 + 0.06 each) and the first wins;
  # piece 10 has 1 + 0.06 in window 2 against 1 + 0.05 in the shorter window 3.
  expected = [[True] * 5 + [False], [False, False, True, True, True, False],
              [False, False, True, True, True, False], [False, False, True, True, True]]
  for feature, flags in zip(first, expected):
    assert [feature.token_is_max_context[p] for p in sorted(feature.token_is_max_context)] == flags
  # "w7" (piece 7) lies in windows 1 and 2; elsewhere the label is [CLS].
  assert [(f.start_position, f.end_position) for f in first] == [(0, 0), (7, 7), (4, 4), (0, 0)]
  assert [(f.start_position, f.end_position) for f in features[4:]] == [(0, 0)] * 3 + [(6, 7)]
  # A stride longer than a window steps by the window, so no context piece is left out.
  features = squad.convert_examples_to_features(examples[:1], tokenizer, 10, 100, 8, False)
  assert [f.tokens[3:-1] for f in features] == [[f"w{i}" for i in range(start, min(start + 6, 14))]
                                                for start in (0, 6, 12)]


def test_tfrecord_round_trip_and_dataset(tmp_path):
  examples, tokenizer = _window_examples(tmp_path)
  examples[1].is_impossible = True
  examples[1].question_text = "w0 q"
  features = list(squad.convert_examples_to_features(examples, tokenizer, 10, 3, 8, True))
  path = str(tmp_path / "train.tf_record")
  assert squad.write_features(features, path, is_training=True) == 8
  assert not tf.io.gfile.exists(path + ".tmp")

  record = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(path))).numpy())
  assert sorted(record.features.feature) == ["end_positions", "input_ids", "input_mask",
                                             "is_impossible", "segment_ids", "start_positions",
                                             "unique_ids"]
  inputs, labels = next(iter(squad.create_squad_dataset(path, 10, 8, is_training=False)))
  assert sorted(labels) == ["unique_ids"]
  np.testing.assert_array_equal(labels["unique_ids"], [f.unique_id for f in features])
  assert all(tensor.dtype == tf.int32 for tensor in inputs.values())
  np.testing.assert_array_equal(inputs["input_word_ids"], [f.input_ids for f in features])
  np.testing.assert_array_equal(inputs["input_mask"], [f.input_mask for f in features])
  np.testing.assert_array_equal(inputs["input_type_ids"], [f.segment_ids for f in features])

  inputs, labels = next(iter(squad.create_squad_dataset(path, 10, 16, is_training=True)))
  assert inputs["input_word_ids"].shape == (16, 10) and labels["start_positions"].dtype == tf.int32
  by_id = {tuple(f.input_ids): f for f in features}
  for i in range(16):
    feature = by_id[tuple(inputs["input_word_ids"][i].numpy())]
    assert labels["start_positions"][i] == feature.start_position
    assert labels["end_positions"][i] == feature.end_position
    assert labels["is_impossible"][i] == int(feature.is_impossible)


def test_training_records_need_positions(tmp_path):
  examples, tokenizer = _window_examples(tmp_path)
  features = squad.convert_examples_to_features(examples, tokenizer, 10, 3, 8, False)
  path = str(tmp_path / "bad.tf_record")
  with pytest.raises(ValueError, match="no answer position"):
    squad.write_features(features, path, is_training=True)
  assert not tf.io.gfile.exists(path) and not tf.io.gfile.exists(path + ".tmp")


def _round_trip(examples, tokenizer, max_seq_length, doc_stride):
  """Makes logits that pick each labelled span and post-processes them back into text.

  Returns:
    `(features, predictions, exact, normalised, subword)`: the questions whose prediction is the
    gold text exactly and after normalisation, and the questions whose gold text is only part of a
    WordPiece ("gold" inside "golden"), which no span of WordPieces can spell.
  """
  features = list(squad.convert_examples_to_features(examples, tokenizer, max_seq_length,
                                                     doc_stride, 24, True))
  results, spelled = [], set()
  for feature in features:
    start_logits, end_logits = np.zeros(max_seq_length), np.zeros(max_seq_length)
    if feature.start_position > 0:
      start_logits[feature.start_position] = end_logits[feature.end_position] = 10.0
      example = examples[feature.example_index]
      if (feature.tokens[feature.start_position:feature.end_position + 1] ==
          tokenizer.tokenize(example.orig_answer_text)):
        spelled.add(example.qas_id)
    results.append(squad_postprocessing.RawResult(feature.unique_id, start_logits, end_logits))
  predictions, _, _ = squad_postprocessing.postprocess_predictions(
      examples, features, results, n_best_size=20, max_answer_length=64, do_lower_case=True)
  normalize = squad_evaluate.normalize_answer
  exact = [e.qas_id for e in examples if predictions[e.qas_id] == e.orig_answer_text]
  normalised = [e.qas_id for e in examples
                if normalize(predictions[e.qas_id]) == normalize(e.orig_answer_text)]
  subword = [e.qas_id for e in examples if e.qas_id not in spelled]
  return features, predictions, exact, normalised, subword


ARTICLE = [
    "The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third Super Bowl title. "
    "The game was played on February 7, 2016, at Levi's Stadium in Santa Clara, California.",
    "Nikola Tesla (1856-1943) was a Serbian-American inventor. He is best known for his "
    "contributions to the design of the modern alternating current (AC) electricity supply system.",
    "Football, also called soccer, is played between two teams of eleven players. The Zoë Cup was "
    "first held in Montevideo; Uruguay won it, beating Argentina 4-2 in the final.",
]
QUESTIONS = [
    (0, "Who won?", "Denver Broncos"), (0, "What score?", "24-10"),
    (0, "When?", "February 7, 2016"),
    (0, "Where was the game?", "Levi's Stadium"), (0, "Which state?", "California"),
    (0, "Whose stadium?", "Levi"), (1, "Born when?", "1856"), (1, "Nationality?", "Serbian"),
    (1, "What current?", "alternating current"), (1, "Abbreviation?", "AC"),
    (1, "Design of what?", "modern alternating current (AC) electricity supply system"),
    (2, "Other name?", "soccer"), (2, "How many players?", "eleven"), (2, "Which cup?", "Zoë Cup"),
    (2, "Where first held?", "Montevideo"), (2, "Score of the final?", "4-2"),
    (2, "Who lost?", "Argentina"), (2, "What sport?", "Football"),
    (2, "First half of the name?", "Foot"),
]


def test_round_trip_on_a_written_article(tmp_path):
  paragraphs = [{"context": text, "qas": [_qa(f"q{i}", question, text, answer)
                                          for i, (p, question, answer) in enumerate(QUESTIONS)
                                          if p == index]}
                for index, text in enumerate(ARTICLE)]
  text = " ".join(ARTICLE + [question for _, question, _ in QUESTIONS])
  words = BasicTokenizer(do_lower_case=True).tokenize(text)
  # A few words only as WordPieces, so answers must be re-aligned and de-tokenised.
  words = [w for w in words if w not in ("football", "1943", "electricity", "montevideo")]
  tokenizer = _tokenizer(tmp_path, words + ["foot", "##ball", "19", "##43", "electric", "##ity",
                                            "monte", "##video"])
  examples, skipped = squad.read_squad_examples(_squad_file(tmp_path, paragraphs), True)
  assert skipped == [] and len(examples) == len(QUESTIONS)
  features, _, exact, normalised, subword = _round_trip(examples, tokenizer, 32, 8)
  assert len(features) > 2 * len(examples)
  assert subword == []
  assert len(normalised) == len(exact) == len(examples)


def test_round_trip_on_the_first_dev_article(tmp_path):
  dev = json.loads(shared_data("squad/dev-v1.1.json").read_text())
  article = dev["data"][0]
  for paragraph in article["paragraphs"]:
    for qa in paragraph["qas"]:
      qa["answers"] = qa["answers"][:1]
  path = _squad_file(tmp_path, article["paragraphs"], title=article["title"])
  tokenizer = FullTokenizer(str(shared_data("vocab/bert-base-uncased-vocab.txt")), True)
  examples, skipped = squad.read_squad_examples(path, is_training=True)
  assert len(examples) + len(skipped) == 810
  features, predictions, exact, normalised, subword = _round_trip(examples, tokenizer, 96, 32)
  assert len(features) > 3 * len(examples)
  # 16 gold answers are parts of WordPieces ("gold" in '"golden', "8" in "20–18"); the original
  # pipeline labels the whole word, and that is what comes back.
  assert len(subword) == 16
  by_id = {e.qas_id: e for e in examples}
  assert all(by_id[qas_id].orig_answer_text in predictions[qas_id] for qas_id in subword)
  assert set(normalised) == set(exact) == set(by_id) - set(subword)
