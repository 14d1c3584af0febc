"""Extractive question answering (SQuAD v1.1 and v2.0): the library side of `run_squad.py`.

`run_squad` follows the original `run_squad.py`:

* training: the questions of `train_file` are shuffled with the fixed seed 12345, cut into
  windowed features (`official_bert.data.squad`) and streamed into `output_dir/train.tf_record`;
  the step count comes from the number of questions, as in the original, and a
  `BertSpanLabeler` is fine-tuned with the shared `runner.Runner`. The loss is the
  original's: the mean of the start and end softmax cross-entropies over the positions;
* prediction: the features of `predict_file` go to `output_dir/eval.tf_record`, the model gives
  start and end logits per feature (keyed by `unique_id`), and `write_predictions` turns them into
  `predictions.json`, `nbest_predictions.json` and for v2.0 `null_odds.json`;
* when `predict_file` holds answers (a dev set), the official evaluation scores
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

from official_bert import tokenization
from official_bert.configs import BertConfig
from official_bert.data import squad
from official_bert.evaluation import squad_evaluate, squad_postprocessing
from official_bert.models import BertSpanLabeler
from official_bert.tasks import runner as run_lib
from official_bert.training import progress

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


def read_training_examples(train_file, version_2_with_negative=False, seed=TRAIN_SHUFFLE_SEED):
  """Reads the training questions of `train_file` and shuffles them as the original did.

  Args:
    train_file: a SQuAD JSON file with one answer per answerable question.
    version_2_with_negative: read `is_impossible` (SQuAD v2.0).
    seed: the seed of the shuffle (12345 in the original).

  Returns:
    `(examples, skipped_qas_ids)`, as `squad.read_squad_examples`.
  """
  examples, skipped = squad.read_squad_examples(train_file, is_training=True,
                                                version_2_with_negative=version_2_with_negative)
  if not examples:
    raise ValueError(f"{train_file} holds no usable training question ({len(skipped)} skipped).")
  random.Random(seed).shuffle(examples)
  return examples, skipped


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


def _input_fn(path, max_seq_length, is_training):
  """An input function over SQuAD TFRecords for `Runner`; prediction keeps the ids."""

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


def predict_file_answers(runner, predict_file, tokenizer, *, max_seq_length, doc_stride,
                         max_query_length, n_best_size, max_answer_length, do_lower_case,
                         version_2_with_negative=False, null_score_diff_threshold=0.0,
                         verbose_logging=False):
  """Answers every question of `predict_file` and writes the original's prediction files.

  Args:
    runner: a `runner.Runner` holding a `BertSpanLabeler`.
    predict_file: a SQuAD JSON file (answers not needed).
    tokenizer: the `FullTokenizer`.
    max_seq_length, doc_stride, max_query_length: see `squad.convert_examples_to_features`.
    n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
    null_score_diff_threshold: see `squad_postprocessing.postprocess_predictions`.
    verbose_logging: log the first features and every question's answer.

  Returns:
    The paths written: `predictions.json`, `nbest_predictions.json` (and `null_odds.json` for
    v2.0) in `output_dir`; empty on a machine that is not the chief.
  """
  output_dir = runner.config.output_dir
  examples, _ = squad.read_squad_examples(predict_file, is_training=False,
                                          version_2_with_negative=version_2_with_negative)
  if not examples:
    raise ValueError(f"{predict_file} holds no question to answer.")
  features = list(squad.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=False))
  if verbose_logging:
    _log_features(features, examples)
  records = os.path.join(output_dir, PREDICT_RECORDS)
  squad.write_features(features, records, is_training=False)
  outputs = runner.predict(_input_fn(records, max_seq_length, is_training=False),
                           keep=("unique_ids",))
  if len(outputs["unique_ids"]) != len(features):
    raise RuntimeError(f"{len(features)} features but {len(outputs['unique_ids'])} predictions; "
                       "prediction runs on one machine (all of its replicas) only.")
  if not runner.is_chief:
    return []
  results = [squad_postprocessing.RawResult(int(unique_id), start, end) for unique_id, start, end
             in zip(outputs["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
  paths = [os.path.join(output_dir, name) for name in (PREDICTIONS, NBEST_PREDICTIONS, NULL_ODDS)]
  predictions = squad_postprocessing.write_predictions(
      examples, features, results, n_best_size, max_answer_length, do_lower_case, *paths,
      version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=null_score_diff_threshold)
  if verbose_logging:
    for example in examples:
      logging.info("%s  %s -> %r", example.qas_id, example.question_text,
                   predictions[example.qas_id])
  return paths if version_2_with_negative else paths[:2]


def evaluate_predictions(predict_file, output_dir, version_2_with_negative=False,
                         null_score_diff_threshold=0.0):
  """Scores `output_dir/predictions.json` against `predict_file` with the official evaluation.

  Args:
    predict_file: the SQuAD JSON file with gold answers.
    output_dir: the folder holding `predictions.json` (and `null_odds.json` for v2.0).
    version_2_with_negative: use the v2.0 evaluation with the null odds.
    null_score_diff_threshold: the threshold the predictions were made with.

  Returns:
    The official metrics (see the module docstring).
  """
  predictions = os.path.join(output_dir, PREDICTIONS)
  if not version_2_with_negative:
    return squad_evaluate.evaluate_files(predict_file, predictions)
  return squad_evaluate.evaluate_files(predict_file, predictions,
                                       na_prob_file=os.path.join(output_dir, NULL_ODDS),
                                       na_prob_thresh=null_score_diff_threshold)


def run_squad(*, bert_config_file, vocab_file, config, train_file=None, predict_file=None,
              do_lower_case=True, max_seq_length=384, doc_stride=128, max_query_length=64,
              do_train=False, do_predict=False, n_best_size=20, max_answer_length=30,
              version_2_with_negative=False, null_score_diff_threshold=0.0,
              verbose_logging=False):
  """Fine-tunes a `BertSpanLabeler` on SQuAD and/or answers the questions of a SQuAD file.

  Args:
    bert_config_file: the `bert_config.json` of the pre-trained model.
    vocab_file: its WordPiece vocabulary.
    config: the `runner.RunConfig` (output folder, init checkpoint, batch sizes,
      learning rate, epochs, warmup, export, engine).
    train_file: SQuAD JSON for training, e.g. `train-v1.1.json`.
    predict_file: SQuAD JSON to answer, e.g. `dev-v1.1.json`; scored when it holds answers.
    do_lower_case: lower-case the text (uncased models).
    max_seq_length: WordPieces per window, `[CLS]` and both `[SEP]` included.
    doc_stride: WordPieces between the starts of a long context's windows.
    max_query_length: questions are cut to this many WordPieces.
    do_train: fine-tune on `train_file` (resuming from `config.output_dir`).
    do_predict: answer `predict_file`.
    n_best_size: answers kept per question in `nbest_predictions.json`.
    max_answer_length: longest answer, in WordPieces.
    version_2_with_negative: SQuAD v2.0: some questions have no answer.
    null_score_diff_threshold: v2.0: predict "" when the null score minus the best span's score
      exceeds this.
    verbose_logging: log the first features and every question's predicted answer.

  Returns:
    The evaluation results (official metrics and `global_step`); empty when nothing was scored.

  Example:

    run_squad(bert_config_file="uncased_L-12_H-768_A-12/bert_config.json",
              vocab_file="uncased_L-12_H-768_A-12/vocab.txt", train_file="train-v1.1.json",
              predict_file="dev-v1.1.json", do_train=True, do_predict=True,
              config=RunConfig(output_dir="/tmp/squad_base", train_batch_size=12,
                                      learning_rate=3e-5, num_train_epochs=2.0,
                                      init_checkpoint="uncased_L-12_H-768_A-12/bert_model.ckpt"))
  """
  bert_config = BertConfig.from_json_file(bert_config_file)
  run_lib.validate_run(do_train=do_train, do_eval=False, do_predict=do_predict,
                           bert_config=bert_config, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case, init_checkpoint=config.init_checkpoint)
  if do_train and not train_file:
    raise ValueError("If do_train is True, then train_file must be specified.")
  if do_predict and not predict_file:
    raise ValueError("If do_predict is True, then predict_file must be specified.")
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"The max_seq_length ({max_seq_length}) must be greater than "
                     f"max_query_length ({max_query_length}) + 3.")
  tokenizer = tokenization.model_tokenizer(vocab_file, do_lower_case, bert_config.vocab_size)
  windows = dict(max_seq_length=max_seq_length, doc_stride=doc_stride,
                 max_query_length=max_query_length)
  train_examples, skipped = (read_training_examples(train_file, version_2_with_negative)
                             if do_train else (None, []))
  runner = run_lib.Runner(
      lambda: BertSpanLabeler(bert_config), span_loss, config, metrics_fn=span_metrics,
      num_train_examples=len(train_examples) if do_train else None)
  if not do_train and runner.global_step == 0:
    logging.warning("%s holds no fine-tuned checkpoint: the span layer is untrained.",
                    config.output_dir)
  output_dir, summary, files = config.output_dir, [], []

  if do_train:
    records = os.path.join(output_dir, TRAIN_RECORDS)
    num_features = squad.write_features(
        squad.convert_examples_to_features(train_examples, tokenizer, is_training=True,
                                           **windows), records, is_training=True)
    summary.append(f"train: {len(train_examples)} questions ({len(skipped)} skipped, answer not "
                   f"found) in {num_features} windows")
    runner.train(_input_fn(records, max_seq_length, is_training=True))
  results = {}
  if do_predict:
    files += predict_file_answers(
        runner, predict_file, tokenizer, n_best_size=n_best_size,
        max_answer_length=max_answer_length, do_lower_case=do_lower_case,
        version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold, verbose_logging=verbose_logging,
        **windows)
    if runner.is_chief and has_gold_answers(predict_file):
      metrics = evaluate_predictions(predict_file, output_dir, version_2_with_negative,
                                     null_score_diff_threshold)
      results = dict(metrics, global_step=runner.global_step)
      progress.write_scalars(os.path.join(output_dir, "eval"), runner.global_step, metrics)
      files.append(runner.write_eval_results(results))
    elif runner.is_chief:
      logging.info("%s has no answers to score predictions against.", predict_file)
  if do_train or config.export_dir:
    files.append(runner.save(
        vocab_file=vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
        extra={"max_query_length": max_query_length, "max_answer_length": max_answer_length}))
  logging.info("***** Summary *****  SQuAD %s, step %d; %s; wrote %s",
               "v2.0" if version_2_with_negative else "v1.1", runner.global_step,
               "; ".join(summary) or "no training", ", ".join(files))
  return results
