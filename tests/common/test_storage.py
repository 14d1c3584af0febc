"""Every library reader and writer on a `ram://` path: nothing may assume a local disk.

TensorFlow's in-memory file system stands in for `gs://` (a TPU reads only from there): a reader
that used Python's `open` or `os.path` would not find these files, and a writer would create a
local folder named `ram:` in the working directory, which each test checks for.
"""

import csv
import io
import json
import os
import uuid

import numpy as np
import pytest
from safetensors.numpy import save
import tensorflow as tf

from official_bert import BertConfig, BertEncoder, BertPretrainer, tokenization
from official_bert.checkpoints import (
  huggingface,
  load_encoder,
  load_model_dir,
  load_tf1_checkpoint,
  save_model_dir,
  save_tf1_checkpoint,
  tf1,
)
from official_bert.common import file_io
from official_bert.data import classifier_features, conll, custom_data, glue, squad, swag
from official_bert.evaluation import squad_evaluate
from official_bert.pretraining import InstanceOptions, corpus, create_pretraining_data
from official_bert.tasks import driver, feature_extraction
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ExperimentConfig, FeatureExtractionConfig

from testing import SPECIAL_TOKENS, tiny_bert_config

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", ".", "is", "where"]
VOCAB = SPECIAL_TOKENS + WORDS
CONFIG = tiny_bert_config(len(VOCAB), max_position_embeddings=32)


@pytest.fixture
def ram(tmp_path, monkeypatch):
  """A fresh `ram://` folder; the test runs in `tmp_path`, which must stay free of `ram:`."""
  monkeypatch.chdir(tmp_path)
  root = f"ram://storage-{uuid.uuid4().hex[:8]}"
  tf.io.gfile.makedirs(root)
  yield root
  tf.io.gfile.rmtree(root)
  assert not os.path.exists(tmp_path / "ram:"), "a writer created a local folder named 'ram:'"


def _write(path, text):
  file_io.write_text(path, text)
  return path


def _vocab(ram):
  return _write(f"{ram}/vocab.txt", "\n".join(VOCAB) + "\n")


def _read_text(path):
  with file_io.open_read(path, encoding="utf-8") as f:
    return f.read()


def test_open_read_behaves_like_open(ram, tmp_path):
  # A byte-order mark, CRLF line ends and a quoted field across lines, as in Windows CSV files.
  text = '\ufeffname,value\r\n"two\nlines",2\r\nlast,3'
  local = tmp_path / "rows.csv"
  local.write_bytes(text.encode("utf-8"))
  remote = _write(f"{ram}/rows.csv", text)
  for kwargs in ({}, {"encoding": "utf-8-sig", "newline": ""}, {"encoding": "utf-8"}):
    with open(local, "rb" if not kwargs else "r", **kwargs) as f:
      expected = list(f)
    with file_io.open_read(remote, **kwargs) as f:
      assert list(f) == expected
  with file_io.open_read(remote, encoding="utf-8-sig", newline="") as f:
    assert list(csv.reader(f)) == [["name", "value"], ["two\nlines", "2"], ["last", "3"]]
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    file_io.open_read(f"{ram}/missing.txt")
  assert file_io.local_path("file:///tmp/x") == "/tmp/x"
  assert file_io.local_path("x/y") == "x/y" and file_io.local_path(f"{ram}/x") is None


def test_vocabulary_and_config(ram):
  vocab_file = _vocab(ram)
  assert tokenization.load_vocab(vocab_file)["dog"] == VOCAB.index("dog")
  assert corpus.read_vocab_tokens(vocab_file) == VOCAB
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  assert tokenizer.tokenize("The dog ran") == ["the", "dog", "ran"]
  with pytest.raises(FileNotFoundError, match="missing"):
    corpus.read_vocab_tokens(f"{ram}/missing.txt")
  CONFIG.to_json_file(f"{ram}/config/bert_config.json")
  assert BertConfig.from_json_file(f"{ram}/config/bert_config.json") == CONFIG


def test_glue_and_custom_readers(ram):
  _write(f"{ram}/SST-2/train.tsv", "sentence\tlabel\nthe cat sat\t1\na dog ran\t0\n")
  processor = glue.GlueProcessor("SST-2", f"{ram}/SST-2")
  assert [(e.text_a, e.label) for e in processor.get_train_examples()] == [
      ("the cat sat", "1"), ("a dog ran", "0")]
  _write(f"{ram}/mine/train.csv", '\ufefftext,stars\n"the cat, sat",5\ndog,1\n')
  _write(f"{ram}/mine/dev.jsonl", '{"text": "a cat", "stars": "5"}\n\n')
  processor = custom_data.CustomProcessor(f"{ram}/mine", text_a_column="text",
                                          label_column="stars")
  assert [e.text_a for e in processor.get_train_examples()] == ["the cat, sat", "dog"]
  assert processor.get_labels() == ["1", "5"]
  assert [(e.text_a, e.label) for e in processor.get_dev_examples()] == [("a cat", "5")]
  named = custom_data.CustomProcessor("unused", text_a_column="text", label_column="stars",
                                      files={"train": f"{ram}/mine/train.csv"})
  assert len(named.get_train_examples()) == 2


def test_conll_and_swag_readers(ram):
  _write(f"{ram}/ner/train.txt", "-DOCSTART- O\n\nthe O\ndog B-ANIMAL\n\ncat B-ANIMAL\n")
  path = conll.find_split_file(f"{ram}/ner", "train")
  sentences = conll.read_conll_file(path)
  assert [(s.words, s.tags, s.line) for s in sentences] == [
      (("the", "dog"), ("O", "B-ANIMAL"), 3), (("cat",), ("B-ANIMAL",), 6)]
  conll.write_predictions(f"{ram}/ner/out.txt", sentences, [["O", "O"], ["B-ANIMAL"]])
  assert "dog B-ANIMAL O" in _read_text(f"{ram}/ner/out.txt")

  header = "fold-ind,sent1,sent2,ending0,ending1,label\n"
  csv_file = _write(f"{ram}/swag/train.csv", header + '7,The cat,"sat, then",ran.,sat.,1\n')
  [example] = swag.read_swag_examples(csv_file)
  assert (example.example_id, example.start_ending, example.endings, example.label) == (
      "7", "sat, then", ("ran.", "sat."), 1)
  jsonl_file = _write(f"{ram}/swag/val.jsonl",
                      json.dumps({"sent1": "A dog", "sent2": "ran", "ending0": "far",
                                  "ending1": "away"}) + "\n")
  assert swag.read_swag_examples(jsonl_file)[0].endings == ("far", "away")


def test_squad_reader_feature_writers_and_evaluation(ram):
  tokenizer = tokenization.FullTokenizer(_vocab(ram), do_lower_case=True)
  context = "The cat sat on the mat."
  data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "q1", "question": "where is the cat",
       "answers": [{"text": "the mat", "answer_start": context.index("the mat")}]}]}]}]}
  data_file = _write(f"{ram}/squad/train.json", json.dumps(data))
  examples, skipped = squad.read_squad_examples(data_file, is_training=True)
  assert skipped == [] and examples[0].orig_answer_text == "the mat"
  features = list(squad.convert_examples_to_features(examples, tokenizer, 24, 8, 8, True))
  records = f"{ram}/squad/records/train.tf_record"
  tf.io.gfile.makedirs(os.path.dirname(records))
  assert squad.write_features(features, records, is_training=True) == 1
  _, labels = next(iter(squad.create_squad_dataset(records, 24, 1, is_training=True)))
  assert int(labels["start_positions"][0]) == features[0].start_position

  predictions = _write(f"{ram}/squad/predictions.json", json.dumps({"q1": "the mat"}))
  assert squad_evaluate.evaluate_files(data_file, predictions) == {"exact_match": 100.0,
                                                                   "f1": 100.0}

  examples = glue.GlueProcessor(
      "SST-2", os.path.dirname(_write(f"{ram}/SST-2/train.tsv", "sentence\tlabel\ncat\t1\n"))
  ).get_train_examples()
  records = f"{ram}/classifier/new/train.tf_record"
  assert classifier_features.file_based_convert_examples_to_features(
      examples, ["0", "1"], 8, tokenizer, records) == 1
  inputs, label, _ = next(iter(classifier_features.create_classifier_dataset(records, 8, 1, False)))
  assert inputs["input_word_ids"][0, :3].numpy().tolist() == [2, VOCAB.index("cat"), 3]
  assert int(label[0]) == 1
  assert tf.io.gfile.listdir(f"{ram}/classifier/new") == ["train.tf_record"]


def test_create_pretraining_data_from_and_to_ram(ram):
  vocab_file = _vocab(ram)
  rng = np.random.default_rng(0)
  documents = ["\n".join(" ".join(rng.choice(WORDS[:11], 6)) for _ in range(5))
               for _ in range(12)]
  _write(f"{ram}/corpus/a.txt", "\n\n".join(documents[:6]) + "\n")
  _write(f"{ram}/corpus/b.txt", "\n\n".join(documents[6:]) + "\n")
  outputs = [f"{ram}/out/one.tfrecord", f"{ram}/out/two.tfrecord"]
  stats = create_pretraining_data(
      f"{ram}/corpus/*.txt", ",".join(outputs), vocab_file, num_workers=1, shard_bytes=256,
      options=InstanceOptions(max_seq_length=24, max_predictions_per_seq=4, dupe_factor=2))
  assert stats.instances > 10 and stats.lines == 60 + 10
  assert sorted(tf.io.gfile.listdir(f"{ram}/out")) == ["one.tfrecord", "two.tfrecord"]
  counts = [sum(1 for _ in tf.data.TFRecordDataset(path)) for path in outputs]
  assert sum(counts) == stats.instances and abs(counts[0] - counts[1]) <= 1
  record = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(outputs[0]))).numpy())
  assert len(record.features.feature["input_ids"].int64_list.value) == 24


def test_model_folder_tf1_and_hugging_face_checkpoints(ram):
  vocab_file = _vocab(ram)
  pretrainer = BertPretrainer(CONFIG)
  save_model_dir(pretrainer, f"{ram}/model", vocab_file=vocab_file, do_lower_case=True)
  loaded, info = load_model_dir(f"{ram}/model")
  assert info.kind == "pretrainer" and tf.io.gfile.exists(f"{ram}/model/vocab.txt")
  for expected, actual in zip(pretrainer.get_weights(), loaded.get_weights()):
    np.testing.assert_array_equal(expected, actual)

  prefix = save_tf1_checkpoint(pretrainer, f"{ram}/tf1/bert_model.ckpt")
  assert tf1.resolve_tf1_prefix(f"{ram}/tf1") == prefix == tf1.resolve_tf1_prefix(prefix)
  assert tf1.resolve_tf1_prefix(f"{ram}/model") is None
  restored = BertPretrainer(CONFIG)
  load_tf1_checkpoint(restored, prefix)
  np.testing.assert_array_equal(restored.encoder.get_weights()[0],
                                pretrainer.encoder.get_weights()[0])
  CONFIG.to_json_file(f"{ram}/tf1/bert_config.json")
  encoder = load_encoder(f"{ram}/tf1")
  np.testing.assert_array_equal(encoder.get_weights()[0], pretrainer.encoder.get_weights()[0])

  words = np.random.default_rng(1).standard_normal((CONFIG.vocab_size, 16)).astype(np.float32)
  with file_io.atomic_write(f"{ram}/hf/model.safetensors", "wb") as f:
    f.write(save({"embeddings.word_embeddings.weight": words}))
  _write(f"{ram}/hf/config.json", json.dumps({**CONFIG.to_dict(), "model_type": "bert",
                                              "hidden_act": "gelu_new"}))  # tanh, in HF names
  found = (f"{ram}/hf/config.json", f"{ram}/hf/model.safetensors")
  assert huggingface.find_hf_checkpoint(f"{ram}/hf") == found
  assert huggingface.find_hf_checkpoint(found[1]) == found
  np.testing.assert_array_equal(
      huggingface.read_hf_weights(f"{ram}/hf")["embeddings.word_embeddings.weight"], words)
  assert huggingface.read_hf_config(f"{ram}/hf") == CONFIG


def test_extract_features_input_output_and_vocab_beside_the_checkpoint(ram):
  save_model_dir(BertEncoder(CONFIG), f"{ram}/encoder", vocab_file=_vocab(ram),
                 do_lower_case=True)
  assert feature_extraction._default_vocab(f"{ram}/encoder") == f"{ram}/encoder/vocab.txt"
  input_file = _write(f"{ram}/input.txt", "the cat sat\na dog ||| ran far\n")
  output_file = f"{ram}/features/out.jsonl"
  task = feature_extraction.FeatureExtractionTask(FeatureExtractionConfig(
      input_file=input_file, output_file=output_file, layers="-1", pooling="mean",
      max_seq_length=16))
  driver.run(task, ExperimentConfig(output_dir=f"{ram}/features",
                                    init_checkpoint=f"{ram}/encoder"), Modes(predict=True))
  lines = [json.loads(line) for line in io.StringIO(_read_text(output_file))]
  assert [line["linex_index"] for line in lines] == [0, 1]
  assert len(lines[0]["embedding"]) == CONFIG.hidden_size
  assert tf.io.gfile.listdir(f"{ram}/features") == ["out.jsonl"]
