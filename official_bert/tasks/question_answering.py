"""Extractive question answering (SQuAD v1.1 and v2.0): the library side of `run_squad.py`.

`SquadTask`, run by `official_bert.tasks.driver.run`, follows the original `run_squad.py`, which
has no evaluation mode: prediction scores the predict file when it holds answers.

* training: the questions of `train_file` are shuffled with the fixed seed 12345, cut into
  windowed features (`official_bert.data.squad`) and streamed into `output_dir/train.tf_record`;
  the step count comes from the number of questions, as in the original, and a
  `BertSpanLabeler` is fine-tuned by the driver. The loss is the
  original's: the mean of the start and end softmax cross-entropies over the positions;
* prediction: the features of `predict_file` go to `output_dir/eval.tf_record`, the model gives
  start and end logits per feature (keyed by `unique_id`), and `write_predictions` turns them into
  `predictions.json`, `nbest_predictions.json` and for v2.0 `null_odds.json`;
* when `predict_file` holds answers (a dev set), prediction goes on: the official evaluation scores
  `predictions.json` into `eval_results.txt`: `exact_match` and `f1` for v1.1; for v2.0 `exact`,
  `f1`, `total`, the `HasAns_*` / `NoAns_*` breakdown and `best_exact`, `best_f1` with their
  `*_thresh` (the `null_score_diff_threshold` that would have scored best). The v2.0 evaluation
  counts a question as unanswered when its null odds exceed `null_score_diff_threshold`, which
  is exactly when `predictions.json` holds "" for it, so the scores are those of that file;
* the fine-tuned model folder (task `span`) is saved in `output_dir`, and with `export_dir` a
  SavedModel that answers a raw (question, context) pair (see
  `official_bert.export.export_span_labeler`).
"""

import json
import os
import random

from absl import logging
import tensorflow as tf

from official_bert.data import squad
from official_bert.evaluation import squad_evaluate, squad_postprocessing
from official_bert.models import BertSpanLabeler
from official_bert.tasks import base, experiment

TRAIN_RECORDS = "train.tf_record"
PREDICT_RECORDS = "eval.tf_record"
PREDICTIONS = "predictions.json"
NBEST_PREDICTIONS = "nbest_predictions.json"
NULL_ODDS = "null_odds.json"
# The original shuffles the training questions with this seed before writing them.
TRAIN_SHUFFLE_SEED = 12345
_VERBOSE_FEATURES = 20


def _position_loss(positions, logits):
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.cast(positions, tf.int32), tf.cast(logits, tf.float32)))


def span_loss(outputs, labels):
  """The original SQuAD loss: the mean of the start and end cross-entropies over positions.

  Args:
    outputs: `BertSpanLabeler` outputs, `start_logits` and `end_logits` `[batch, seq]`.
    labels: dict with int `start_positions`, `end_positions` `[batch]` (0, `[CLS]`, when the
      window holds no answer).

  Returns:
    Dict of float32 scalars: `loss` (`(start_loss + end_loss) / 2`), `start_loss`, `end_loss`.

  Example:

  >>> import numpy as np
  >>> losses = span_loss({"start_logits": np.zeros((1, 4), "float32"),
  ...                     "end_logits": np.zeros((1, 4), "float32")},
  ...                    {"start_positions": np.array([1]), "end_positions": np.array([2])})
  >>> round(float(losses["loss"]), 4)  # log(4)
  1.3863
  """
  start_loss = _position_loss(labels["start_positions"], outputs["start_logits"])
  end_loss = _position_loss(labels["end_positions"], outputs["end_logits"])
  return {"loss": (start_loss + end_loss) / 2.0, "start_loss": start_loss, "end_loss": end_loss}


def span_metrics(outputs, labels):
  """How often the highest logit is the gold start / end, as `(correct, count)` for the logs."""
  metrics = {}
  for name in ("start", "end"):
    predicted = tf.argmax(outputs[f"{name}_logits"], axis=-1, output_type=tf.int32)
    correct = tf.cast(tf.equal(predicted, tf.cast(labels[f"{name}_positions"], tf.int32)),
                      tf.float32)
    metrics[f"{name}_accuracy"] = (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))
  return metrics


def _input_fn(path, max_seq_length, is_training):
  """An input function over SQuAD TFRecords (`Task.build_inputs`); prediction keeps the ids."""

  def input_fn(batch_size, input_context):
    dataset = squad.create_squad_dataset(path, max_seq_length, batch_size, is_training,
                                         input_context=input_context)
    if is_training:
      return dataset
    return dataset.map(lambda inputs, labels: dict(inputs, unique_ids=labels["unique_ids"]))

  return input_fn


def _log_features(features, examples):
  """The original's log of the first features, for `verbose_logging`."""
  for feature in features[:_VERBOSE_FEATURES]:
    example = examples[feature.example_index]
    logging.info("*** Feature %d *** question %s, window %d", feature.unique_id, example.qas_id,
                 feature.doc_span_index)
    logging.info("tokens: %s", " ".join(feature.tokens))
    logging.info("token_to_orig_map: %s", " ".join(
        f"{position}:{index}" for position, index in feature.token_to_orig_map.items()))
    logging.info("token_is_max_context: %s", " ".join(
        f"{position}:{flag}" for position, flag in feature.token_is_max_context.items()))



def has_gold_answers(data_file):
  """Whether a SQuAD file can be scored: every question has `answers`, and some are non-empty.

  A v2.0 file also counts when its questions carry `is_impossible` (an all-unanswerable dev set).
  """
  with tf.io.gfile.GFile(data_file, "r") as f:
    data = json.load(f)
  questions = [qa for article in data.get("data", []) for paragraph in article["paragraphs"]
               for qa in paragraph["qas"]]
  return bool(questions) and all("answers" in qa for qa in questions) and any(
      qa["answers"] or qa.get("is_impossible") for qa in questions)


@base.register(experiment.SquadConfig)
class SquadTask(base.Task):
  """Fine-tunes a `BertSpanLabeler` on SQuAD and/or answers (and scores) a SQuAD file.

  Args:
    config: the task's settings, a `SquadConfig` (the files, the windows, the answers).
    bert_config: the encoder's `BertConfig`.

  Example:

    base_dir = "uncased_L-12_H-768_A-12"
    config = ExperimentConfig(
        task=SquadConfig(vocab_file=f"{base_dir}/vocab.txt", train_file="train-v1.1.json",
                         predict_file="dev-v1.1.json"),
        trainer=TrainerConfig(train_batch_size=12, num_train_epochs=2.0,
                              optimizer=OptimizerConfig(learning_rate=3e-5)),
        model=BertConfig.from_json_file(f"{base_dir}/bert_config.json"),
        output_dir="/tmp/squad_base", init_checkpoint=f"{base_dir}/bert_model.ckpt")
    driver.run_experiment(config, Modes(train=True, predict=True))
  """

  supported_modes = ("train", "predict")
  output_features = ("unique_ids",)

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    self.name = f"SQuAD {'v2.0' if self.config.version_2_with_negative else 'v1.1'}"

  def validate(self, modes, init_checkpoint=None, **paths):
    super().validate(modes, init_checkpoint, **paths)
    if modes.train and not self.config.train_file:
      raise ValueError("If do_train is True, then train_file must be specified.")
    if modes.predict and not self.config.predict_file:
      raise ValueError("If do_predict is True, then predict_file must be specified.")
    self.check_segments(2, "SQuAD's (question, context) pairs")
    if self.config.max_seq_length <= self.config.max_query_length + 3:
      raise ValueError(f"The max_seq_length ({self.config.max_seq_length}) must be greater than "
                       f"max_query_length ({self.config.max_query_length}) + 3.")
    if modes.train:
      self.train_files = [self.config.train_file]
      self.train_examples, self.skipped = self._read(self.config.train_file, is_training=True)
      random.Random(TRAIN_SHUFFLE_SEED).shuffle(self.train_examples)
    if modes.predict:
      self.predict_examples, _ = self._read(self.config.predict_file, is_training=False)
      self.scored = has_gold_answers(self.config.predict_file)

  def _read(self, path, is_training):
    examples, skipped = squad.read_squad_examples(
        path, is_training=is_training, version_2_with_negative=self.config.version_2_with_negative,
        bad_answer_policy=self.config.bad_answer_policy)
    if not examples:
      raise ValueError(f"{path} holds no usable training question ({len(skipped)} skipped)."
                       if is_training else f"{path} holds no question to answer.")
    return examples, skipped

  def _windows(self, examples, is_training):
    return squad.convert_examples_to_features(
        examples, self.tokenizer, self.config.max_seq_length, self.config.doc_stride,
        self.config.max_query_length, is_training=is_training)

  def build_model(self):
    return BertSpanLabeler(self.bert_config, kernels=self.kernels)

  def loss(self, outputs, labels):
    return span_loss(outputs, labels)

  def metrics(self, outputs, labels):
    return span_metrics(outputs, labels)

  def num_train_examples(self):
    """The questions, not the windows, as in the original."""
    return len(self.train_examples)

  def build_inputs(self, split, output_dir, seed=None):
    """Writes the split's windows to `train.tf_record` (training) or `eval.tf_record`
    (prediction, as the original) in `output_dir` and reads them. The training questions were
    shuffled with the original's fixed seed; the records are read in order."""
    del seed
    if split == "train":
      records = os.path.join(output_dir, TRAIN_RECORDS)
      num_features = squad.write_features(self._windows(self.train_examples, is_training=True),
                                          records, is_training=True)
      self.summary.append(f"train: {len(self.train_examples)} questions ({len(self.skipped)} "
                          f"skipped, answer not at answer_start) in {num_features} windows")
      return _input_fn(records, self.config.max_seq_length, is_training=True)
    examples = self.predict_examples
    self.predict_features = list(self._windows(examples, is_training=False))
    self.summary.append(f"predict: {len(examples)} questions in {len(self.predict_features)} "
                        "windows")
    if self.config.verbose_logging:
      _log_features(self.predict_features, examples)
    records = os.path.join(output_dir, PREDICT_RECORDS)
    squad.write_features(self.predict_features, records, is_training=False)
    return _input_fn(records, self.config.max_seq_length, is_training=False)

  def postprocess(self, split, outputs, output_dir):
    """Writes `predictions.json`, `nbest_predictions.json` (and `null_odds.json` for v2.0) and,
    when `predict_file` holds answers, scores `predictions.json` (the official evaluation)."""
    config, examples, features = self.config, self.predict_examples, self.predict_features
    results = [squad_postprocessing.RawResult(int(unique_id), start, end) for unique_id, start, end
               in zip(outputs["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
    paths = [os.path.join(output_dir, name) for name in (PREDICTIONS, NBEST_PREDICTIONS, NULL_ODDS)]
    predictions = squad_postprocessing.write_predictions(
        examples, features, results, config.n_best_size, config.max_answer_length,
        config.do_lower_case, *paths, version_2_with_negative=config.version_2_with_negative,
        null_score_diff_threshold=config.null_score_diff_threshold)
    if config.verbose_logging:
      for example in examples:
        logging.info("%s  %s -> %r", example.qas_id, example.question_text,
                     predictions[example.qas_id])
    written = paths if config.version_2_with_negative else paths[:2]
    if not self.scored:
      logging.info("%s has no answers to score predictions against.", config.predict_file)
      return None, written
    if config.version_2_with_negative:
      return squad_evaluate.evaluate_files(
          config.predict_file, paths[0], na_prob_file=paths[2],
          na_prob_thresh=config.null_score_diff_threshold), written
    return squad_evaluate.evaluate_files(config.predict_file, paths[0]), written

  def fingerprint(self):
    fingerprint = super().fingerprint()
    # The longest answer is a choice of each prediction run, not a property of the model.
    fingerprint["model"]["extra"].pop("max_answer_length")
    return fingerprint

  def model_folder_fields(self):
    return {"extra": {"max_query_length": self.config.max_query_length,
                      "max_answer_length": self.config.max_answer_length}}
