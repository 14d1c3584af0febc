"""Tests for official_bert.tasks.tagging and run_ner.py."""

import os
import random
import sys

import pytest

from official_bert.data import conll
from official_bert.tasks import tagging
from official_bert.tasks.experiment import ExperimentConfig

from testing import (
  REPOSITORY,
  assert_no_scheme_folders,
  engine_configs,
  file_uri,
  read_eval_results,
  run_python,
  run_task,
  shared_data,
  tiny_bert_config,
)

NAMES = ["Smith", "Jones", "Brown", "Taylor", "Wilson", "Davies", "Evans", "Thomas"]
PLACES = ["Paris", "London", "Berlin", "Rome"]
TWO_WORD_NAMES = 0.15  # share of persons named by two words (B-PER I-PER)
FILLER = ["yesterday", "today", "we", "saw", "met", "called", "the", "and", "later", "said"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "mr", "mrs", ".", "in"]
         + [word.lower() for word in NAMES + PLACES] + FILLER)


def _write_model_files(folder, vocab_size, hidden_dropout=0.0):
  # One layer learns these tags as well as two (the same F1 on the tests' data), and each layer
  # adds to the time TensorFlow takes to trace the model.
  config = tiny_bert_config(vocab_size, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                            max_position_embeddings=64, dropout=hidden_dropout)
  config.to_json_file(str(folder / "bert_config.json"))
  return str(folder / "bert_config.json")


def _sentence(rng):
  """Words and tags: a capitalised name after "Mr."/"Mrs." is a person, a city after "in" a
  location."""
  words = []
  for _ in range(rng.randint(2, 4)):
    draw = rng.random()
    if draw < 0.35:
      words += [(rng.choice(["Mr.", "Mrs."]), "O"), (rng.choice(NAMES), "B-PER")]
      if rng.random() < TWO_WORD_NAMES:
        words.append((rng.choice(NAMES), "I-PER"))
    elif draw < 0.55:
      words += [("in", "O"), (rng.choice(PLACES), "B-LOC")]
    words += [(rng.choice(FILLER), "O") for _ in range(rng.randint(1, 3))]
  return words


def _write_conll(path, sentences, tagged=True):
  with open(path, "w") as f:
    f.write("-DOCSTART- -X- O\n\n")
    for words in sentences:
      f.writelines(f"{word} {tag}\n" if tagged else f"{word}\n" for word, tag in words)
      f.write("\n")


def _write_data(folder, rng, num_train=320):
  folder.mkdir()
  _write_conll(folder / "train.txt", [_sentence(rng) for _ in range(num_train)])
  _write_conll(folder / "valid.txt", [_sentence(rng) for _ in range(100)])
  test = [_sentence(rng) for _ in range(6)]
  _write_conll(folder / "test.txt", test, tagged=False)
  (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  return test


def _config(output_dir, **kwargs):
  """The tests' config: the engine's settings among `kwargs` change the defaults."""
  settings = dict(train_batch_size=16, eval_batch_size=64, predict_batch_size=64,
                  enable_xla=False, steps_per_loop=50, log_steps=50, seed=0)
  settings.update({name: kwargs.pop(name) for name in list(kwargs)
                   if name not in ExperimentConfig.__dataclass_fields__})
  return ExperimentConfig(output_dir=str(output_dir), **engine_configs(**settings), **kwargs)


def _run_ner(*, config, **kwargs):
  """Runs `NerTask` as run_ner.py does: the labels.txt of the run's output_dir."""
  return run_task(tagging.NerTask, config=config, **kwargs)


@pytest.mark.slow
def test_ner_learns_persons_after_mr_and_writes_conll(tmp_path):
  data_dir = tmp_path / "data"
  test_sentences = _write_data(data_dir, random.Random(0))
  config_file = _write_model_files(tmp_path, len(VOCAB))
  output_dir = tmp_path / "output"
  results = _run_ner(
      bert_config_file=config_file, vocab_file=str(data_dir / "vocab.txt"),
      data_dir=str(data_dir), max_seq_length=32, do_train=True, do_eval=True, do_predict=True,
      config=_config(output_dir, learning_rate=2e-3, num_train_epochs=3.0))

  assert results["eval_f1"] > 0.8, results
  assert results["eval_PER/f1"] > 0.7 and results["eval_LOC/f1"] > 0.8
  assert read_eval_results(output_dir / "eval_results.txt") == pytest.approx(results)
  assert {"eval_loss", "eval_precision", "eval_recall", "eval_token_accuracy", "global_step",
          "eval_PER/precision", "eval_LOC/recall"} <= set(results)
  assert (output_dir / "labels.txt").read_text().split() == ["O", "B-LOC", "B-PER", "I-PER"]

  # One `token predicted` line per original word of the untagged test file, sentences apart.
  blocks = (output_dir / "test_predictions.txt").read_text().strip("\n").split("\n\n")
  assert len(blocks) == len(test_sentences)
  for block, words in zip(blocks, test_sentences):
    rows = [line.split(" ") for line in block.split("\n")]
    assert [row[0] for row in rows] == [word for word, _ in words]
    assert all(len(row) == 2 and row[1] in ("O", "B-LOC", "B-PER", "I-PER") for row in rows)
  evaluated = conll.read_conll_file(str(output_dir / "eval_predictions.txt"))
  gold = conll.read_conll_file(str(data_dir / "valid.txt"))
  assert [s.words for s in evaluated] == [s.words for s in gold]


@pytest.mark.slow
def test_predict_only_run_reads_the_saved_labels(tmp_path):
  data_dir = tmp_path / "data"
  _write_data(data_dir, random.Random(1), num_train=32)
  config_file = _write_model_files(tmp_path, len(VOCAB))
  vocab_file = str(data_dir / "vocab.txt")
  output_dir = tmp_path / "output"
  _run_ner(bert_config_file=config_file, vocab_file=vocab_file,
           train_file=str(data_dir / "train.txt"), max_seq_length=32, do_train=True,
           config=_config(output_dir, num_train_epochs=1.0))
  # Predict-only, without any training file: the labels come from labels.txt.
  _run_ner(bert_config_file=config_file, vocab_file=vocab_file,
           predict_file=str(data_dir / "test.txt"), max_seq_length=32, do_predict=True,
           config=_config(output_dir))
  predicted = conll.read_conll_file(str(output_dir / "test_predictions.txt"))
  assert {tag for s in predicted for tag in s.tags} <= {"O", "B-LOC", "B-PER", "I-PER"}
  (output_dir / "labels.txt").write_text("O\nB-PER\nB-LOC\nI-PER\n")
  with pytest.raises(ValueError, match=r"labels.txt lists the labels .* of an earlier run"):
    _run_ner(bert_config_file=config_file, vocab_file=vocab_file,
             train_file=str(data_dir / "train.txt"), max_seq_length=32, do_train=True,
             config=_config(output_dir, num_train_epochs=2.0))
  with pytest.raises(FileNotFoundError, match="labels.txt is missing and there is no training"):
    _run_ner(bert_config_file=config_file, vocab_file=vocab_file,
             predict_file=str(data_dir / "test.txt"), max_seq_length=32, do_predict=True,
             config=_config(tmp_path / "fresh"))
  bad = tmp_path / "bad.txt"
  bad.write_text("Mr. O\nSmith B-PERSON\n")
  with pytest.raises(ValueError, match=r"bad.txt:2: tag 'B-PERSON' is not among the labels"):
    _run_ner(bert_config_file=config_file, vocab_file=vocab_file, eval_file=str(bad),
             max_seq_length=32, do_eval=True, config=_config(output_dir))


def test_a_dev_tag_unseen_in_training_stops_the_run_before_training(tmp_path):
  data_dir = tmp_path / "data"
  _write_data(data_dir, random.Random(3), num_train=32)
  config_file = _write_model_files(tmp_path, len(VOCAB))
  with open(data_dir / "valid.txt", "a") as f:
    f.write("Mr. O\nSmith B-PERSON\n\n")
  output_dir = tmp_path / "output"
  with pytest.raises(ValueError, match=r"valid.txt:\d+: tag 'B-PERSON' is not among the labels"):
    _run_ner(bert_config_file=config_file, vocab_file=str(data_dir / "vocab.txt"),
             data_dir=str(data_dir), max_seq_length=32, do_train=True, do_eval=True,
             config=_config(output_dir))
  assert not output_dir.exists() or not any(output_dir.iterdir())


@pytest.mark.slow
def test_wnut17_fine_tuning_beats_the_untrained_model(tmp_path):
  wnut = shared_data("ner/wnut17")
  vocab_file = str(shared_data("vocab/bert-base-uncased-vocab.txt"))
  data_dir = tmp_path / "wnut"
  data_dir.mkdir()
  for split, count in (("train", 300), ("dev", 150)):
    sentences = conll.read_conll_file(str(wnut / f"{split}.conll"))[:count]
    _write_conll(data_dir / f"{split}.conll", [zip(s.words, s.tags) for s in sentences])
  config_file = _write_model_files(tmp_path, 30522, hidden_dropout=0.1)
  common = dict(bert_config_file=config_file, vocab_file=vocab_file, data_dir=str(data_dir),
                max_seq_length=64, do_eval=True)
  untrained = _run_ner(config=_config(tmp_path / "untrained"), **common)
  trained = _run_ner(config=_config(tmp_path / "trained", learning_rate=1e-3,
                                    num_train_epochs=2.0), do_train=True, **common)
  assert trained["global_step"] == 37 and untrained["global_step"] == 0
  # A tiny model trained from scratch on 300 tweets learns the tag distribution (mostly `O`),
  # not yet entities: its token accuracy must rise far above the untrained model's.
  assert trained["eval_token_accuracy"] > untrained["eval_token_accuracy"] + 0.3, (
      untrained, trained)
  assert trained["eval_token_accuracy"] > 0.85
  assert trained["eval_loss"] < 0.5 * untrained["eval_loss"]


def test_script_tags_and_exports(tmp_path):
  import numpy as np
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the ops the SavedModel's tokenizer uses)

  data_dir = tmp_path / "data"
  test_sentences = _write_data(data_dir, random.Random(2), num_train=64)
  config_file = _write_model_files(tmp_path, len(VOCAB))
  output_dir, export_dir = tmp_path / "output", tmp_path / "savedmodel"
  # Every path a file:// URL, as gs:// ones would be given.
  command = [sys.executable, os.path.join(REPOSITORY, "run_ner.py"),
             f"--data_dir={file_uri(data_dir)}",
             f"--bert_config_file={file_uri(config_file)}",
             f"--vocab_file={file_uri(data_dir / 'vocab.txt')}",
             f"--output_dir={file_uri(output_dir)}", f"--export_dir={file_uri(export_dir)}",
             "--do_train",
             "--do_eval", "--do_predict", "--max_seq_length=32", "--train_batch_size=16",
             "--learning_rate=2e-3", "--num_train_epochs=2", "--noenable_xla"]
  result = run_python(command, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert_no_scheme_folders(tmp_path)
  results = read_eval_results(output_dir / "eval_results.txt")
  assert results["global_step"] == 8 and 0 <= results["eval_f1"] <= 1
  blocks = (output_dir / "test_predictions.txt").read_text().strip("\n").split("\n\n")
  assert [len(block.split("\n")) for block in blocks] == [len(s) for s in test_sentences]

  # The SavedModel tags raw text like the script's predictions on the same words.
  first = blocks[0].split("\n")
  words, predicted = zip(*(line.split(" ") for line in first))
  served = tf.saved_model.load(str(export_dir))
  outputs = served.signatures["serving_default"](text=tf.constant([" ".join(words)]))
  tokens = [t.decode() for t in outputs["tokens"][0].numpy()]
  labels = [t.decode() for t in outputs["label"][0].numpy()]
  first_pieces = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]", "[PAD]")
                  and not t.startswith("##")]
  # "Mr." is two pieces, "mr" and "."; only a word's first piece carries its tag.
  starts, position = [], 1
  for word in words:
    starts.append(position)
    position += 2 if word in ("Mr.", "Mrs.") else 1
  assert set(starts) <= set(first_pieces)
  assert [labels[i] for i in starts] == list(predicted)
  assert np.asarray(outputs["probabilities"]).shape[-1] == 4
