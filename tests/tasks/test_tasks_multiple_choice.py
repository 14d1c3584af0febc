"""Tests for official_bert.tasks.multiple_choice and run_swag.py."""

import csv
import json
import os
import random
import sys

import numpy as np
import pytest

from official_bert.tasks import multiple_choice
from official_bert.tasks.experiment import ExperimentConfig

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  assert_no_scheme_folders,
  engine_configs,
  file_uri,
  run_python,
  run_task,
  shared_data,
  tiny_bert_config,
)

KEYS = ["red", "blue", "green", "cat", "dog", "bird", "tree", "car"]
FILLER = ["the", "a", "is", "here", "then", "there", "again", "."]
VOCAB = SPECIAL_TOKENS + KEYS + FILLER
HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
          "ending1", "ending2", "ending3"]


def _write_model_files(folder, vocab):
  (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
  # One layer: it learns the SWAG rows below as well as two (78% with either), and each layer
  # adds to the time TensorFlow takes to trace the model.
  config = tiny_bert_config(len(vocab), hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                            max_position_embeddings=64, dropout=0.0)
  config.to_json_file(str(folder / "bert_config.json"))
  return str(folder / "bert_config.json"), str(folder / "vocab.txt")


def _write_swag_csv(path, num_examples, rng, labelled=True):
  """SWAG CSV rows whose right ending repeats the key word of the context."""
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(HEADER + (["label"] if labelled else []))
    for i in range(num_examples):
      key, *others = rng.sample(KEYS, 4)
      label = rng.randrange(4)
      endings = [f"{word} again ." for word in others]
      endings.insert(label, f"{key} again .")
      writer.writerow(["video", f"{100 + i}", "", f"the {key} is here .", "then there", "gold"]
                      + endings + ([str(label)] if labelled else []))


def _config(output_dir, **kwargs):
  """The tests' config: the engine's settings among `kwargs` change the defaults."""
  settings = dict(train_batch_size=16, eval_batch_size=32, predict_batch_size=32,
                  enable_xla=False, steps_per_loop=50, log_steps=50, seed=0)
  settings.update({name: kwargs.pop(name) for name in list(kwargs)
                   if name not in ExperimentConfig.__dataclass_fields__})
  return ExperimentConfig(output_dir=str(output_dir), **engine_configs(**settings), **kwargs)


def _run_swag(**kwargs):
  return run_task(multiple_choice.SwagTask, **kwargs)


@pytest.mark.slow
def test_swag_fine_tuning_learns_and_writes_outputs(tmp_path):
  rng = random.Random(0)
  data_dir = tmp_path / "swag"
  data_dir.mkdir()
  _write_swag_csv(data_dir / "train.csv", 480, rng)
  _write_swag_csv(data_dir / "val.csv", 100, rng)
  _write_swag_csv(data_dir / "test.csv", 12, rng, labelled=False)
  config_file, vocab_file = _write_model_files(tmp_path, VOCAB)
  output_dir = tmp_path / "output"
  results = _run_swag(
      bert_config_file=config_file, vocab_file=vocab_file, data_dir=str(data_dir),
      max_seq_length=16, do_train=True, do_eval=True, do_predict=True,
      config=_config(output_dir, learning_rate=5e-4, num_train_epochs=5.0))

  # Chance is 25% (4.3 points of standard deviation over 100 examples): the model must have
  # learned to match the ending to the context. A higher rate sometimes collapses the tiny model
  # to equal logits (a loss of ln 4) for some initialisations, whatever the kernels.
  assert results["eval_accuracy"] > 0.5, results
  assert results["global_step"] == 150
  lines = (output_dir / "eval_results.txt").read_text().splitlines()
  assert [line.split(" = ")[0] for line in lines] == ["eval_accuracy", "eval_loss", "global_step"]
  probabilities = np.loadtxt(output_dir / "test_results.tsv", delimiter="\t")
  assert probabilities.shape == (12, 4)
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
  records = [json.loads(line) for line in (output_dir / "test_predictions.jsonl").open()]
  assert [r["example_id"] for r in records] == [str(100 + i) for i in range(12)]
  assert [r["prediction"] for r in records] == probabilities.argmax(axis=1).tolist()
  assert all("label" not in r for r in records)
  manifest = json.loads((output_dir / "model.json").read_text())
  assert manifest["kind"] == "multiple_choice" and manifest["model_config"]["num_choices"] == 4


def test_unlabelled_training_file_is_an_error(tmp_path):
  _write_swag_csv(tmp_path / "train.csv", 3, random.Random(0), labelled=False)
  config_file, vocab_file = _write_model_files(tmp_path, VOCAB)
  with pytest.raises(ValueError, match=r"train.csv: 3 examples have no label .*'100'"):
    _run_swag(bert_config_file=config_file, vocab_file=vocab_file, data_dir=str(tmp_path),
              do_train=True, max_seq_length=16, config=_config(tmp_path / "out"))
  with pytest.raises(FileNotFoundError, match="for the eval split"):
    _run_swag(bert_config_file=config_file, vocab_file=vocab_file, data_dir=str(tmp_path),
              do_eval=True, max_seq_length=16, config=_config(tmp_path / "out"))


def test_files_with_different_numbers_of_endings_stop_the_run_before_training(tmp_path):
  _write_swag_csv(tmp_path / "train.csv", 4, random.Random(0))
  with open(tmp_path / "val.jsonl", "w") as f:
    f.write(json.dumps({"sent1": "the cat is here .", "sent2": "then", "ending0": "cat again .",
                        "ending1": "dog again .", "ending2": "car again .", "label": 0}) + "\n")
  config_file, vocab_file = _write_model_files(tmp_path, VOCAB)
  output_dir = tmp_path / "out"
  with pytest.raises(ValueError, match=r"different numbers of endings \[3, 4\]"):
    _run_swag(bert_config_file=config_file, vocab_file=vocab_file, data_dir=str(tmp_path),
              do_train=True, do_eval=True, max_seq_length=16, config=_config(output_dir))
  assert not output_dir.exists()


def test_script_on_real_swag_sample(tmp_path):
  sample = shared_data("swag/sample.jsonl")
  words = {w for line in sample.open() for v in json.loads(line).values() if isinstance(v, str)
           for w in v.lower().replace(".", " . ").replace(",", " , ").split()}
  config_file, vocab_file = _write_model_files(tmp_path, VOCAB[:5] + sorted(words))
  output_dir = tmp_path / "output"
  # Every path a file:// URL, as gs:// ones would be given.
  command = [sys.executable, os.path.join(REPOSITORY, "run_swag.py"),
             f"--bert_config_file={file_uri(config_file)}", f"--vocab_file={file_uri(vocab_file)}",
             f"--output_dir={file_uri(output_dir)}", f"--train_file={file_uri(sample)}",
             f"--eval_file={file_uri(sample)}", f"--predict_file={file_uri(sample)}",
             "--do_train", "--do_eval", "--do_predict", "--max_seq_length=48",
             "--train_batch_size=2", "--num_train_epochs=1", "--noenable_xla",
             "--save_checkpoints_steps=5"]
  result = run_python(command, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  results = dict(line.split(" = ") for line in
                 (output_dir / "eval_results.txt").read_text().splitlines())
  assert results["global_step"] == "5" and 0 <= float(results["eval_accuracy"]) <= 1
  records = [json.loads(line) for line in (output_dir / "test_predictions.jsonl").open()]
  gold = [json.loads(line)["label"] for line in sample.open()]
  assert [r["label"] for r in records] == gold and len(records) == 10
  correct = sum(r["prediction"] == r["label"] for r in records)
  assert float(results["eval_accuracy"]) == pytest.approx(correct / 10)
  assert os.path.exists(output_dir / "ckpt-5.index")
  assert_no_scheme_folders(tmp_path)
