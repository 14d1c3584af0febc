"""Tests for official_bert/evaluation/glue_metrics.py against values worked out by hand."""

import math

import numpy as np
import pytest

from official_bert.evaluation import glue_metrics


def test_accuracy():
  # Matches at positions 0, 1 and 3: 3 of 5.
  assert glue_metrics.accuracy([0, 1, 1, 0, 1], [0, 1, 0, 0, 0]) == pytest.approx(0.6)


def test_f1_of_the_positive_class():
  # tp = 2 (positions 0, 1), fp = 1 (position 3), fn = 1 (position 2): 2*2 / (2*2 + 1 + 1) = 2/3.
  labels = [1, 1, 1, 0, 0, 0]
  predictions = [1, 1, 0, 1, 0, 0]
  assert glue_metrics.f1_score(labels, predictions) == pytest.approx(2 / 3)
  # Class 0 as positive: tp = 2 (4, 5), fp = 1 (2), fn = 1 (3): also 2/3; class 1 is GLUE's default.
  assert glue_metrics.f1_score(labels, predictions, positive=0) == pytest.approx(2 / 3)
  # No positive label and no positive prediction: 0/0, which scikit-learn reports as 0.
  assert glue_metrics.f1_score([0, 0], [0, 0]) == 0.0
  # All wrong: tp = 0, so F1 = 0 whatever fp and fn are.
  assert glue_metrics.f1_score([1, 0], [0, 1]) == 0.0


def test_matthews_correlation_two_classes():
  # tp = 3, fn = 1, fp = 1, tn = 5:
  # (3*5 - 1*1) / sqrt((3+1)(3+1)(5+1)(5+1)) = 14 / sqrt(4*4*6*6) = 14/24.
  labels = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
  predictions = [1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
  assert glue_metrics.matthews_corrcoef(labels, predictions) == pytest.approx(14 / 24)
  assert glue_metrics.matthews_corrcoef(labels, labels) == pytest.approx(1.0)
  assert glue_metrics.matthews_corrcoef(labels, 1 - np.array(labels)) == pytest.approx(-1.0)
  # A constant prediction makes the denominator 0; scikit-learn's convention is 0.
  assert glue_metrics.matthews_corrcoef(labels, [0] * 10) == 0.0


def test_matthews_correlation_three_classes():
  # Confusion matrix (rows = labels 0,1,2; columns = predictions):
  #   [[1, 1, 0], [0, 2, 0], [1, 0, 1]]   n = 6, trace c = 4, t = (2, 2, 2), p = (2, 3, 1)
  # (c n - p.t) / sqrt((n^2 - p.p)(n^2 - t.t)) = (24 - 12) / sqrt((36 - 14)(36 - 12))
  #                                            = 12 / sqrt(528) = 0.522232967...
  value = glue_metrics.matthews_corrcoef([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0])
  assert value == pytest.approx(12 / math.sqrt(528))
  assert value == pytest.approx(0.5222329679)


def test_pearson_correlation():
  # Deviations from the means (3 and 4): x = (-2, -1, 0, 1, 2), y = (-2, 0, 1, 0, 1).
  # sum xy = 4 + 0 + 0 + 0 + 2 = 6, sum x^2 = 10, sum y^2 = 6: r = 6 / sqrt(60) = 0.7745966...
  value = glue_metrics.pearson_correlation([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
  assert value == pytest.approx(6 / math.sqrt(60))
  assert glue_metrics.pearson_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
  assert math.isnan(glue_metrics.pearson_correlation([1, 2, 3], [2, 2, 2]))


def test_average_ranks_share_ties():
  # 5 is smallest (rank 1), 10 next (2), the two 20s share ranks 3 and 4: 3.5 each.
  np.testing.assert_array_equal(glue_metrics.average_ranks([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
  # Three-way tie over ranks 1..3 -> 2 each.
  np.testing.assert_array_equal(glue_metrics.average_ranks([0.5, 0.5, 0.5, 9]), [2, 2, 2, 4])


def test_spearman_correlation_with_ties():
  # Ranks of x = (1, 2, 3, 4, 5); of y = (2, 4, 5, 4, 5): 2 -> 1, the 4s -> 2.5, the 5s -> 4.5,
  # so y ranks = (1, 2.5, 4.5, 2.5, 4.5). Deviations from the mean rank 3:
  # x: (-2, -1, 0, 1, 2), y: (-2, -0.5, 1.5, -0.5, 1.5). sum xy = 4 + 0.5 + 0 - 0.5 + 3 = 7,
  # sum x^2 = 10, sum y^2 = 4 + 0.25 + 2.25 + 0.25 + 2.25 = 9: rho = 7 / sqrt(90) = 0.7378647...
  value = glue_metrics.spearman_correlation([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
  assert value == pytest.approx(7 / math.sqrt(90))
  # Any increasing transform keeps the ranks: rho = 1 although Pearson's r is not.
  assert glue_metrics.spearman_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1)
  assert glue_metrics.pearson_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) < 0.96


def test_glue_metrics_picks_each_task_metric():
  labels = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
  predictions = [1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
  # 8 of 10 correct; tp = 3, fp = 1, fn = 1 -> F1 = 6/8; MCC = 14/24 as above.
  assert glue_metrics.glue_metrics("CoLA", labels, predictions) == pytest.approx(
      {"matthews_corrcoef": 14 / 24})
  for task in ("MRPC", "qqp"):
    assert glue_metrics.glue_metrics(task, labels, predictions) == pytest.approx(
        {"f1": 0.75, "accuracy": 0.8})
  for task in ("SST-2", "sst2", "MNLI", "mnli-mm", "QNLI", "RTE", "WNLI"):
    assert glue_metrics.glue_metrics(task, labels, predictions) == pytest.approx(
        {"accuracy": 0.8})
  assert glue_metrics.glue_metrics("ax", [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]) == pytest.approx(
      {"matthews_corrcoef": 12 / math.sqrt(528)})
  assert glue_metrics.glue_metrics("STS-B", [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(
      {"pearson": 6 / math.sqrt(60), "spearman": 7 / math.sqrt(90)})


def test_bad_arguments_are_reported():
  with pytest.raises(ValueError, match="3 labels but 2 predictions"):
    glue_metrics.accuracy([0, 1, 1], [0, 1])
  with pytest.raises(ValueError, match="no labels"):
    glue_metrics.matthews_corrcoef([], [])
  with pytest.raises(ValueError, match="Unknown GLUE task 'squad'"):
    glue_metrics.glue_metrics("squad", [1], [1])
