"""Tests for official_bert.tasks.feature_extraction and extract_features.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import assert_no_scheme_folders, file_uri, minilm_model_dir
from official_bert import BertConfig, BertEncoder, export_pretrained_dir, tokenization
from official_bert.tasks import driver, feature_extraction
from official_bert.tasks.base import Modes
from official_bert.tasks.runner import RunConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
LINES = ["The cat sat on the mat.", "A dog ran far away ||| the cat sat", "", "zebra cat"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  """A model folder (weights, config, vocab, manifest) of a tiny random encoder."""
  folder = tmp_path_factory.mktemp("tiny_bert")
  vocab_file = folder / "vocab_source.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  encoder = BertEncoder(CONFIG)
  export_pretrained_dir(encoder, CONFIG, str(folder / "ckpt"), vocab_file=str(vocab_file))
  return encoder, str(folder / "ckpt")


@pytest.fixture
def input_file(tmp_path):
  path = tmp_path / "input.txt"
  path.write_text("\n".join(LINES) + "\n")
  return path


def _extract(input_file, output_file, init_checkpoint, batch_size=32, export_dir=None,
             **task_args):
  """Runs the task as extract_features.py does (output_dir: the output file's folder)."""
  task = feature_extraction.FeatureExtractionTask(input_file=str(input_file),
                                                  output_file=str(output_file), **task_args)
  driver.run(task, RunConfig(output_dir=os.path.dirname(str(output_file)),
                             init_checkpoint=init_checkpoint, predict_batch_size=batch_size,
                             export_dir=export_dir), Modes(predict=True))
  return task


def _read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


def test_token_features_format_and_last_layer(checkpoint, input_file, tmp_path):
  encoder, ckpt = checkpoint
  output = tmp_path / "features.jsonl"
  task = _extract(input_file, output, ckpt, layers="-1,0", max_seq_length=16, batch_size=3)
  assert len(task.examples) == len(LINES) and task.features.num_truncated == 0
  assert task.summary == [f"{input_file}: {len(LINES)} lines, 0 truncated"]
  records = _read_jsonl(output)
  assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
  assert [f["token"] for f in records[1]["features"]] == [
      "[CLS]", "a", "dog", "ran", "far", "away", "[SEP]", "the", "cat", "sat", "[SEP]"]
  assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
  assert [f["token"] for f in records[3]["features"]] == ["[CLS]", "[UNK]", "cat", "[SEP]"]
  first = records[0]["features"][0]
  assert list(first) == ["token", "layers"] and list(first["layers"][0]) == ["index", "values"]
  assert [layer["index"] for layer in first["layers"]] == [-1, 0]
  values = np.array([v for r in records for f in r["features"] for layer in f["layers"]
                     for v in layer["values"]])
  assert len(first["layers"][0]["values"]) == CONFIG.hidden_size
  np.testing.assert_array_equal(values, np.round(values, 6))

  # The -1 layer is the encoder's sequence_output on the real tokens of the packed example.
  tokenizer = tokenization.FullTokenizer(os.path.join(ckpt, "vocab.txt"))
  examples = feature_extraction.read_examples(str(input_file))
  features = feature_extraction.convert_examples_to_features(examples, tokenizer, 16)
  outputs = encoder({"input_word_ids": features.input_word_ids,
                     "input_mask": features.input_mask,
                     "input_type_ids": features.input_type_ids})
  assert features.input_type_ids[1].tolist()[:12] == [0] * 7 + [1] * 4 + [0]
  for n, record in enumerate(records):
    length = len(record["features"])
    for i, index in enumerate((-1, 0)):
      got = np.array([f["layers"][i]["values"] for f in record["features"]])
      want = outputs["sequence_output"] if index == -1 else outputs["encoder_outputs"][0]
      np.testing.assert_allclose(got, np.asarray(want)[n, :length], atol=2e-5)


def test_pooled_embeddings_cls_and_mean(checkpoint, input_file, tmp_path):
  encoder, ckpt = checkpoint
  tokens_file, cls_file, mean_file = (tmp_path / f"{n}.jsonl" for n in ("tok", "cls", "mean"))
  _extract(input_file, tokens_file, ckpt, layers="-1")
  _extract(input_file, cls_file, ckpt, pooling="cls", normalize=True)
  _extract(input_file, mean_file, ckpt, pooling="mean")
  token_records = _read_jsonl(tokens_file)
  for record, cls, mean in zip(token_records, _read_jsonl(cls_file), _read_jsonl(mean_file)):
    assert cls["linex_index"] == mean["linex_index"] == record["linex_index"]
    vectors = np.array([f["layers"][0]["values"] for f in record["features"]])
    np.testing.assert_allclose(cls["embedding"], vectors[0] / np.linalg.norm(vectors[0]),
                               atol=1e-5)
    np.testing.assert_allclose(mean["embedding"], vectors.mean(axis=0), atol=1e-5)


def test_minilm_mean_embeddings_reproduce_published_similarities(tmp_path):
  model_dir = minilm_model_dir()
  input_file = tmp_path / "sentences.txt"
  input_file.write_text("A man is eating food.\nA man is eating a piece of bread.\n"
                        "A man is riding a horse.\n")
  output = tmp_path / "embeddings.jsonl"
  _extract(input_file, output, str(model_dir), pooling="mean", normalize=True)
  food, bread, horse = (np.array(r["embedding"]) for r in _read_jsonl(output))
  assert np.linalg.norm(food) == pytest.approx(1.0, abs=1e-5)
  assert food @ bread == pytest.approx(0.7553, abs=1e-3)
  assert food @ horse == pytest.approx(0.247, abs=1e-2)


def test_truncation_follows_the_original(checkpoint, tmp_path):
  tokenizer = tokenization.FullTokenizer(os.path.join(checkpoint[1], "vocab.txt"))
  examples = [feature_extraction.InputExample(0, "the cat sat on the mat", None),
              feature_extraction.InputExample(1, "the cat sat on the mat", "a dog")]
  features = feature_extraction.convert_examples_to_features(examples, tokenizer, 7)
  assert features.tokens == (["[CLS]", "the", "cat", "sat", "on", "the", "[SEP]"],
                             ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"])
  assert features.num_truncated == 2


def test_bad_input_is_named(checkpoint, tmp_path):
  ckpt = checkpoint[1]
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"fine\n\xff broken\n")
  with pytest.raises(ValueError, match=r"bad.txt:2: not valid UTF-8"):
    feature_extraction.read_examples(str(bad))
  good = tmp_path / "good.txt"
  good.write_text("the cat\n")
  output = tmp_path / "out.jsonl"
  with pytest.raises(ValueError, match="layer index 2 is outside the encoder's 2 layers"):
    _extract(good, output, ckpt, layers="-1,2")
  with pytest.raises(ValueError, match=r"up to sequence length 128 \(max_position_embeddings\)"):
    _extract(good, output, ckpt, max_seq_length=200)
  with pytest.raises(ValueError, match="pooling must be one of"):
    _extract(good, output, ckpt, pooling="max")
  with pytest.raises(ValueError, match="needs init_checkpoint"):
    _extract(good, output, None)
  with pytest.raises(ValueError, match="cannot train"):
    feature_extraction.FeatureExtractionTask(input_file=str(good), output_file=str(output)
                                             ).validate(Modes(train=True, predict=True), ckpt)
  taken = tmp_path / "taken_export"
  taken.mkdir()
  (taken / "saved_model.pb").write_text("")
  with pytest.raises(FileExistsError, match="is not empty"):
    _extract(good, output, ckpt, layers="-1", export_dir=str(taken))
  assert not output.exists()


def test_an_encoder_not_loaded_from_a_checkpoint_is_refused(tmp_path):
  task = feature_extraction.FeatureExtractionTask(input_file="in.txt", output_file="out.jsonl")
  with pytest.raises(ValueError, match="features of an untrained encoder are meaningless"):
    task.untrained(str(tmp_path))


def test_checkpoints_beside_the_output_are_ignored_and_nothing_is_added(checkpoint, input_file,
                                                                        tmp_path):
  import tensorflow as tf

  ckpt = checkpoint[1]
  clean = tmp_path / "clean" / "features.jsonl"
  _extract(input_file, clean, ckpt, layers="-1", max_seq_length=16)
  # A training checkpoint of another encoder of the same shape lies in the output folder.
  busy = tmp_path / "busy"
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=BertEncoder(CONFIG),
                          global_step=tf.Variable(5, dtype=tf.int64)), str(busy), 1).save()
  before = sorted(os.listdir(busy))
  _extract(input_file, busy / "features.jsonl", ckpt, layers="-1", max_seq_length=16)
  assert (busy / "features.jsonl").read_text() == clean.read_text()
  assert sorted(os.listdir(busy)) == sorted(before + ["features.jsonl"])
  assert os.listdir(clean.parent) == ["features.jsonl"]


def test_a_failed_run_leaves_the_old_output(checkpoint, input_file, tmp_path, monkeypatch):
  output = tmp_path / "out.jsonl"
  output.write_text("old\n")

  def failing_lines(*args):
    yield "new\n"
    raise RuntimeError("encoder failed")

  monkeypatch.setattr(feature_extraction, "_token_lines", failing_lines)
  with pytest.raises(RuntimeError, match="encoder failed"):
    _extract(input_file, output, checkpoint[1], layers="-1", max_seq_length=16)
  assert output.read_text() == "old\n"
  assert sorted(os.listdir(tmp_path)) == ["input.txt", "out.jsonl"]


@pytest.mark.slow
def test_script_writes_features_and_exports_the_encoder(checkpoint, input_file, tmp_path):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the ops the SavedModel's tokenizer uses)

  # Every path a file:// URL, as gs:// ones would be given.
  output, export_dir = tmp_path / "out" / "features.jsonl", tmp_path / "encoder_savedmodel"
  command = [sys.executable, os.path.join(ROOT, "extract_features.py"),
             f"--input_file={file_uri(input_file)}", f"--output_file={file_uri(output)}",
             f"--init_checkpoint={file_uri(checkpoint[1])}", "--layers=-1",
             "--max_seq_length=16", "--batch_size=2", f"--export_dir={file_uri(export_dir)}"]
  result = subprocess.run(command, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert_no_scheme_folders(tmp_path)
  records = _read_jsonl(output)
  assert len(records) == len(LINES)

  served = tf.saved_model.load(str(export_dir))
  from_text = served.signatures["serving_default"](text=tf.constant([LINES[0], LINES[3]]))
  pair = served.signatures["serve_text_pair"](text_a=tf.constant(["A dog ran far away"]),
                                              text_b=tf.constant(["the cat sat"]))
  for outputs, row, record in ((from_text, 0, records[0]), (from_text, 1, records[3]),
                               (pair, 0, records[1])):
    want = np.array([f["layers"][0]["values"] for f in record["features"]])
    assert int(outputs["input_mask"][row].numpy().sum()) == len(want)
    np.testing.assert_allclose(outputs["sequence_output"][row, :len(want)], want, atol=2e-5)
    np.testing.assert_allclose(outputs["encoder_outputs"][-1, row, :len(want)], want, atol=2e-5)
  assert from_text["pooled_output"].shape == (2, CONFIG.hidden_size)
