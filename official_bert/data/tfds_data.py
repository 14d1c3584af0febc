"""The GLUE tasks read through TensorFlow Datasets (`--tfds_name=glue/sst2`) instead of TSV files.

TFDS stores labels as class ids in its own order (for MNLI: entailment, neutral, contradiction) and
marks unlabeled test examples with -1. This module maps each class id to the GLUE file label by
name, so that an MNLI model fine-tuned from TFDS data and one fine-tuned from the TSV files share
label ids, and checks that the dataset's label names are the expected ones before trusting them.
"""

import dataclasses
import urllib.parse

from official_bert.data import classifier_data, glue

# Split names of this package -> TFDS split names, where they differ.
_SPLIT_NAMES = {"dev": "validation", "dev_matched": "validation_matched",
                "dev_mismatched": "validation_mismatched"}
_MNLI_SPLITS = {"dev": "validation_matched", "test": "test_matched"}


@dataclasses.dataclass(frozen=True)
class _TfdsTask:
  """A `glue/<config>` dataset: its GLUE task, text features and TFDS label names in id order."""
  task: str
  text_a: str
  text_b: str | None
  tfds_labels: tuple = ()
  splits: tuple = ("train", "dev", "test")

  def label_for(self, label_id):
    """The GLUE file label of TFDS class `label_id` (binary GLUE labels are the class ids)."""
    glue_labels = glue.glue_task(self.task).labels
    if glue_labels == ("0", "1"):
      return str(label_id)
    return self.tfds_labels[label_id]


_NLI = ("entailment", "neutral", "contradiction")
_MNLI_SPLIT_NAMES = ("train", "dev", "test", "dev_matched", "dev_mismatched", "test_matched",
                     "test_mismatched")
TFDS_GLUE_TASKS = {
    "cola": _TfdsTask("cola", "sentence", None, ("unacceptable", "acceptable")),
    "sst2": _TfdsTask("sst-2", "sentence", None, ("negative", "positive")),
    "mrpc": _TfdsTask("mrpc", "sentence1", "sentence2", ("not_equivalent", "equivalent")),
    "qqp": _TfdsTask("qqp", "question1", "question2", ("not_duplicate", "duplicate")),
    "stsb": _TfdsTask("sts-b", "sentence1", "sentence2"),
    "mnli": _TfdsTask("mnli", "premise", "hypothesis", _NLI, _MNLI_SPLIT_NAMES),
    "mnli_matched": _TfdsTask("mnli", "premise", "hypothesis", _NLI, ("dev", "test")),
    "mnli_mismatched": _TfdsTask("mnli", "premise", "hypothesis", _NLI, ("dev", "test")),
    "qnli": _TfdsTask("qnli", "question", "sentence", ("entailment", "not_entailment")),
    "rte": _TfdsTask("rte", "sentence1", "sentence2", ("entailment", "not_entailment")),
    "wnli": _TfdsTask("wnli", "sentence1", "sentence2", ("not_entailment", "entailment")),
    "ax": _TfdsTask("ax", "premise", "hypothesis", _NLI, ("test",)),
}


class TfdsProcessor(classifier_data.DataProcessor):
  """Reads a `glue/*` dataset of TensorFlow Datasets into `InputExample`s.

  Splits are named as for the TSV files (`train`, `dev`, `test`, and for MNLI also `dev_matched`,
  `dev_mismatched`, `test_matched`, `test_mismatched`; `dev` is the matched one). Labels, and the
  label order, are those of `GlueProcessor` for the same task; TFDS's unlabeled test examples
  (label -1) get `label=None`. Guids are `<split>-<idx>`.

  Args:
    tfds_name: `glue/<config>`, e.g. `glue/sst2`, `glue/mnli`, `glue/stsb`, `glue/ax`.
    data_dir: the TFDS data folder (TFDS's default when `None`).
    skip_malformed_rows: what to do with an example whose text is empty: raise `DataError` (False),
      or skip it, count it in `skipped_rows` and log it (True). `None` uses the GLUE task's
      default, as `GlueProcessor` does.

  Attributes:
    skipped_rows: TFDS split name -> number of examples skipped in it.

  Example:

  >>> processor = TfdsProcessor("glue/mrpc")
  >>> processor.get_labels()
  ['0', '1']
  """

  def __init__(self, tfds_name, data_dir=None, skip_malformed_rows=None):
    benchmark, _, config = tfds_name.partition("/")
    if benchmark != "glue" or config not in TFDS_GLUE_TASKS:
      raise ValueError(f"Unsupported TFDS dataset {tfds_name!r}; choose one of "
                       f"{['glue/' + name for name in TFDS_GLUE_TASKS]}")
    self.tfds_name = tfds_name
    self.data_dir = data_dir
    self._spec = TFDS_GLUE_TASKS[config]
    self.task = glue.glue_task(self._spec.task)
    self.is_regression = self.task.is_regression
    self.skip_malformed_rows = (self.task.skip_malformed_by_default
                                if skip_malformed_rows is None else skip_malformed_rows)
    self.skipped_rows = {}
    self._builder = None

  @property
  def splits(self):
    return self._spec.splits

  def get_labels(self):
    return list(self.task.labels)

  def tfds_split(self, split):
    """The TFDS split name for one of `self.splits`."""
    self._check_split(split)
    if self._spec.splits == _MNLI_SPLIT_NAMES:
      split = _MNLI_SPLITS.get(split, split)
    return _SPLIT_NAMES.get(split, split)

  def get_examples(self, split):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    tfds_split = self.tfds_split(split)
    builder = self._get_builder(tfds)
    issues = classifier_data.RowIssues(f"TFDS {self.tfds_name} split {tfds_split!r}",
                                       skip=self.skip_malformed_rows, position_name="idx")
    examples = []
    for record in tfds.as_numpy(builder.as_dataset(split=tfds_split, shuffle_files=False)):
      idx = int(record["idx"])
      texts = [record[feature].decode("utf-8") if feature else None
               for feature in (self._spec.text_a, self._spec.text_b)]
      empty = [feature for feature, text in zip((self._spec.text_a, self._spec.text_b), texts)
               if text is not None and not text.strip()]
      if empty:
        issues.report(idx, f"feature {empty[0]!r} is empty")
        continue
      examples.append(classifier_data.InputExample(f"{split}-{idx}", texts[0], texts[1],
                                                   self._label(record["label"])))
    self.skipped_rows[tfds_split] = issues.finish()
    if not examples:
      raise classifier_data.DataError(f"{issues.path} has no examples")
    return examples

  def _get_builder(self, tfds):
    """Prepares the TFDS builder once and checks its label names against the expected ones."""
    if self._builder is None:
      builder = tfds.builder(self.tfds_name, data_dir=self.data_dir)
      if not builder.is_prepared():
        _check_reachable(self.tfds_name, builder)
      builder.download_and_prepare()
      if not self.is_regression:
        names = tuple(builder.info.features["label"].names)
        if names != self._spec.tfds_labels:
          raise classifier_data.DataError(
              f"TFDS {self.tfds_name} has label names {list(names)}, expected "
              f"{list(self._spec.tfds_labels)}; its label ids cannot be mapped to GLUE labels")
      self._builder = builder
    return self._builder

  def _label(self, value):
    """The GLUE label of a TFDS label; TFDS writes -1 (also as a float score) for unlabeled."""
    if value == -1:
      return None
    if self.is_regression:
      return float(value)
    return self._spec.label_for(int(value))


# Seconds to wait for the download server before saying that it cannot be reached.
_REACH_TIMEOUT_S = 10


def _check_reachable(tfds_name, builder):
  """Raises a `DataError` at once if the server of `builder`'s files cannot be reached.

  Without a network, TFDS retries each download for minutes and then raises a `requests`
  traceback; one request with a short timeout tells the same in seconds. It goes through the
  same proxies (`HTTPS_PROXY`) as TFDS' own downloads.
  """
  import requests  # pylint: disable=import-outside-toplevel  (a TFDS dependency)
  url = getattr(builder.builder_config, "data_url", None)
  if not url:
    return
  try:
    requests.head(url, timeout=_REACH_TIMEOUT_S, allow_redirects=True)
  except requests.RequestException as e:
    host = urllib.parse.urlsplit(url).netloc
    reason = type(e).__name__
    raise classifier_data.DataError(
        f"TFDS {tfds_name} is not in {builder.data_dir} and cannot be downloaded: {host} is not "
        f"reachable ({reason}); prepare it on a machine with a network (`tfds build "
        f"{tfds_name}`) and copy its folder there (--data_dir, with --tfds_name, or TFDS_DATA_DIR "
        f"choose where TFDS keeps its data), or read the GLUE TSV files instead (--task_name "
        f"and --data_dir, without --tfds_name)") from None
