"""Tests for official_bert.evaluation.ner_metrics: CoNLL entity-level scores, counted by hand."""

import pytest

from official_bert.evaluation import ner_metrics


def test_extract_entities_iob2():
  tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O"]
  assert ner_metrics.extract_entities(tags) == [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6)]


def test_extract_entities_iob1():
  # IOB1: I- inside an entity, B- only where an entity directly follows one of the same type.
  tags = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
  assert ner_metrics.extract_entities(tags) == [
      ("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5), ("ORG", 5, 6)]


def test_extract_entities_tolerates_stray_inside_tags_like_conlleval():
  # I- after O opens an entity; I- of another type closes the open one and opens its own.
  assert ner_metrics.extract_entities(["O", "I-MISC", "I-MISC"]) == [("MISC", 1, 3)]
  assert ner_metrics.extract_entities(["B-PER", "I-LOC", "I-LOC", "O"]) == [
      ("PER", 0, 1), ("LOC", 1, 3)]
  assert ner_metrics.extract_entities(["O", "O"]) == []
  assert ner_metrics.extract_entities([]) == []


def test_entity_types_may_contain_hyphens():
  assert ner_metrics.extract_entities(["B-creative-work", "I-creative-work"]) == [
      ("creative-work", 0, 2)]


def test_scores_with_type_and_boundary_mismatches():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  predicted = [["B-PER", "I-PER", "O", "B-PER"], ["B-ORG", "I-ORG"]]
  # Gold entities: PER[0,2), LOC[3,4), ORG[0,1) = 3. Predicted: PER[0,2), PER[3,4), ORG[0,2) = 3.
  # Only PER[0,2) matches: the LOC/PER pair differs in type, the ORG pair in its right boundary.
  report = ner_metrics.evaluate(gold, predicted)
  assert (report.overall.num_gold, report.overall.num_predicted, report.overall.num_correct) == (
      3, 3, 1)
  assert report.overall.precision == pytest.approx(1 / 3)
  assert report.overall.recall == pytest.approx(1 / 3)
  assert report.overall.f1 == pytest.approx(1 / 3)
  assert set(report.per_type) == {"PER", "LOC", "ORG"}
  per = report.per_type["PER"]
  assert (per.num_gold, per.num_predicted, per.num_correct) == (1, 2, 1)
  assert (per.precision, per.recall) == (0.5, 1.0)
  assert per.f1 == pytest.approx(2 / 3)
  loc = report.per_type["LOC"]
  assert (loc.num_gold, loc.num_predicted, loc.num_correct) == (1, 0, 0)
  assert (loc.precision, loc.recall, loc.f1) == (0.0, 0.0, 0.0)
  org = report.per_type["ORG"]
  assert (org.num_gold, org.num_predicted, org.num_correct) == (1, 1, 0)
  # Tokens equal: B-PER, I-PER, O, B-ORG = 4 of 6.
  assert report.num_tokens == 6
  assert report.token_accuracy == pytest.approx(4 / 6)


def test_iob1_gold_and_iob2_predictions_of_the_same_entities_score_perfectly():
  iob1 = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
  iob2 = [["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]
  report = ner_metrics.evaluate(iob1, iob2)
  assert (report.overall.num_gold, report.overall.num_correct) == (3, 3)
  assert report.overall.f1 == 1.0
  assert report.per_type["PER"].num_correct == 2
  # Per token they differ at positions 0 and 4, which the entity score rightly ignores.
  assert report.token_accuracy == pytest.approx(3 / 5)


def test_iob1_read_as_iob2_merges_adjacent_entities_of_one_type():
  # "B-PER B-PER" is two entities, "B-PER I-PER" one: gold 2, predicted 1, correct 0.
  report = ner_metrics.evaluate([["B-PER", "B-PER"]], [["B-PER", "I-PER"]])
  assert (report.overall.num_gold, report.overall.num_predicted, report.overall.num_correct) == (
      2, 1, 0)
  assert report.overall.f1 == 0.0


def test_sentence_boundaries_close_entities():
  report = ner_metrics.evaluate([["B-PER"], ["I-PER"]], [["B-PER"], ["B-PER"]])
  # Two gold entities (one per sentence); both predicted with the same boundaries.
  assert (report.overall.num_gold, report.overall.num_correct) == (2, 2)


def test_micro_average_over_types():
  gold = [["B-A", "O", "B-B", "I-B", "O", "B-B"]]
  predicted = [["B-A", "O", "B-B", "O", "O", "B-B"]]
  # Gold A[0,1) B[2,4) B[5,6); predicted A[0,1) B[2,3) B[5,6); correct A[0,1) and B[5,6).
  report = ner_metrics.evaluate(gold, predicted)
  assert (report.overall.num_gold, report.overall.num_predicted, report.overall.num_correct) == (
      3, 3, 2)
  assert report.per_type["A"].f1 == 1.0
  assert report.per_type["B"].precision == 0.5
  assert report.overall.f1 == pytest.approx(2 / 3)
  values = report.to_dict()
  assert values["f1"] == pytest.approx(2 / 3)
  assert values["B/recall"] == 0.5
  text = report.format()
  assert "processed 6 tokens with 3 phrases; found: 3 phrases; correct: 2." in text
  assert "FB1:  66.67" in text


def test_no_entities_gives_zero_scores_not_an_error():
  report = ner_metrics.evaluate([["O", "O"]], [["O", "O"]])
  assert report.overall.f1 == 0.0
  assert report.per_type == {}
  assert report.token_accuracy == 1.0


@pytest.mark.parametrize("tag", ["PER", "X-PER", "B-", "E-PER", "b-PER"])
def test_malformed_tags_are_reported_with_their_position(tag):
  with pytest.raises(ValueError, match=r"predicted sentence 1, token 2: tag"):
    ner_metrics.evaluate([["O"], ["O", "O", "O"]], [["O"], ["O", "O", tag]])


def test_misaligned_inputs_are_reported():
  with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
    ner_metrics.evaluate([["O"], ["O"]], [["O"]])
  with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
    ner_metrics.evaluate([["O", "O"]], [["O"]])
