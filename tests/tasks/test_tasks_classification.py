"""`ClassificationTask` through the driver: learning on a generated task, the original outputs,
resume, MNLI/AX, custom files, bad data and misuse, the original README command, real GLUE rows."""

import csv
import json
import logging
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertEncoder
from official_bert.checkpoints import save_tf1_checkpoint
from official_bert.data import synthetic
from official_bert.data.classifier_data import DataError
from official_bert.tasks import classification
from official_bert.tasks.experiment import ClassificationConfig, ExperimentConfig

from testing import (
  SPECIAL_TOKENS,
  assert_no_scheme_folders,
  engine_configs,
  file_uri,
  run_command_line,
  run_task,
  shared_data,
  tiny_bert_config,
)


def _model_files(directory, words, hidden=64, layers=2):
  """Writes `vocab.txt` (special tokens + `words`) and a `bert_config.json` of `layers` layers
  (two for the tests that learn; one for those that check the run's files and flow, whose checks
  do not depend on depth, and where a second layer only makes each program slower to trace)."""
  os.makedirs(directory, exist_ok=True)
  vocab = os.path.join(directory, "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(SPECIAL_TOKENS + sorted(set(words))) + "\n")
  config = os.path.join(directory, "bert_config.json")
  tiny_bert_config(len(SPECIAL_TOKENS) + len(set(words)), hidden_size=hidden,
                   num_hidden_layers=layers, max_position_embeddings=128).to_json_file(config)
  return config, vocab


def _write(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def _config(output_dir, **kwargs):
  """The tests' config: the engine's settings among `kwargs` change the defaults."""
  settings = dict(train_batch_size=16, eval_batch_size=32, predict_batch_size=32,
                  learning_rate=5e-4, num_train_epochs=6.0, enable_xla=False, seed=0,
                  steps_per_loop=50, log_steps=50)
  settings.update({name: kwargs.pop(name) for name in list(kwargs)
                   if name not in ExperimentConfig.__dataclass_fields__})
  return ExperimentConfig(output_dir=str(output_dir), **engine_configs(**settings), **kwargs)


def _run_classifier(**kwargs):
  return run_task(classification.ClassificationTask, **kwargs)


def _count_records(path):
  return sum(1 for _ in tf.data.TFRecordDataset(str(path)))


def _read_tsv(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n").split("\t") for line in f]


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory):
  """The generated SST-2-format sentiment task, re-split: 400 train, 200 dev, 50 test rows."""
  directory = tmp_path_factory.mktemp("sentiment")
  data = directory / "data"
  synthetic.write_sentiment_task(str(data), num_train=650, num_dev=1, seed=1)
  rows = (data / "train.tsv").read_text().splitlines()
  header, rows = rows[0], rows[1:]
  _write(data / "train.tsv", [header] + rows[:400])
  _write(data / "dev.tsv", [header] + rows[400:600])
  _write(data / "test.tsv", ["index\tsentence"] + [f"{i}\t{row.split(chr(9))[0]}"
                                                   for i, row in enumerate(rows[600:])])
  words = [word for row in rows for word in row.split("\t")[0].split()]
  config, vocab = _model_files(str(directory / "model"), words)
  return {"data": str(data), "config": config, "vocab": vocab, "dev": rows[400:600]}


def _sentiment_run(sentiment):
  return dict(bert_config_file=sentiment["config"], vocab_file=sentiment["vocab"],
              task_name="SST-2", data_dir=sentiment["data"], max_seq_length=24, do_eval=True)


@pytest.fixture(scope="module")
def learned_sentiment(sentiment, tmp_path_factory):
  """The sentiment task trained, evaluated, predicted and exported to ONNX in one run: its
  output folder, results, ONNX file and written `experiment_config.json`. Run once: the test of
  its learning and outputs and the test of its export check the same run."""
  root = tmp_path_factory.mktemp("learned_sentiment")
  output_dir, onnx_file = root / "out", root / "served" / "sentiment.onnx"
  results = _run_classifier(config=_config(output_dir, export_dir=str(onnx_file),
                                           export_format="onnx"),
                            do_train=True, do_predict=True, **_sentiment_run(sentiment))
  saved = json.loads((output_dir / "experiment_config.json").read_text())
  return dict(output_dir=output_dir, results=results, onnx_file=onnx_file, saved=saved)


@pytest.mark.slow
def test_sentiment_task_learns_writes_the_original_outputs_and_resumes(sentiment,
                                                                      learned_sentiment):
  output_dir, results = learned_sentiment["output_dir"], learned_sentiment["results"]
  majority = max(np.mean([row.endswith("\t1") for row in sentiment["dev"]]), 0.5)
  assert results["eval_accuracy"] > max(0.9, majority + 0.3)
  assert results["global_step"] == 150  # int(400 / 16 * 6.0)
  lines = (output_dir / "eval_results.txt").read_text().splitlines()
  assert [line.split(" = ")[0] for line in lines] == ["eval_accuracy", "eval_loss", "global_step"]
  assert lines[2] == "global_step = 150"
  for name, count in (("train", 400), ("eval", 200), ("predict", 50)):
    assert _count_records(output_dir / f"{name}.tf_record") == count

  probabilities = np.array(_read_tsv(output_dir / "test_results.tsv"), dtype=np.float64)
  assert probabilities.shape == (50, 2)
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
  submission = _read_tsv(output_dir / "SST-2.tsv")
  assert submission[0] == ["index", "prediction"]
  assert [row[0] for row in submission[1:]] == [str(i) for i in range(50)]
  assert [row[1] for row in submission[1:]] == [str(i) for i in probabilities.argmax(axis=1)]
  manifest = json.loads((output_dir / "model.json").read_text())
  assert manifest["kind"] == "classifier" and manifest["labels"] == ["0", "1"]
  assert manifest["extra"] == {"sentence_pair": False} and not manifest["is_regression"]

  # Running the same command again resumes at the final checkpoint: no more training.
  again = _run_classifier(config=_config(output_dir), do_train=True, **_sentiment_run(sentiment))
  assert again == results


@pytest.mark.slow
def test_mnli_evaluates_matched_and_mismatched_and_ax_uses_the_mnli_model(sentiment, tmp_path):
  words = ["good", "bad", "fine", "poor", "a", "b"]
  rng = np.random.default_rng(0)
  labels = ["contradiction", "entailment", "neutral"]

  def rows(count, labelled=True):
    lines = ["index\tsentence1\tsentence2" + ("\tgold_label" if labelled else "")]
    for i in range(count):
      text = " ".join(rng.choice(words, size=3))
      lines.append(f"{i}\t{text}\t{text[::-1]}" + (f"\t{labels[i % 3]}" if labelled else ""))
    return lines

  mnli, ax = tmp_path / "MNLI", tmp_path / "diagnostic"
  mnli.mkdir()
  ax.mkdir()
  for name, count, labelled in (("train", 32, True), ("dev_matched", 9, True),
                                ("dev_mismatched", 7, True), ("test_matched", 6, False),
                                ("test_mismatched", 5, False)):
    _write(mnli / f"{name}.tsv", rows(count, labelled))
  _write(ax / "diagnostic.tsv", rows(4, labelled=False))
  config, vocab = _model_files(str(tmp_path / "model"), words + [w[::-1] for w in words],
                               hidden=16, layers=1)
  output_dir = tmp_path / "out"
  common = dict(bert_config_file=config, vocab_file=vocab, max_seq_length=16)
  results = _run_classifier(
      task_name="MNLI", data_dir=str(mnli), config=_config(output_dir, num_train_epochs=1.0),
      do_train=True, do_eval=True, do_predict=True, **common)
  assert sorted(results) == ["eval_accuracy", "eval_loss", "eval_mismatched_accuracy",
                             "eval_mismatched_loss", "global_step"]
  assert len(_read_tsv(output_dir / "MNLI-m.tsv")) == 7
  assert len(_read_tsv(output_dir / "MNLI-mm.tsv")) == 6
  assert np.array(_read_tsv(output_dir / "test_results_mismatched.tsv")).shape == (5, 3)

  _run_classifier(task_name="AX", data_dir=str(ax), do_predict=True,
                  config=_config(output_dir), **common)
  ax_rows = _read_tsv(output_dir / "AX.tsv")
  assert ax_rows[0] == ["index", "prediction"] and len(ax_rows) == 5
  assert {row[1] for row in ax_rows[1:]} <= set(labels)
  assert np.array(_read_tsv(output_dir / "test_results_ax.tsv")).shape == (4, 3)
  with pytest.raises(ValueError, match="MNLI"):
    _run_classifier(task_name="AX", data_dir=str(ax), do_predict=True,
                    config=_config(tmp_path / "fresh"), **common)


@pytest.mark.slow
def test_xnli_trains_on_the_languages_file_and_evaluates_on_its_dev_rows(tmp_path):
  words = ["gut", "schlecht", "ja", "nein", "er", "sie"]
  rng = np.random.default_rng(0)
  labels = ["contradictory", "entailment", "neutral"]
  data = tmp_path / "xnli"
  (data / "multinli").mkdir(parents=True)
  train = ["premise\thypo\tlabel"]
  for i in range(32):
    text = " ".join(rng.choice(words, size=3))
    train.append(f"{text}\t{text}\t{labels[i % 3]}")
  _write(data / "multinli" / "multinli.train.de.tsv", train)
  dev = ["language\tgold_label\tsentence1\tsentence2\tpairID"]
  for i in range(12):
    language = ("de", "zh", "en")[i % 3]
    dev.append(f"{language}\t{('contradiction', 'entailment', 'neutral')[i % 3]}\tja er\tnein sie"
               f"\t{i}")
  _write(data / "xnli.dev.tsv", dev)
  config, vocab = _model_files(str(tmp_path / "model"), words, hidden=16, layers=1)
  output_dir = tmp_path / "out"
  results = _run_classifier(
      task_name="XNLI", data_dir=str(data), xnli_language="de", bert_config_file=config,
      vocab_file=vocab, max_seq_length=16, config=_config(output_dir, num_train_epochs=1.0),
      do_train=True, do_eval=True)
  assert results["global_step"] == 2  # int(32 / 16 * 1.0)
  assert 0 <= results["eval_accuracy"] <= 1
  assert _count_records(output_dir / "train.tf_record") == 32
  assert _count_records(output_dir / "eval.tf_record") == 4  # the German dev rows
  manifest = json.loads((output_dir / "model.json").read_text())
  assert manifest["labels"] == ["contradiction", "entailment", "neutral"]


@pytest.mark.slow
def test_custom_csv_pair_task(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  rng = np.random.default_rng(1)
  words = ["red", "blue", "green", "cat", "dog", "big"]

  def write_csv(name, count, labelled=True):
    with open(data / name, "w", newline="", encoding="utf-8") as f:
      writer = csv.writer(f)
      writer.writerow(["id", "first", "second"] + (["relation"] if labelled else []))
      for i in range(count):
        first, second = (", ".join(rng.choice(words, size=2)) for _ in range(2))
        writer.writerow([i, first, second] + (["same" if i % 2 else "other"] if labelled else []))

  write_csv("train.csv", 32)
  write_csv("dev.csv", 10)
  write_csv("test.csv", 6, labelled=False)
  config, vocab = _model_files(str(tmp_path / "model"), words + [","], hidden=16, layers=1)
  output_dir = tmp_path / "out"
  results = _run_classifier(
      bert_config_file=config, vocab_file=vocab, task_name="custom", data_dir=str(data),
      custom_options={"text_a_column": "first", "text_b_column": "second",
                      "label_column": "relation"},
      config=_config(output_dir, num_train_epochs=1.0), max_seq_length=16, do_train=True,
      do_eval=True, do_predict=True)
  assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step"]
  assert results["global_step"] == 2
  predictions = _read_tsv(output_dir / "test_predictions.tsv")
  assert predictions[0] == ["index", "prediction"] and len(predictions) == 7
  assert {row[1] for row in predictions[1:]} <= {"other", "same"}
  manifest = json.loads((output_dir / "model.json").read_text())
  assert manifest["labels"] == ["other", "same"] and manifest["extra"] == {"sentence_pair": True}
  record = tf.train.Example.FromString(
      next(iter(tf.data.TFRecordDataset(str(output_dir / "train.tf_record")))).numpy())
  assert 1 in record.features.feature["segment_ids"].int64_list.value


@pytest.mark.slow
def test_custom_jsonl_regression_task(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  words = ["one", "two", "three", "four"]
  for split, count in (("train", 32), ("dev", 8), ("test", 5)):
    with open(data / f"{split}.jsonl", "w", encoding="utf-8") as f:
      for i in range(count):
        record = {"text": " ".join(words[:i % 4 + 1])}
        if split != "test":
          record["score"] = i % 4 + 0.5
        f.write(json.dumps(record) + "\n")
  config, vocab = _model_files(str(tmp_path / "model"), words, hidden=16, layers=1)
  output_dir = tmp_path / "out"
  results = _run_classifier(
      bert_config_file=config, vocab_file=vocab, task_name="custom", data_dir=str(data),
      custom_options={"text_a_column": "text", "label_column": "score", "is_regression": True},
      config=_config(output_dir, num_train_epochs=1.0), max_seq_length=8, do_train=True,
      do_eval=True, do_predict=True)
  assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step"]
  scores = np.array(_read_tsv(output_dir / "test_results.tsv"), dtype=np.float64)
  assert scores.shape == (5, 1)
  predictions = _read_tsv(output_dir / "test_predictions.tsv")[1:]
  np.testing.assert_allclose([float(row[1]) for row in predictions], scores[:, 0], rtol=1e-6)
  manifest = json.loads((output_dir / "model.json").read_text())
  assert manifest["kind"] == "classifier" and manifest["is_regression"]


def test_score_predictions_adds_the_glue_metrics():
  logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
  scores = classification.score_predictions("MRPC", logits, np.array([0, 1, 0, 1]), False)
  assert scores["accuracy"] == 0.5 and scores["f1"] == 0.5
  # -log softmax of the label's logit, row by row.
  expected_loss = np.mean([np.log1p(np.exp(-2)), np.log1p(np.exp(-1)), 3 + np.log1p(np.exp(-3)),
                           1 + np.log1p(np.exp(-1))])
  assert scores["loss"] == pytest.approx(expected_loss, rel=1e-5)
  regression = classification.score_predictions(
      "STS-B", np.array([[1.0], [2.0], [4.0]]), np.array([1.5, 2.5, 4.5]), True)
  assert regression["pearson"] == pytest.approx(1.0) and regression["spearman"] == 1.0
  assert regression["loss"] == pytest.approx(0.25)


def _bad_data_task(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  _write(data / "train.tsv", ["sentence\tlabel", "good food\t1", "bad food", "fine food\t0"])
  _write(data / "dev.tsv", ["sentence\tlabel", "good food\t1", "bad food\t2", "food\t0"])
  config, vocab = _model_files(str(tmp_path / "model"), ["good", "bad", "fine", "food"], 16, 1)
  return dict(bert_config_file=config, vocab_file=vocab, task_name="SST-2", data_dir=str(data),
              max_seq_length=8)


def test_bad_rows_stop_the_run_with_file_and_line_or_are_skipped_and_counted(tmp_path, caplog):
  run = _bad_data_task(tmp_path)
  with pytest.raises(DataError, match=r"train\.tsv:3: expected 2 tab-separated fields, found 1"):
    _run_classifier(config=_config(tmp_path / "a"), do_train=True, **run)
  with pytest.raises(DataError, match=r"dev\.tsv:3: column 'label' is '2'"):
    _run_classifier(config=_config(tmp_path / "b"), do_eval=True, **run)
  with caplog.at_level(logging.INFO, logger="absl"):
    results = _run_classifier(config=_config(tmp_path / "c"), do_eval=True,
                              skip_malformed_rows=True, **run)
  assert "Read 2 dev examples (1 malformed row(s) skipped)" in caplog.text
  assert results["global_step"] == 0 and 0 <= results["eval_accuracy"] <= 1


def test_bytes_that_are_not_utf8_are_counted_in_the_summary(tmp_path):
  run = _bad_data_task(tmp_path)
  (tmp_path / "data" / "train.tsv").write_bytes(b"sentence\tlabel\ngood \xff\xfefood\t1\n")
  task = classification.ClassificationTask(
      ClassificationConfig(vocab_file=run["vocab_file"], task_name="SST-2",
                           data_dir=run["data_dir"]),
      BertConfig.from_json_file(run["bert_config_file"]))
  assert task._read("train")[0].text_a == "good food"
  assert task.summary == ["train: 1 examples, 0 malformed row(s) skipped, 2 byte(s) that are not "
                          "UTF-8 dropped (as the original did)"]


@pytest.mark.parametrize("changes, message", [
    (dict(do_train=False), "do_train, do_eval or do_predict"),
    (dict(max_seq_length=129), "max_position_embeddings"),
    (dict(custom_options={"text_a_column": "sentence"}), "apply only to task_name='custom'"),
    (dict(task_name="custom", custom_options={"text_a_column": "sentence"}), "label_column"),
    (dict(task_name="AX"), "AX has only a test set"),
    (dict(task_name="SST-5"), "Unknown GLUE task"),
    (dict(tfds_name="glue/sst2", custom_options={"label_column": "x"}), "apply only"),
    (dict(task_name=None), "task_name"),
    (dict(xnli_language="de"), "xnli_language applies only to task_name='XNLI'"),
])
def test_misuse_is_reported_before_any_work(tmp_path, changes, message):
  run = dict(_bad_data_task(tmp_path), config=_config(tmp_path / "out"), do_train=True)
  run.update(changes)
  with pytest.raises(ValueError, match=message):
    _run_classifier(**run)
  assert not (tmp_path / "out").exists()


def test_a_vocabulary_larger_than_the_model_is_rejected(tmp_path):
  run = _bad_data_task(tmp_path)
  with open(run["vocab_file"], "a", encoding="utf-8") as f:
    f.write("extra\n")
  with pytest.raises(ValueError, match="vocab_size"):
    _run_classifier(config=_config(tmp_path / "out"), do_eval=True, **run)


def _real_rows(source, target, count):
  os.makedirs(target.parent, exist_ok=True)
  with open(source, encoding="utf-8-sig") as f:
    lines = f.read().splitlines()[:count + 1]
  _write(target, lines)


@pytest.mark.slow
def test_real_mrpc_and_sst2_rows(tmp_path):
  glue = shared_data("glue")
  vocab = str(shared_data("vocab/bert-base-uncased-vocab.txt"))
  config = str(tmp_path / "bert_config.json")
  tiny_bert_config(30522, num_hidden_layers=1).to_json_file(config)
  for split, count in (("train", 48), ("dev", 20), ("test", 10)):
    _real_rows(glue / "MRPC" / f"{split}.tsv", tmp_path / "MRPC" / f"{split}.tsv", count)
  output_dir = tmp_path / "mrpc_out"
  results = _run_classifier(
      bert_config_file=config, vocab_file=vocab, task_name="MRPC",
      data_dir=str(tmp_path / "MRPC"), config=_config(output_dir, num_train_epochs=1.0),
      max_seq_length=64, do_train=True, do_eval=True, do_predict=True)
  assert sorted(results) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step"]
  real_ids = [row[0] for row in _read_tsv(tmp_path / "MRPC" / "test.tsv")[1:]]
  assert [row[0] for row in _read_tsv(output_dir / "MRPC.tsv")[1:]] == real_ids

  _real_rows(glue / "SST-2" / "dev.tsv", tmp_path / "SST-2" / "dev.tsv", 30)
  results = _run_classifier(
      bert_config_file=config, vocab_file=vocab, task_name="SST-2",
      data_dir=str(tmp_path / "SST-2"), config=_config(tmp_path / "sst_out"), max_seq_length=32,
      do_eval=True)
  assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step"]


def _readme_command(tmp_path):
  """The MRPC command of the original README, on a tiny TF1 checkpoint and MRPC-format files that
  it writes under `tmp_path`; returns the command line and the values of its `$NAME`s."""
  glue_dir, bert_dir = tmp_path / "glue_data", tmp_path / "tiny_bert"
  (glue_dir / "MRPC").mkdir(parents=True)
  words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
  rng = np.random.default_rng(0)
  lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
  for i in range(64):
    first = " ".join(rng.choice(words, size=5))
    second = first if i % 2 else " ".join(rng.choice(words, size=5))
    lines.append(f"{i % 2}\t{i}\t{i + 100}\t{first}\t{second}")
  _write(glue_dir / "MRPC" / "train.tsv", lines)
  _write(glue_dir / "MRPC" / "dev.tsv", lines[:17])
  config_file, _ = _model_files(str(bert_dir), words, hidden=16, layers=1)
  save_tf1_checkpoint(BertEncoder(BertConfig.from_json_file(config_file)),
                      str(bert_dir / "bert_model.ckpt"))
  # Every path a file:// URL, as gs:// ones would be given.
  variables = {"GLUE_DIR": file_uri(glue_dir), "BERT_BASE_DIR": file_uri(bert_dir)}
  command = (f"{sys.executable} run_classifier.py --task_name=MRPC --do_train=true "
             "--do_eval=true --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt "
             "--bert_config_file=$BERT_BASE_DIR/bert_config.json "
             "--init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 "
             "--train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 "
             f"--output_dir={file_uri(tmp_path)}/mrpc_output/")
  return command, variables


def test_the_original_readme_command_runs_unchanged(tmp_path):
  command, variables = _readme_command(tmp_path)
  completed = run_command_line(command, variables)
  assert completed.returncode == 0, completed.stderr[-3000:]
  results = dict(line.split(" = ") for line in
                 (tmp_path / "mrpc_output" / "eval_results.txt").read_text().splitlines())
  assert sorted(results) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step"]
  assert results["global_step"] == "6"  # int(64 / 32 * 3.0)
  assert "Initialised the encoder from" in completed.stderr
  assert_no_scheme_folders(tmp_path)


@pytest.mark.slow
def test_the_original_tpu_flags_are_accepted_and_the_original_checks_stop_a_misuse(tmp_path):
  command, variables = _readme_command(tmp_path)
  misuse = command.replace("--max_seq_length=128", "--max_seq_length=256 --use_tpu=false "
                           "--iterations_per_loop=10 --num_tpu_cores=8")
  completed = run_command_line(misuse.replace("mrpc_output", "misuse_output"), variables)
  assert completed.returncode != 0
  assert "Cannot use sequence length 256" in completed.stderr
  assert not (tmp_path / "misuse_output").exists()
  assert_no_scheme_folders(tmp_path)


# === --export_format: the run's export in another format ===

@pytest.mark.slow  # test_export_formats.py holds the export itself
def test_a_run_exports_the_onnx_file_it_is_given_and_it_serves_the_saved_model(
    learned_sentiment):
  import onnxruntime  # the `onnx` extra, which dev.py installs

  from official_bert.checkpoints import load_model_dir

  output_dir, onnx_file = learned_sentiment["output_dir"], learned_sentiment["onnx_file"]
  assert sorted(os.listdir(onnx_file.parent)) == ["sentiment.onnx"]
  saved = learned_sentiment["saved"]
  assert (saved["export_format"], saved["export_precision"]) == ("onnx", "float32")

  ids = np.random.default_rng(0).integers(5, 40, (3, 24)).astype(np.int32)
  inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
  served, = onnxruntime.InferenceSession(str(onnx_file)).run(["logits"], inputs)
  model, _ = load_model_dir(output_dir)
  np.testing.assert_allclose(served, model(inputs, training=False)["logits"], atol=1e-4)


@pytest.mark.slow  # a second end-to-end run; test_export_openvino.py holds the export itself
def test_a_run_exports_openvino_int8_calibrated_on_the_dev_split_it_evaluates(sentiment,
                                                                              tmp_path, caplog):
  import openvino  # the `openvino` extra, which dev.py installs

  from official_bert.checkpoints import load_model_dir
  from official_bert.export import archive

  output_dir, served = tmp_path / "out", tmp_path / "served" / "1"
  # The task with a dev split of 40 rows (not 200): the calibration runs the model once an
  # example, and its cost is most of the test's.
  data = tmp_path / "data"
  data.mkdir()
  train = (pathlib.Path(sentiment["data"]) / "train.tsv").read_text()
  (data / "train.tsv").write_text(train)
  _write(data / "dev.tsv", [train.splitlines()[0]] + sentiment["dev"][:40])
  with caplog.at_level(logging.INFO):
    _run_classifier(config=_config(output_dir, num_train_epochs=0.08, export_dir=str(served),
                                   export_format="openvino", export_precision="int8"),
                    bert_config_file=sentiment["config"], vocab_file=sentiment["vocab"],
                    task_name="SST-2", data_dir=str(data), max_seq_length=24,
                    do_train=True, do_eval=True)
  # The default examples: the 40 rows of the dev split the run evaluated.
  assert "calibrates on 40 examples of the dev split" in caplog.text
  assert archive.read_mark(served)["precision"] == "int8"
  written = openvino.Core().read_model(str(served / "model.xml"))
  assert "FakeQuantize" in {op.get_type_name() for op in written.get_ops()}
  compiled = openvino.Core().compile_model(written, "CPU")
  ids = np.random.default_rng(0).integers(5, 40, (3, 24)).astype(np.int32)
  inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
  model, _ = load_model_dir(output_dir)
  np.testing.assert_allclose(compiled(inputs)["logits"], model(inputs, training=False)["logits"],
                             atol=0.05)


def test_openvino_int8_without_examples_to_calibrate_on_stops_before_training(sentiment,
                                                                              tmp_path):
  from official_bert.export.calibration import CalibrationError

  output_dir = tmp_path / "out"
  with pytest.raises(CalibrationError, match="give --calibration_file, or --do_eval"):
    _run_classifier(config=_config(output_dir, export_dir=str(tmp_path / "served"),
                                   export_format="openvino", export_precision="int8"),
                    bert_config_file=sentiment["config"], vocab_file=sentiment["vocab"],
                    task_name="SST-2", data_dir=sentiment["data"], max_seq_length=24,
                    do_train=True)
  assert not tf.io.gfile.glob(str(output_dir / "ckpt-*"))
  assert not (tmp_path / "served").exists()


def test_an_export_the_run_could_not_write_stops_it_before_training(sentiment, tmp_path):
  from official_bert.export import ExportFileError

  output_dir, taken = tmp_path / "out", tmp_path / "taken.onnx"
  taken.write_bytes(b"someone else's model")
  with pytest.raises(ExportFileError, match="taken.onnx exists and was not written by this "
                     "package"):
    _run_classifier(config=_config(output_dir, export_dir=str(taken), export_format="onnx",
                                   export_precision="int8"),
                    bert_config_file=sentiment["config"], vocab_file=sentiment["vocab"],
                    task_name="SST-2", data_dir=sentiment["data"], max_seq_length=24,
                    do_train=True)
  assert taken.read_bytes() == b"someone else's model"
  assert not tf.io.gfile.glob(str(output_dir / "ckpt-*"))


@pytest.mark.slow
def test_the_script_exports_a_litert_file_and_the_same_command_again_replaces_it(tmp_path):
  from official_bert.export import litert

  command, variables = _readme_command(tmp_path)
  # The README's run, less what this test does not check (test_the_original_readme_command_
  # runs_unchanged runs it whole): no evaluation, no XLA, 1 step, 16 pieces (the rows' 13 fit).
  # A flag given again takes its last value, as absl parses it.
  tflite = tmp_path / "served" / "mrpc.tflite"
  command += (" --do_eval=false --enable_xla=false --max_seq_length=16 --num_train_epochs=0.5"
              f" --export_dir={file_uri(tflite)} --export_format=litert")
  sizes = []
  for _ in range(2):  # the second run resumes at its last step and exports again
    completed = run_command_line(command, variables)
    assert completed.returncode == 0, completed.stderr[-3000:]
    sizes.append(tflite.stat().st_size)
  assert sizes[0] == sizes[1] and os.listdir(tflite.parent) == ["mrpc.tflite"]
  runner = litert.load_interpreter(model_path=str(tflite)).get_signature_runner()
  probabilities = runner(text_a=np.array(["the cat sat"], dtype=object),
                         text_b=np.array(["a dog ran"], dtype=object))
  assert np.asarray(probabilities["probabilities"]).shape == (1, 2)
