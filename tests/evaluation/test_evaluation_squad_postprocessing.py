"""SQuAD post-processing: n-best spans, answer text projection, v2.0 null answers, output files."""

import json
import math

import pytest

from official_bert.data.squad import InputFeatures, SquadExample
from official_bert.evaluation import squad_postprocessing
from official_bert.evaluation.squad_postprocessing import RawResult, get_final_text

LOW = -10.0


@pytest.mark.parametrize("pred_text, orig_text, do_lower_case, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("1895", "(1895-1943).", True, "1895"),
    ("zoe cup", "Zoë Cup,", True, "Zoë Cup"),
    ("Steve", "Steve's", False, "Steve"),
    # Not found in the tokenised original: the whole original text, as the original script does.
    ("dog", "Steve", True, "Steve"),
    # A decomposed accent: stripping it changes the length, so alignment fails.
    ("zoe", "Zoe\u0308's", True, "Zoe\u0308's"),
])
def test_get_final_text(pred_text, orig_text, do_lower_case, expected):
  assert get_final_text(pred_text, orig_text, do_lower_case) == expected


def _example_and_feature(unique_id=7, example_index=0, max_context=None):
  example = SquadExample("q1", "Who?", ["Steve", "Smith's", "dog", "barked."])
  tokens = ["[CLS]", "who", "[SEP]", "steve", "smith", "'", "s", "dog", "bark", "##ed", ".",
            "[SEP]"]
  token_to_orig_map = {3: 0, 4: 1, 5: 1, 6: 1, 7: 2, 8: 3, 9: 3, 10: 3}
  max_context = max_context or {}
  feature = InputFeatures(unique_id, example_index, 0, tokens, token_to_orig_map,
                          {i: max_context.get(i, True) for i in token_to_orig_map},
                          [0] * 12, [1] * 12, [0] * 12)
  return example, feature


def _logits(values, length=12):
  logits = [LOW] * length
  for index, value in values.items():
    logits[index] = value
  return logits


def _result(feature, starts, ends):
  return RawResult(feature.unique_id, _logits(starts), _logits(ends))


def test_nbest_keeps_only_valid_spans():
  example, feature = _example_and_feature()
  # Start candidates: 1 (question), 8 ("bark"), 3 ("steve"); ends: 2 ([SEP]), 4 ("smith"), 9.
  result = _result(feature, {1: 9.0, 8: 8.0, 3: 5.0}, {2: 9.0, 4: 7.0, 9: 6.0})
  predictions, nbest, null_odds = squad_postprocessing.postprocess_predictions(
      [example], [feature], [result], n_best_size=3, max_answer_length=6, do_lower_case=True)
  # Valid: (8, 9) = 14 and (3, 4) = 12; (3, 9) is 7 pieces long, (8, 4) ends before it starts.
  assert [entry["text"] for entry in nbest["q1"]] == ["barked", "Steve Smith"]
  assert [entry["start_logit"] + entry["end_logit"] for entry in nbest["q1"]] == [14.0, 12.0]
  assert nbest["q1"][0]["probability"] == pytest.approx(1 / (1 + math.exp(-2)))
  assert sum(entry["probability"] for entry in nbest["q1"]) == pytest.approx(1.0)
  assert predictions == {"q1": "barked"} and null_odds == {}

  _, nbest, _ = squad_postprocessing.postprocess_predictions(
      [example], [feature], [result], n_best_size=3, max_answer_length=7, do_lower_case=True)
  assert [entry["text"] for entry in nbest["q1"]] == ["barked", "Steve Smith",
                                                      "Steve Smith's dog barked"]


def test_start_must_have_its_max_context():
  example, feature = _example_and_feature(max_context={8: False})
  result = _result(feature, {8: 8.0, 3: 5.0}, {4: 7.0, 9: 6.0})
  predictions, _, _ = squad_postprocessing.postprocess_predictions(
      [example], [feature], [result], n_best_size=3, max_answer_length=6, do_lower_case=True)
  assert predictions == {"q1": "Steve Smith"}


def test_duplicate_texts_are_dropped_and_the_empty_nonce():
  # Every span inside "Zoe\u0308's" falls back to the whole word: one n-best entry for three spans.
  example = SquadExample("q1", "Who?", ["Zoe\u0308's", "dog"])
  tokens = ["[CLS]", "who", "[SEP]", "zoe", "'", "s", "dog", "[SEP]"]
  feature = InputFeatures(3, 0, 0, tokens, {3: 0, 4: 0, 5: 0, 6: 1}, {3: True, 4: True, 5: True,
                                                                      6: True}, [0] * 8, [1] * 8,
                          [0] * 8)
  result = RawResult(3, _logits({3: 3.0, 4: 2.0}, 8), _logits({5: 3.0, 3: 1.0}, 8))
  predictions, nbest, _ = squad_postprocessing.postprocess_predictions(
      [example], [feature], [result], n_best_size=4, max_answer_length=5, do_lower_case=True)
  assert predictions == {"q1": "Zoe\u0308's"}
  assert [entry["text"] for entry in nbest["q1"]] == ["Zoe\u0308's"]
  assert nbest["q1"][0]["probability"] == 1.0
  # No span is valid when no context token has its max context here.
  feature.token_is_max_context = {i: False for i in range(3, 7)}
  predictions, nbest, _ = squad_postprocessing.postprocess_predictions(
      [example], [feature], [result], n_best_size=4, max_answer_length=5, do_lower_case=True)
  assert predictions == {"q1": "empty"} and nbest["q1"][0]["probability"] == 1.0


def _two_windows(null_logits):
  example, first = _example_and_feature(unique_id=1)
  _, second = _example_and_feature(unique_id=2)
  first_null, second_null = null_logits
  results = [RawResult(1, _logits({0: first_null, 8: 2.0}), _logits({0: first_null, 9: 1.0})),
             RawResult(2, _logits({0: second_null, 3: 1.0}), _logits({0: second_null, 4: 1.0}))]
  return example, [first, second], results


def test_version_2_null_score_and_threshold():
  # [CLS] start + end: 2 * 1.5 = 3 in window 1, 2 * 0.5 = 1 in window 2: the null score is 1.
  example, features, results = _two_windows((1.5, 0.5))
  kwargs = dict(n_best_size=5, max_answer_length=6, do_lower_case=True,
                version_2_with_negative=True)
  predictions, nbest, null_odds = squad_postprocessing.postprocess_predictions(
      [example], features, results, **kwargs)
  # Best span "barked": 2 + 1 = 3; null score - best = 1 - 3.
  assert null_odds == {"q1": -2.0} and predictions == {"q1": "barked"}
  empty = [entry for entry in nbest["q1"] if entry["text"] == ""]
  assert len(empty) == 1 and empty[0]["start_logit"] == 0.5
  predictions, _, _ = squad_postprocessing.postprocess_predictions(
      [example], features, results, null_score_diff_threshold=-2.5, **kwargs)
  assert predictions == {"q1": ""}
  # With n = 1 only each window's best start and best end pair up; window 1's best end is [CLS], so
  # "Steve Smith" (window 2) is the one entry, and the empty answer is added beyond the best n.
  kwargs["n_best_size"] = 1
  _, nbest, _ = squad_postprocessing.postprocess_predictions([example], features, results, **kwargs)
  assert [entry["text"] for entry in nbest["q1"]] == ["Steve Smith", ""]


def test_missing_result_is_an_error():
  example, feature = _example_and_feature()
  with pytest.raises(KeyError, match="unique_id 7"):
    squad_postprocessing.postprocess_predictions([example], [feature], [], 3, 6, True)


def test_write_predictions_files(tmp_path):
  example, features, results = _two_windows((1.5, 0.5))
  paths = [str(tmp_path / name) for name in ("predictions.json", "nbest_predictions.json",
                                             "null_odds.json")]
  predictions = squad_postprocessing.write_predictions(
      [example], features, results, 5, 6, True, *paths, version_2_with_negative=True)
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "nbest_predictions.json", "null_odds.json", "predictions.json"]
  assert json.loads((tmp_path / "predictions.json").read_text()) == predictions == {"q1": "barked"}
  assert json.loads((tmp_path / "null_odds.json").read_text()) == {"q1": -2.0}
  nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  assert list(nbest["q1"][0]) == ["text", "probability", "start_logit", "end_logit"]
