"""Token classification (named-entity recognition): the library side of `run_ner.py`.

`run_ner` reads CoNLL-style files with `official_bert.data.conll` (one token a line, the tag in
the last column, a blank line between sentences), fine-tunes a `BertTokenClassifier` with the
shared `runner.Runner` and writes:

* `labels.txt`: the tags of the training file, one a line in label-id order (`O` first), so that
  evaluation and prediction runs on the same `output_dir` need no training file (without one,
  they take the labels of the training file);
* `eval_results.txt`: entity-level `eval_precision`, `eval_recall`, `eval_f1` (the CoNLL
  definition, `official_bert.evaluation.ner_metrics`), the same per entity type
  (`eval_<type>/f1`, ...), `eval_token_accuracy`, `eval_loss` and `global_step`;
* `eval_predictions.txt` and `test_predictions.txt`: the evaluated and predicted files back in
  CoNLL format, one line `token [gold] predicted` per original word;
* the fine-tuned model folder (task `token_classification`, with the tag names), and with
  `export_dir` a SavedModel.

Each word's tag is learned and predicted on its first WordPiece; the other pieces, `[CLS]`,
`[SEP]` and padding carry label id -1 and count neither in the loss nor in the scores. Sentences
longer than `max_seq_length` pieces are split between words and joined back.
"""

import os

from absl import logging
import tensorflow as tf

from official_bert import tokenization
from official_bert.configs import BertConfig
from official_bert.data import conll
from official_bert.evaluation import ner_metrics
from official_bert.models import BertTokenClassifier
from official_bert.tasks import runner as run_lib

LABELS_FILE = "labels.txt"
EVAL_PREDICTIONS = "eval_predictions.txt"
TEST_PREDICTIONS = "test_predictions.txt"
_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


def token_classification_loss(outputs, labels):
  """Cross-entropy over the positions with a label (first pieces), averaged over them.

  Args:
    outputs: `BertTokenClassifier` outputs, `logits` `[batch, seq, num_labels]`.
    labels: int `[batch, seq]` label ids, -1 where nothing is learned.

  Returns:
    `{"loss": scalar}`; 0 for a batch without any labelled position.
  """
  labels = tf.cast(labels, tf.int32)
  weights = tf.cast(labels >= 0, tf.float32)
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.maximum(labels, 0), tf.cast(outputs["logits"], tf.float32))
  return {"loss": tf.math.divide_no_nan(tf.reduce_sum(per_position * weights),
                                        tf.reduce_sum(weights))}


def token_classification_metrics(outputs, labels):
  """Accuracy of the tags on the first pieces of a batch, for the training logs.

  Args:
    outputs: `BertTokenClassifier` outputs, `logits` `[batch, seq, num_labels]`.
    labels: int `[batch, seq]` label ids, -1 where nothing is predicted.

  Returns:
    `{"token_accuracy": (correct, count)}`.
  """
  labels = tf.cast(labels, tf.int32)
  weights = tf.cast(labels >= 0, tf.float32)
  predictions = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
  correct = tf.cast(tf.equal(predictions, labels), tf.float32) * weights
  return {"token_accuracy": (tf.reduce_sum(correct), tf.reduce_sum(weights))}


def write_labels(path, labels):
  """Writes `labels.txt` atomically.

  Args:
    path: the file.
    labels: the tags in label-id order, written one a line.
  """
  run_lib.write_file(path, "".join(f"{label}\n" for label in labels))


def read_labels(path):
  """Reads `labels.txt`.

  Args:
    path: the file, one tag a line in label-id order.

  Returns:
    The list of tags.

  Raises:
    ValueError: naming the line of a blank, padded or repeated tag, or an empty file.
  """
  with open(path, encoding="utf-8") as f:
    labels = [line.rstrip("\n") for line in f]
  for line_number, label in enumerate(labels, start=1):
    if not label.strip() or label != label.strip():
      raise ValueError(f"{path}:{line_number}: expected a tag without spaces, got {label!r}")
    if labels.index(label) != line_number - 1:
      raise ValueError(f"{path}:{line_number}: the tag {label!r} is listed twice")
  if not labels:
    raise ValueError(f"{path} is empty; it should list the tags of the training data")
  return labels


def _split_file(split, data_dir, path):
  """The file of `split`: `path` when given, else `conll.find_split_file` in `data_dir`."""
  if path:
    return path
  if not data_dir:
    raise ValueError(f"Give data_dir or the {split} file.")
  return conll.find_split_file(data_dir, _SPLITS[split])


def _labels(output_dir, train_sentences, train_path):
  """The label list: that of the training sentences (checked against an earlier run's), else the
  one `labels.txt` of `output_dir` records, else that of the training file `train_path`."""
  path = os.path.join(output_dir, LABELS_FILE)
  saved = read_labels(path) if os.path.exists(path) else None
  if train_sentences is None and saved is not None:
    return saved
  if train_sentences is None:
    if train_path is None:
      raise FileNotFoundError(f"{path} is missing and there is no training file: evaluation and "
                              "prediction use the labels of the training data (run do_train "
                              "first in this output_dir, or give train_file or data_dir).")
    logging.info("No %s yet: the labels are those of %s.", path, train_path)
    return conll.get_label_list(conll.read_conll_file(train_path))
  labels = conll.get_label_list(train_sentences)
  if saved is not None and saved != labels:
    raise ValueError(f"{path} lists the labels {saved} of an earlier run, but {train_path} has "
                     f"{labels}; use a new output_dir for other data.")
  return labels


def _train_file_if_any(data_dir, train_file):
  """The training file when one is given or `data_dir` holds one, else None."""
  if train_file or not data_dir:
    return train_file
  try:
    return conll.find_split_file(data_dir, "train")
  except FileNotFoundError:
    return None


def _input_fn(features, is_training, seed=None):
  """An input function over token-classification features, for `Runner`."""
  return run_lib.in_memory_input_fn(
      lambda batch_size: conll.make_dataset(features, batch_size, is_training=is_training,
                                            seed=seed).map(
          lambda inputs, label_ids, label_mask: (inputs, label_ids)))


def _predict_tags(runner, sentences, features, labels, batch_size=None):
  """Runs the model; returns `(logits, tags per sentence)`."""
  logits = runner.predict(_input_fn(features, is_training=False), batch_size=batch_size)["logits"]
  if len(logits) != len(features):
    raise RuntimeError(f"{len(features)} features but {len(logits)} predictions; prediction "
                       "runs on one machine (all of its replicas) only.")
  return logits, conll.predictions_to_tags(features, logits, sentences, labels)


def score_predictions(sentences, predicted_tags, features, logits):
  """Entity-level scores (overall and per type), token accuracy and loss of an evaluation set.

  Args:
    sentences: the tagged `TaggedSentence`s.
    predicted_tags: one list of tags per sentence.
    features: the features the logits were computed on.
    logits: float `[num_features, seq, num_labels]`.

  Returns:
    `(metrics, report)`: a flat dict of floats (`precision`, `recall`, `f1`, `token_accuracy`,
    `<type>/precision`, ..., `loss`) and the `ner_metrics.NerReport`.
  """
  report = ner_metrics.evaluate([s.tags for s in sentences], predicted_tags)
  loss = token_classification_loss({"logits": logits}, features.label_ids)["loss"]
  return dict(report.to_dict(), loss=float(loss)), report


def run_ner(*, bert_config_file, vocab_file, config, data_dir=None, train_file=None,
            eval_file=None, predict_file=None, do_lower_case=True, max_seq_length=128,
            do_train=False, do_eval=False, do_predict=False):
  """Fine-tunes, evaluates and/or predicts a token classifier on CoNLL-style files.

  Args:
    bert_config_file: the `bert_config.json` of the pre-trained model.
    vocab_file: its WordPiece vocabulary.
    config: the `runner.RunConfig` (output folder, init checkpoint, batch sizes,
      learning rate, epochs, warmup, export, engine).
    data_dir: a folder with `train.txt`, `dev.txt` or `valid.txt`, `test.txt` (or `.conll`).
    train_file: the training file, instead of `data_dir`'s; its tags are the labels.
    eval_file: the tagged evaluation file.
    predict_file: the file to tag (a tag column is optional).
    do_lower_case: lower-case the text (uncased models).
    max_seq_length: WordPieces per feature, `[CLS]` and `[SEP]` included; longer sentences are
      split between words.
    do_train: fine-tune (resuming from `config.output_dir`).
    do_eval: evaluate into `eval_results.txt` and `eval_predictions.txt`.
    do_predict: tag the predict file into `test_predictions.txt`.

  Returns:
    The evaluation results (dict of floats with `global_step`); empty without `do_eval`.

  Example:

    run_ner(bert_config_file="cased_L-12_H-768_A-12/bert_config.json",
            vocab_file="cased_L-12_H-768_A-12/vocab.txt", data_dir="conll2003",
            do_lower_case=False, do_train=True, do_eval=True,
            config=RunConfig(output_dir="/tmp/ner_output", learning_rate=5e-5,
                                    init_checkpoint="cased_L-12_H-768_A-12"))
  """
  bert_config = BertConfig.from_json_file(bert_config_file)
  run_lib.validate_run(do_train=do_train, do_eval=do_eval, do_predict=do_predict,
                           bert_config=bert_config, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case, init_checkpoint=config.init_checkpoint)
  files = {split: _split_file(split, data_dir, path) for split, path, wanted in (
      ("train", train_file, do_train), ("eval", eval_file, do_eval),
      ("predict", predict_file, do_predict)) if wanted}
  sentences = {split: conll.read_conll_file(path) for split, path in files.items()}
  if do_eval and sentences["eval"][0].tags is None:
    raise ValueError(f"{files['eval']} has no tag column; evaluation needs gold tags.")
  labels = _labels(config.output_dir, sentences.get("train"),
                   files.get("train") or _train_file_if_any(data_dir, train_file))
  tokenizer = tokenization.model_tokenizer(vocab_file, do_lower_case, bert_config.vocab_size)
  features, summary = {}, []
  for split, split_sentences in sentences.items():
    features[split] = conll.convert_sentences_to_features(split_sentences, labels, tokenizer,
                                                          max_seq_length)
    summary.append(f"{split}: {len(split_sentences)} sentences from {files[split]} "
                   f"({features[split].num_split_sentences} split, "
                   f"{features[split].num_truncated_words} words truncated)")

  runner = run_lib.Runner(
      lambda: BertTokenClassifier(bert_config, num_classes=len(labels)),
      token_classification_loss, config, metrics_fn=token_classification_metrics,
      num_train_examples=len(features["train"]) if do_train else None)
  if not do_train and runner.global_step == 0:
    logging.warning("%s holds no fine-tuned checkpoint: the tagging layer is untrained.",
                    config.output_dir)
  written = []
  if do_train:
    if runner.is_chief:
      write_labels(os.path.join(config.output_dir, LABELS_FILE), labels)
    runner.train(_input_fn(features["train"], is_training=True, seed=config.engine.seed))
  results = {}
  if do_eval:
    logits, tags = _predict_tags(runner, sentences["eval"], features["eval"], labels,
                                 batch_size=config.eval_batch_size)
    metrics, report = score_predictions(sentences["eval"], tags, features["eval"], logits)
    logging.info("Entity-level scores on %s:\n%s", files["eval"], report.format())
    results = runner.eval_results(metrics)
    if runner.is_chief:
      path = os.path.join(config.output_dir, EVAL_PREDICTIONS)
      conll.write_predictions(path, sentences["eval"], tags)
      written += [runner.write_eval_results(results), path]
  if do_predict:
    _, tags = _predict_tags(runner, sentences["predict"], features["predict"], labels)
    if runner.is_chief:
      path = os.path.join(config.output_dir, TEST_PREDICTIONS)
      conll.write_predictions(path, sentences["predict"], tags)
      written.append(path)
  if do_train or config.export_dir:
    written.append(runner.save(vocab_file=vocab_file, do_lower_case=do_lower_case,
                               max_seq_length=max_seq_length, labels=labels))
  logging.info("***** Summary *****  NER, %d labels, step %d; %s; wrote %s", len(labels),
               runner.global_step, "; ".join(summary), ", ".join(written))
  return results
