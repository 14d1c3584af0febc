"""The GLUE benchmark's metrics, in NumPy.

Each GLUE task is scored as the GLUE leaderboard scores it:

  CoLA, AX                      Matthews correlation coefficient
  SST-2, MNLI, QNLI, RTE, WNLI  accuracy
  MRPC, QQP                     F1 of the positive class (1) and accuracy
  STS-B                         Pearson and Spearman correlation

The definitions are those of scikit-learn's `matthews_corrcoef`, `accuracy_score`, `f1_score` and
SciPy's `pearsonr` / `spearmanr` (Spearman's rho is Pearson's r of the ranks, tied values sharing
their average rank), including their conventions for degenerate input: Matthews correlation and F1
are 0 when their denominator is 0, and a correlation with a constant series is NaN.
"""

import numpy as np


def _pair(labels, predictions, dtype=None):
  labels = np.asarray(labels, dtype=dtype).reshape(-1)
  predictions = np.asarray(predictions, dtype=dtype).reshape(-1)
  if labels.shape != predictions.shape:
    raise ValueError(f"{labels.size} labels but {predictions.size} predictions")
  if not labels.size:
    raise ValueError("no labels to score")
  return labels, predictions


def accuracy(labels, predictions):
  """Share of predictions equal to the label.

  Args:
    labels: class ids (or any comparable values), shape `[n]`.
    predictions: predicted class ids, shape `[n]`.

  Returns:
    A float in [0, 1].
  """
  labels, predictions = _pair(labels, predictions)
  return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive=1):
  """F1 of the positive class: `2 tp / (2 tp + fp + fn)`, 0 when there is no positive anywhere.

  Args:
    labels: class ids, shape `[n]`.
    predictions: predicted class ids, shape `[n]`.
    positive: the class scored as positive (GLUE's MRPC and QQP: 1).

  Returns:
    A float in [0, 1].
  """
  labels, predictions = _pair(labels, predictions)
  true_positive = np.sum((predictions == positive) & (labels == positive))
  false_positive = np.sum((predictions == positive) & (labels != positive))
  false_negative = np.sum((predictions != positive) & (labels == positive))
  denominator = 2 * true_positive + false_positive + false_negative
  return float(2 * true_positive / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions):
  """Matthews correlation coefficient, for two classes or more.

  With the confusion matrix C (rows: labels, columns: predictions), n = sum(C), c = trace(C),
  t_k = row sums and p_k = column sums, MCC = (c n - p.t) / sqrt((n^2 - p.p)(n^2 - t.t)); for two
  classes this is (tp tn - fp fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)).

  Args:
    labels: class ids, shape `[n]`.
    predictions: predicted class ids, shape `[n]`.

  Returns:
    A float in [-1, 1]; 0 when every label or every prediction is the same class.
  """
  labels, predictions = _pair(labels, predictions)
  classes, indices = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  label_index, prediction_index = np.split(indices, 2)
  confusion = np.zeros((classes.size, classes.size), dtype=np.float64)
  np.add.at(confusion, (label_index, prediction_index), 1)
  total = confusion.sum()
  true_counts = confusion.sum(axis=1)
  predicted_counts = confusion.sum(axis=0)
  covariance = np.trace(confusion) * total - predicted_counts @ true_counts
  variance_predicted = total**2 - predicted_counts @ predicted_counts
  variance_true = total**2 - true_counts @ true_counts
  if variance_predicted == 0 or variance_true == 0:
    return 0.0
  return float(covariance / np.sqrt(variance_predicted * variance_true))


def pearson_correlation(labels, predictions):
  """Pearson's r of two float series; NaN when either is constant.

  Args:
    labels: gold scores, shape `[n]`.
    predictions: predicted scores, shape `[n]`.

  Returns:
    A float in [-1, 1], or NaN.
  """
  labels, predictions = _pair(labels, predictions, dtype=np.float64)
  labels = labels - labels.mean()
  predictions = predictions - predictions.mean()
  norm = np.sqrt(np.sum(labels**2) * np.sum(predictions**2))
  if norm == 0:
    return float("nan")
  return float(np.clip(np.sum(labels * predictions) / norm, -1.0, 1.0))


def average_ranks(values):
  """1-based ranks of `values`, tied values sharing the mean of the ranks they span.

  Args:
    values: numbers, shape `[n]`.

  Returns:
    float64 ranks, shape `[n]`; e.g. `[10, 20, 20, 5]` -> `[2, 3.5, 3.5, 1]`.
  """
  _, inverse, counts = np.unique(np.asarray(values).reshape(-1), return_inverse=True,
                                 return_counts=True)
  last_rank = np.cumsum(counts)
  return (last_rank - (counts - 1) / 2.0)[inverse].astype(np.float64)


def spearman_correlation(labels, predictions):
  """Spearman's rho: Pearson's r of the tie-averaged ranks; NaN when either series is constant.

  Args:
    labels: gold scores, shape `[n]`.
    predictions: predicted scores, shape `[n]`.

  Returns:
    A float in [-1, 1], or NaN.
  """
  labels, predictions = _pair(labels, predictions, dtype=np.float64)
  return pearson_correlation(average_ranks(labels), average_ranks(predictions))


_CLASSIFICATION_TASKS = {
    "cola": ("matthews_corrcoef",),
    "ax": ("matthews_corrcoef",),
    "sst2": ("accuracy",),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "xnli": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "qqp": ("f1", "accuracy"),
}
_METRICS = {"matthews_corrcoef": matthews_corrcoef, "accuracy": accuracy, "f1": f1_score}


def glue_metrics(task_name, labels, predictions):
  """Scores predictions for one GLUE task with that task's metrics.

  Args:
    task_name: `cola`, `sst-2`, `mrpc`, `sts-b`, `qqp`, `mnli`, `qnli`, `rte`, `wnli`, `ax` or
      `xnli` (case, `-` and `_` ignored; `mnli-mm` / `mnli_mismatched` score like `mnli`).
    labels: gold label ids, shape `[n]` (float scores for STS-B).
    predictions: predicted label ids, shape `[n]` (float scores for STS-B).

  Returns:
    A dict of metric name -> float: `matthews_corrcoef` (CoLA, AX); `accuracy` (SST-2, MNLI, QNLI,
    RTE, WNLI, XNLI); `f1` and `accuracy` (MRPC, QQP); `pearson` and `spearman` (STS-B).

  Example:

  >>> metrics = glue_metrics("MRPC", [1, 0, 1, 1], [1, 0, 0, 1])
  >>> sorted(metrics), round(metrics["f1"], 4), round(metrics["accuracy"], 4)
  (['accuracy', 'f1'], 0.8, 0.75)
  """
  key = task_name.lower().replace("-", "").replace("_", "")
  if key in ("mnlimm", "mnlimatched", "mnlimismatched"):
    key = "mnli"
  if key == "stsb":
    return {"pearson": pearson_correlation(labels, predictions),
            "spearman": spearman_correlation(labels, predictions)}
  if key not in _CLASSIFICATION_TASKS:
    raise ValueError(f"Unknown GLUE task {task_name!r}; choose one of CoLA, SST-2, MRPC, STS-B, "
                     "QQP, MNLI, QNLI, RTE, WNLI, AX, XNLI")
  return {name: _METRICS[name](labels, predictions) for name in _CLASSIFICATION_TASKS[key]}
