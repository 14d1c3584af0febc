"""SQuAD post-processing: start/end logits of every window -> answer text in the original context.

The rules are those of the original BERT `run_squad.py`:

* candidates pair the `n_best_size` highest start logits with the `n_best_size` highest end logits
  of each window, keeping a pair only if both ends are context tokens, the start is in its
  max-context window, `end >= start` and the span has at most `max_answer_length` WordPieces;
* the best `n_best_size` distinct texts by `start_logit + end_logit` form the n-best list, with
  probabilities from a softmax over those totals;
* the WordPiece text is projected back onto the original whitespace tokens (`get_final_text`), so
  the answer keeps the context's case and punctuation;
* for SQuAD v2.0 the null score is the smallest `[CLS]` start + end logit over the windows; the
  question gets "" when `null score - best non-null score > null_score_diff_threshold`.

Example:

  results = [RawResult(unique_id, start_logits, end_logits) for each feature]
  predictions, nbest, null_odds = postprocess_predictions(
      examples, features, results, n_best_size=20, max_answer_length=30, do_lower_case=True)
"""

import collections
import json
import math

from absl import logging

from official_bert import tokenization
from official_bert.common import file_io

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
RawResult.__doc__ = """The model's logits for one feature, keyed by the feature's `unique_id`."""

_Candidate = collections.namedtuple(
    "_Candidate", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestEntry = collections.namedtuple("_NbestEntry", ["text", "start_logit", "end_logit"])

# The null odds written for a v2.0 question without any valid non-null span: it is predicted as
# unanswerable at every threshold a model's logits can reach.
NO_SPAN_SCORE_DIFF = 1e6


def _strip_spaces(text):
  """`text` without spaces, and a map from each kept character's index to its index in `text`."""
  kept, index_map = [], {}
  for index, char in enumerate(text):
    if char != " ":
      index_map[len(kept)] = index
      kept.append(char)
  return "".join(kept), index_map


def get_final_text(pred_text, orig_text, do_lower_case):
  """Projects a de-tokenised WordPiece answer onto the original text it came from.

  `pred_text` is normalised (lower case, accents stripped, punctuation split off), `orig_text` is
  the run of original whitespace tokens that contain it. Both are aligned character by character
  with spaces ignored, so "steve smith" inside "Steve Smith's" comes back as "Steve Smith". When the
  alignment fails (the texts differ in more than spaces, e.g. stripped accents change the length)
  the whole of `orig_text` is returned, as the original does.

  Args:
    pred_text: the predicted WordPieces joined, with the "##" continuations merged.
    orig_text: the original whitespace tokens covering the prediction, joined with spaces.
    do_lower_case: whether the tokenizer lower-cased (and stripped accents).

  Returns:
    The span of `orig_text` that spells `pred_text`, or `orig_text` when they cannot be aligned.
  """
  tok_text = " ".join(tokenization.BasicTokenizer(do_lower_case=do_lower_case).tokenize(orig_text))
  start_position = tok_text.find(pred_text)
  if start_position == -1:
    return orig_text
  end_position = start_position + len(pred_text) - 1
  orig_ns_text, orig_ns_to_s = _strip_spaces(orig_text)
  tok_ns_text, tok_ns_to_s = _strip_spaces(tok_text)
  if len(orig_ns_text) != len(tok_ns_text):
    return orig_text
  tok_s_to_ns = {s_index: ns_index for ns_index, s_index in tok_ns_to_s.items()}
  orig_start = orig_ns_to_s.get(tok_s_to_ns.get(start_position))
  orig_end = orig_ns_to_s.get(tok_s_to_ns.get(end_position))
  if orig_start is None or orig_end is None:
    return orig_text
  return orig_text[orig_start:orig_end + 1]


def _best_indexes(logits, n_best_size):
  # A stable sort keeps the lower index first among equal logits, as the original does.
  return sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)[:n_best_size]


def _softmax(scores):
  if not scores:
    return []
  max_score = max(scores)
  exps = [math.exp(score - max_score) for score in scores]
  total = sum(exps)
  return [value / total for value in exps]


def _candidates(features, results_by_id, n_best_size, max_answer_length):
  """Valid spans of all windows of one example, and the null (`[CLS]`) logits of its best window."""
  candidates = []
  null = None
  for feature_index, feature in enumerate(features):
    result = results_by_id[feature.unique_id]
    start_logits = [float(x) for x in result.start_logits]
    end_logits = [float(x) for x in result.end_logits]
    null_score = start_logits[0] + end_logits[0]
    if null is None or null_score < null.start_logit + null.end_logit:
      null = _Candidate(feature_index, 0, 0, start_logits[0], end_logits[0])
    for start in _best_indexes(start_logits, n_best_size):
      for end in _best_indexes(end_logits, n_best_size):
        if (start not in feature.token_to_orig_map or end not in feature.token_to_orig_map or
            not feature.token_is_max_context.get(start, False) or end < start or
            end - start + 1 > max_answer_length):
          continue
        candidates.append(_Candidate(feature_index, start, end, start_logits[start],
                                     end_logits[end]))
  return candidates, null


def _span_text(example, feature, candidate, do_lower_case):
  pieces = " ".join(feature.tokens[candidate.start_index:candidate.end_index + 1])
  pred_text = " ".join(pieces.replace(" ##", "").replace("##", "").split())
  orig_start = feature.token_to_orig_map[candidate.start_index]
  orig_end = feature.token_to_orig_map[candidate.end_index]
  orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
  return get_final_text(pred_text, orig_text, do_lower_case)


def postprocess_predictions(examples, features, results, n_best_size, max_answer_length,
                            do_lower_case, version_2_with_negative=False,
                            null_score_diff_threshold=0.0):
  """Turns the logits of every feature into an answer per question.

  Args:
    examples: the `SquadExample`s, in the order their features were made.
    features: all their `InputFeatures` (their `example_index` refers to `examples`).
    results: a `RawResult` per feature (`start_logits` / `end_logits` of length `max_seq_length`).
    n_best_size: starts, ends and final answers kept per question (20 in the original).
    max_answer_length: longest answer, in WordPieces (30 in the original).
    do_lower_case: whether the tokenizer lower-cased; needed to align answers to the context.
    version_2_with_negative: SQuAD v2.0: consider the empty answer.
    null_score_diff_threshold: predict "" when `null score - best span score` exceeds this.

  Returns:
    `(predictions, nbest, null_odds)`, dicts keyed by question id: the answer text; the n-best list
    (dicts with `text`, `probability`, `start_logit`, `end_logit`); and for v2.0 the score
    difference that was compared to the threshold (empty for v1.1).

  Raises:
    KeyError: a feature has no result.
  """
  features_by_example = collections.defaultdict(list)
  for feature in features:
    features_by_example[feature.example_index].append(feature)
  results_by_id = {result.unique_id: result for result in results}
  missing = [f.unique_id for f in features if f.unique_id not in results_by_id]
  if missing:
    raise KeyError(f"{len(missing)} features have no result, e.g. unique_id {missing[0]}")

  predictions, all_nbest, null_odds = {}, {}, {}
  for example_index, example in enumerate(examples):
    example_features = features_by_example[example_index]
    candidates, null = _candidates(example_features, results_by_id, n_best_size,
                                   max_answer_length)
    if version_2_with_negative and null is not None:
      candidates.append(null)
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

    nbest, seen = [], set()
    for candidate in candidates:
      if len(nbest) >= n_best_size:
        break
      text = ""
      if candidate.start_index > 0:
        text = _span_text(example, example_features[candidate.feature_index], candidate,
                          do_lower_case)
        if text in seen:
          continue
      seen.add(text)
      nbest.append(_NbestEntry(text, candidate.start_logit, candidate.end_logit))
    if version_2_with_negative and "" not in seen:
      null_logits = (null.start_logit, null.end_logit) if null is not None else (0.0, 0.0)
      nbest.append(_NbestEntry("", *null_logits))
    if not nbest:
      # No window offered a valid span (e.g. every context token lost its max context).
      nbest.append(_NbestEntry("empty", 0.0, 0.0))

    probabilities = _softmax([entry.start_logit + entry.end_logit for entry in nbest])
    all_nbest[example.qas_id] = [
        {"text": entry.text, "probability": probability, "start_logit": entry.start_logit,
         "end_logit": entry.end_logit} for entry, probability in zip(nbest, probabilities)]
    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0].text
      continue
    best_non_null = next((entry for entry in nbest if entry.text), None)
    if best_non_null is None or null is None:
      null_odds[example.qas_id] = NO_SPAN_SCORE_DIFF
      predictions[example.qas_id] = ""
      continue
    score_diff = (null.start_logit + null.end_logit - best_non_null.start_logit -
                  best_non_null.end_logit)
    null_odds[example.qas_id] = score_diff
    predictions[example.qas_id] = ("" if score_diff > null_score_diff_threshold
                                   else best_non_null.text)
  logging.info("Post-processed %d questions from %d features", len(examples), len(features))
  return predictions, all_nbest, null_odds


def _write_json(value, path):
  file_io.write_text(path, json.dumps(value, indent=4) + "\n")


def write_predictions(examples, features, results, n_best_size, max_answer_length, do_lower_case,
                      output_prediction_file, output_nbest_file, output_null_log_odds_file=None,
                      version_2_with_negative=False, null_score_diff_threshold=0.0):
  """Runs `postprocess_predictions` and writes its results as the original's JSON files.

  Each file is written under a temporary name and renamed, so none is ever seen half-written.

  Args:
    examples, features, results, n_best_size, max_answer_length, do_lower_case,
    version_2_with_negative, null_score_diff_threshold: as for `postprocess_predictions`.
    output_prediction_file: `predictions.json`: question id -> answer text.
    output_nbest_file: `nbest_predictions.json`: question id -> n-best list.
    output_null_log_odds_file: `null_odds.json` (v2.0 only): question id -> null score difference.

  Returns:
    The predictions dict.
  """
  predictions, nbest, null_odds = postprocess_predictions(
      examples, features, results, n_best_size, max_answer_length, do_lower_case,
      version_2_with_negative, null_score_diff_threshold)
  _write_json(predictions, output_prediction_file)
  _write_json(nbest, output_nbest_file)
  if version_2_with_negative and output_null_log_odds_file:
    _write_json(null_odds, output_null_log_odds_file)
  logging.info("Wrote %s and %s", output_prediction_file, output_nbest_file)
  return predictions
