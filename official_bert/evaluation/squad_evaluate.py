"""The official SQuAD evaluation, v1.1 and v2.0, as functions and as a command.

Answers are compared after normalisation (lower case, punctuation removed, the articles a/an/the
removed, whitespace collapsed); a question scores the best exact match and the best token F1 over
its gold answers. SQuAD v2.0 adds unanswerable questions (whose only gold answer is ""), the HasAns
/ NoAns breakdown and, given each question's no-answer probability, the threshold on it that would
have maximised the score on this data (`best_exact`, `best_exact_thresh`, `best_f1`,
`best_f1_thresh`).
The numbers are those of the official `evaluate-v1.1.py` and `evaluate-v2.0.py`.

Example:

  python -m official_bert.evaluation.squad_evaluate dev-v1.1.json predictions.json
  {"exact_match": 86.20624408703878, "f1": 92.19557978351145}
"""

import argparse
import collections
import json
import re
import string
import sys

from official_bert.common import file_io

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
  """Lower-cases and removes punctuation, articles and extra whitespace, as the official script.

  Args:
    text: an answer.

  Returns:
    The normalised answer; e.g. "The  Denver Broncos!" -> "denver broncos".
  """
  text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def _f1(prediction_tokens, gold_tokens):
  num_same = sum((collections.Counter(prediction_tokens) &
                  collections.Counter(gold_tokens)).values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(prediction_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def exact_match_score(prediction, ground_truth):
  """Whether the two answers are equal after `normalize_answer`."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction, ground_truth):
  """SQuAD v1.1 token F1 of two answers after normalisation (0 when either is empty).

  Args:
    prediction: the predicted answer.
    ground_truth: one gold answer.

  Returns:
    The harmonic mean of token precision and recall, in [0, 1].
  """
  return _f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def f1_score_v2(prediction, ground_truth):
  """SQuAD v2.0 token F1: as `f1_score`, but two empty answers agree (score 1)."""
  prediction_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(ground_truth).split()
  if not prediction_tokens or not gold_tokens:
    return float(prediction_tokens == gold_tokens)
  return _f1(prediction_tokens, gold_tokens)


def _questions(dataset, source):
  """Yields `(question id, gold answer texts)` of a SQuAD `data` list, naming any bad field."""
  if not isinstance(dataset, list):
    raise ValueError(f"{source}: 'data' must be a list of articles")
  for article_index, article in enumerate(dataset):
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
      raise ValueError(f"{source}: article {article_index} needs a list 'paragraphs'")
    for paragraph_index, paragraph in enumerate(article["paragraphs"]):
      paragraph_where = f"{source}: article {article_index}, paragraph {paragraph_index}"
      if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
        raise ValueError(f"{paragraph_where}: needs a list 'qas'")
      for qa_index, qa in enumerate(paragraph["qas"]):
        where = f"{paragraph_where}, question {qa_index}"
        if (not isinstance(qa, dict) or not isinstance(qa.get("id"), str) or
            not isinstance(qa.get("answers"), list)):
          raise ValueError(f"{where}: needs a string 'id' and a list 'answers'")
        if not all(isinstance(answer, dict) and isinstance(answer.get("text"), str)
                   for answer in qa["answers"]):
          raise ValueError(f"{where} ('{qa['id']}'): every answer needs a string 'text'")
        yield qa["id"], [answer["text"] for answer in qa["answers"]]


def evaluate_v1(dataset, predictions, source="dataset"):
  """The SQuAD v1.1 evaluation: exact match and F1 in percent over all questions.

  A question without a prediction scores 0 (and is named on stderr).

  Args:
    dataset: the `data` list of a SQuAD JSON file.
    predictions: dict question id -> predicted answer text.
    source: how to name the dataset in error messages.

  Returns:
    `{"exact_match": ..., "f1": ...}`.
  """
  exact_match = f1 = total = 0
  for qas_id, gold_answers in _questions(dataset, source):
    total += 1
    if qas_id not in predictions:
      print(f"Unanswered question {qas_id} will receive score 0.", file=sys.stderr)
      continue
    prediction = predictions[qas_id]
    exact_match += max(exact_match_score(prediction, gold) for gold in gold_answers)
    f1 += max(f1_score(prediction, gold) for gold in gold_answers)
  if total == 0:
    raise ValueError(f"{source}: holds no questions")
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def _find_best_threshold(predictions, scores, na_probs, has_answer):
  """The no-answer threshold maximising the total score, scanning questions by `na_probs`."""
  score = best_score = sum(1 for qas_id in has_answer if not has_answer[qas_id])
  best_threshold = 0.0
  for qas_id in sorted(na_probs, key=lambda k: na_probs[k]):
    if qas_id not in scores:
      continue
    if has_answer[qas_id]:
      score += scores[qas_id]
    elif predictions[qas_id]:
      score -= 1
    if score > best_score:
      best_score, best_threshold = score, na_probs[qas_id]
  return 100.0 * best_score / len(scores), best_threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0, source="dataset"):
  """The SQuAD v2.0 evaluation.

  A question counts as answered "no answer" when its prediction is "" or its no-answer probability
  exceeds `na_prob_thresh`; gold answers that normalise to "" are dropped, and a question without
  any has the single gold answer "".

  Args:
    dataset: the `data` list of a SQuAD JSON file.
    predictions: dict question id -> predicted answer text ("" for no answer); all questions.
    na_probs: dict question id -> no-answer probability (e.g. `null_odds.json`), or None.
    na_prob_thresh: no-answer probabilities above it count as a "" prediction.
    source: how to name the dataset in error messages.

  Returns:
    An ordered dict: `exact`, `f1`, `total`; `HasAns_*` and `NoAns_*` for the questions with and
    without an answer (when there are any); with `na_probs` also `best_exact`, `best_exact_thresh`,
    `best_f1`, `best_f1_thresh`.

  Raises:
    ValueError: a question has no prediction or no no-answer probability.
  """
  questions = list(_questions(dataset, source))
  missing = [qas_id for qas_id, _ in questions if qas_id not in predictions]
  if missing:
    raise ValueError(f"{len(missing)} of {len(questions)} questions have no prediction, e.g. "
                     f"{missing[:3]}")
  probabilities = na_probs if na_probs is not None else {qas_id: 0.0 for qas_id in predictions}
  missing = [qas_id for qas_id, _ in questions if qas_id not in probabilities]
  if missing:
    raise ValueError(f"{len(missing)} questions have no no-answer probability, e.g. {missing[:3]}")

  has_answer, exact_raw, f1_raw = {}, {}, {}
  for qas_id, answers in questions:
    has_answer[qas_id] = bool(answers)
    gold_answers = [answer for answer in answers if normalize_answer(answer)] or [""]
    prediction = predictions[qas_id]
    exact_raw[qas_id] = max(float(exact_match_score(prediction, gold)) for gold in gold_answers)
    f1_raw[qas_id] = max(f1_score_v2(prediction, gold) for gold in gold_answers)

  def thresholded(raw):
    return {qas_id: float(not has_answer[qas_id]) if probabilities[qas_id] > na_prob_thresh
            else score for qas_id, score in raw.items()}

  exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
  result = collections.OrderedDict()
  subsets = [("", list(exact)),
             ("HasAns_", [qas_id for qas_id in exact if has_answer[qas_id]]),
             ("NoAns_", [qas_id for qas_id in exact if not has_answer[qas_id]])]
  for prefix, qas_ids in subsets:
    if qas_ids:
      result[prefix + "exact"] = 100.0 * sum(exact[k] for k in qas_ids) / len(qas_ids)
      result[prefix + "f1"] = 100.0 * sum(f1[k] for k in qas_ids) / len(qas_ids)
      result[prefix + "total"] = len(qas_ids)
  if na_probs is not None:
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
      best, threshold = _find_best_threshold(predictions, raw, na_probs, has_answer)
      result[f"best_{name}"] = best
      result[f"best_{name}_thresh"] = threshold
  return result


def _load_json(path, what):
  try:
    with file_io.open_read(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: invalid JSON in the {what} at line {e.lineno}, column {e.colno} "
                     f"(character {e.pos}): {e.msg}") from None


def is_version_2(data):
  """Whether a loaded SQuAD file is v2.0 (by its `version`, or by an unanswerable question)."""
  if str(data.get("version", "")).lstrip("v").startswith("2"):
    return True
  return any(not qa.get("answers") or qa.get("is_impossible")
             for article in data.get("data", []) for paragraph in article.get("paragraphs", [])
             for qa in paragraph.get("qas", []))


def evaluate_files(data_file, prediction_file, na_prob_file=None, na_prob_thresh=1.0):
  """Evaluates a predictions file against a SQuAD data file.

  The v2.0 evaluation is used for v2.0 data and whenever a no-answer probability file is given,
  the v1.1 evaluation otherwise.

  Args:
    data_file: a SQuAD JSON file with gold answers.
    prediction_file: JSON dict question id -> answer text (`predictions.json`).
    na_prob_file: optional JSON dict question id -> no-answer probability (`null_odds.json`).
    na_prob_thresh: see `evaluate_v2`.

  Returns:
    The metrics dict of `evaluate_v1` or `evaluate_v2`.
  """
  data = _load_json(data_file, "SQuAD data file")
  if not isinstance(data, dict) or "data" not in data:
    raise ValueError(f"{data_file}: not a SQuAD file (no top-level 'data')")
  predictions = _load_json(prediction_file, "predictions file")
  if not isinstance(predictions, dict):
    raise ValueError(f"{prediction_file}: must map question ids to answer texts")
  if na_prob_file is None and not is_version_2(data):
    return evaluate_v1(data["data"], predictions, source=data_file)
  na_probs = _load_json(na_prob_file, "no-answer probability file") if na_prob_file else None
  return evaluate_v2(data["data"], predictions, na_probs, na_prob_thresh, source=data_file)


def main(argv=None):
  """Command line: prints the metrics as JSON (the official scripts' arguments, either spelling)."""
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("data_file", help="SQuAD JSON file with the gold answers")
  parser.add_argument("pred_file", help="predictions JSON: question id -> answer text")
  parser.add_argument("--na_prob_file", "--na-prob-file", "-n", default=None,
                      help="JSON: question id -> no-answer probability (SQuAD v2.0)")
  parser.add_argument("--na_prob_thresh", "--na-prob-thresh", "-t", type=float, default=1.0,
                      help='predict "" when the no-answer probability is above this')
  args = parser.parse_args(argv)
  try:
    result = evaluate_files(args.data_file, args.pred_file, args.na_prob_file,
                            args.na_prob_thresh)
  except (OSError, ValueError) as e:
    sys.exit(f"error: {e}")
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
