"""The official SQuAD evaluation: normalisation, v1.1 scores, v2.0 no-answer logic, command line."""

import json
import os
import sys

import pytest

from official_bert.evaluation import squad_evaluate

from testing import run_python, shared_data


def _dataset(questions):
  """A SQuAD `data` list; `questions` maps question id -> gold answer texts ([] = unanswerable)."""
  qas = [{"id": qas_id, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
         for qas_id, golds in questions.items()]
  return [{"title": "T", "paragraphs": [{"context": "c", "qas": qas}]}]


def _write(path, value):
  path.write_text(json.dumps(value))
  return str(path)


def test_published_bert_ensemble_score_on_v1_1_dev():
  result = squad_evaluate.evaluate_files(
      str(shared_data("squad/dev-v1.1.json")),
      str(shared_data("squad/bert_ensemble_predictions_dev-v1.1.json")))
  assert result["exact_match"] == pytest.approx(86.20624408703878, abs=1e-9)
  assert result["f1"] == pytest.approx(92.19557978351145, abs=1e-9)


@pytest.mark.parametrize("text, expected", [
    ("The  Denver Broncos!", "denver broncos"),
    ("an apple a day", "apple day"),
    ("Theatre, anthem", "theatre anthem"),
    ("A.B.C", "abc"),
    ("U.S.-born", "usborn"),
    ("  \tThe\n", ""),
])
def test_normalize_answer(text, expected):
  assert squad_evaluate.normalize_answer(text) == expected


def test_token_f1_and_exact_match():
  assert squad_evaluate.f1_score("the cat sat on a mat", "Cat sat") == pytest.approx(2 / 3)
  assert squad_evaluate.f1_score("cat cat", "cat") == pytest.approx(2 / 3)
  assert squad_evaluate.f1_score("dog", "cat") == 0.0
  assert squad_evaluate.exact_match_score("The Cat.", "cat")
  # v1.1 gives two empty answers F1 0; v2.0 counts them as agreeing.
  assert squad_evaluate.f1_score("", "the") == 0.0
  assert squad_evaluate.f1_score_v2("", "the") == 1.0
  assert squad_evaluate.f1_score_v2("", "cat") == 0.0


def test_evaluate_v1_takes_the_best_gold_and_scores_missing_as_zero(capsys):
  dataset = _dataset({"a": ["Denver Broncos", "Broncos"], "b": ["Carolina Panthers"], "c": ["x"]})
  result = squad_evaluate.evaluate_v1(dataset, {"a": "the Broncos", "b": "Panthers team"})
  assert result["exact_match"] == pytest.approx(100 / 3)
  assert result["f1"] == pytest.approx((1 + 0.5 + 0) * 100 / 3)
  assert "Unanswered question c will receive score 0." in capsys.readouterr().err


V2_QUESTIONS = {"h1": ["blue sky"], "h2": ["red", "the red"], "n1": [], "n2": []}
V2_PREDICTIONS = {"h1": "blue sky", "h2": "green", "n1": "", "n2": "something"}
V2_NA_PROBS = {"h1": 0.1, "h2": 0.6, "n1": 0.9, "n2": 0.4}


def test_evaluate_v2_has_ans_and_no_ans():
  result = squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), V2_PREDICTIONS)
  assert dict(result) == {"exact": 50.0, "f1": 50.0, "total": 4,
                          "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
                          "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
  # Above the threshold a question counts as answered "": right for n2, still wrong for h2.
  result = squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), V2_PREDICTIONS, V2_NA_PROBS, 0.3)
  assert (result["exact"], result["HasAns_exact"], result["NoAns_exact"]) == (75.0, 50.0, 100.0)


def test_evaluate_v2_best_threshold():
  result = squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), V2_PREDICTIONS, V2_NA_PROBS)
  # By hand: everything "" scores 2 of 4; answering h1 (p 0.1) adds 1 -> 3; n2 (0.4) loses 1;
  # h2 (0.6) and n1 (0.9) change nothing. The best is 3/4 at threshold 0.1.
  assert (result["best_exact"], result["best_exact_thresh"]) == (75.0, 0.1)
  assert (result["best_f1"], result["best_f1_thresh"]) == (75.0, 0.1)
  partial = dict(V2_PREDICTIONS, h1="blue")
  result = squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), partial, V2_NA_PROBS)
  assert result["best_f1"] == pytest.approx(100 * (2 + 2 / 3) / 4)
  assert (result["best_exact"], result["best_exact_thresh"]) == (50.0, 0.0)


def test_evaluate_v2_needs_every_prediction():
  with pytest.raises(ValueError, match=r"1 of 4 questions have no prediction, e.g. \['n2'\]"):
    squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), {k: "" for k in ("h1", "h2", "n1")})
  with pytest.raises(ValueError, match="no no-answer probability"):
    squad_evaluate.evaluate_v2(_dataset(V2_QUESTIONS), V2_PREDICTIONS, {"h1": 0.0})


def test_malformed_inputs_name_the_place(tmp_path):
  data = _write(tmp_path / "data.json", {"version": "1.1", "data": _dataset({"a": ["x"]})})
  broken = tmp_path / "predictions.json"
  broken.write_text('{"a": "x",\n "b": }')
  with pytest.raises(ValueError, match=r"predictions.json: invalid JSON in the predictions file "
                                       r"at line 2, column 7"):
    squad_evaluate.evaluate_files(data, str(broken))
  bad = {"data": [{"paragraphs": [{"qas": [{"id": "a", "answers": [{"answer_start": 0}]}]}]}]}
  with pytest.raises(ValueError, match=r"bad.json: article 0, paragraph 0, question 0 \('a'\)"):
    squad_evaluate.evaluate_files(_write(tmp_path / "bad.json", bad), data)


def test_command_line_v2_with_na_probs(tmp_path, capsys):
  data = _write(tmp_path / "dev.json", {"version": "v2.0", "data": _dataset(V2_QUESTIONS)})
  predictions = _write(tmp_path / "predictions.json", V2_PREDICTIONS)
  na_probs = _write(tmp_path / "null_odds.json", V2_NA_PROBS)
  squad_evaluate.main([data, predictions, "--na_prob_file", na_probs, "--na_prob_thresh", "0.3"])
  result = json.loads(capsys.readouterr().out)
  assert result["exact"] == 75.0 and result["best_exact_thresh"] == 0.1
  # The official script's spelling of the flags works too.
  squad_evaluate.main([data, predictions, "--na-prob-file", na_probs])
  assert json.loads(capsys.readouterr().out)["exact"] == 50.0


def test_python_dash_m_official_bert_squad_evaluate(tmp_path):
  data = _write(tmp_path / "dev.json", {"version": "1.1", "data": _dataset({"a": ["Denver"]})})
  predictions = _write(tmp_path / "predictions.json", {"a": "denver."})
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  command = [sys.executable, "-m", "official_bert.evaluation.squad_evaluate", data, predictions]
  output = run_python(command, check=True, env=env).stdout
  assert json.loads(output) == {"exact_match": 100.0, "f1": 100.0}


def test_command_line_errors_exit_with_the_reason(tmp_path):
  data = _write(tmp_path / "dev.json", {"version": "1.1", "data": _dataset({"a": ["Denver"]})})
  with pytest.raises(SystemExit, match="absent.json"):
    squad_evaluate.main([data, str(tmp_path / "absent.json")])
