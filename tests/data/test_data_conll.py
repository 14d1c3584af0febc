"""Tests for official_bert.data.conll: reading, first-piece labels, splitting, predictions back."""

import os

import keras
import numpy as np
import pytest

from official_bert import BertTokenClassifier, tokenization
from official_bert.data import conll
from official_bert.evaluation import ner_metrics

from testing import shared_data, tiny_bert_config, tiny_tokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "john", "smith", "##son", "lives", "in", "berlin",
         "."]
CONLL_2003_STYLE = """-DOCSTART- -X- -X- O

John NNP B-NP B-PER
Smithson NNP I-NP I-PER
lives VBZ B-VP O
in IN B-PP O
Berlin NNP B-NP B-LOC


. . O O
\t
-DOCSTART- -X- -X- O
Berlin NNP B-NP I-LOC
"""


@pytest.fixture
def tokenizer(tmp_path):
  return tiny_tokenizer(tmp_path / "vocab.txt", VOCAB)


def _sentence(words, tags, line=1):
  return conll.TaggedSentence(tuple(words), None if tags is None else tuple(tags), "mem", line)


def _gold_as_predictions(features):
  return np.where(features.label_ids >= 0, features.label_ids, 0)


def test_read_skips_docstart_and_blank_lines(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text(CONLL_2003_STYLE)
  sentences = conll.read_conll_file(str(path))
  assert [s.words for s in sentences] == [
      ("John", "Smithson", "lives", "in", "Berlin"), (".",), ("Berlin",)]
  # The tag is the last column; IOB1 ("I-LOC" opening an entity) is read as it is.
  assert [s.tags for s in sentences] == [("B-PER", "I-PER", "O", "O", "B-LOC"), ("O",), ("I-LOC",)]
  assert [s.line for s in sentences] == [3, 10, 13]
  assert conll.get_label_list(sentences) == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]


def test_read_untagged_file_and_byte_order_marks(tmp_path):
  path = tmp_path / "test.txt"
  path.write_text("\ufeffJohn\nlives\n\nBerlin\n\ufeff\n", encoding="utf-8")
  sentences = conll.read_conll_file(str(path))
  assert [(s.words, s.tags) for s in sentences] == [(("John", "lives"), None), (("Berlin",), None)]
  with pytest.raises(ValueError, match=r"test\.txt:1: the labels come from tagged sentences"):
    conll.get_label_list(sentences)


def test_read_errors_name_file_and_line(tmp_path):
  path = tmp_path / "dev.txt"
  path.write_text("John B-PER\nlives O\n\nBerlin\n")
  with pytest.raises(ValueError, match=r"dev\.txt:4: 1 column\(s\), but the first token line"):
    conll.read_conll_file(str(path))
  path.write_bytes(b"John B-PER\n\xff O\n")
  with pytest.raises(ValueError, match=r"dev\.txt:2: not valid UTF-8 at column 1"):
    conll.read_conll_file(str(path))
  path.write_text("-DOCSTART- O\n\n")
  with pytest.raises(ValueError, match=r"dev\.txt: no sentences"):
    conll.read_conll_file(str(path))


def test_find_split_file(tmp_path):
  for name in ("train.txt", "valid.txt", "test.txt"):
    (tmp_path / name).write_text("a O\n")
  assert conll.find_split_file(str(tmp_path), "dev") == str(tmp_path / "valid.txt")
  assert conll.find_split_file(str(tmp_path), "train") == str(tmp_path / "train.txt")
  (tmp_path / "dev.txt").write_text("a O\n")
  with pytest.raises(ValueError, match="several dev files"):
    conll.find_split_file(str(tmp_path), "dev")
  wnut = tmp_path / "wnut"
  wnut.mkdir()
  (wnut / "dev.conll").write_text("a O\n")
  assert conll.find_split_file(str(wnut), "dev") == str(wnut / "dev.conll")
  with pytest.raises(FileNotFoundError, match=r"none of \['train.txt', 'train.conll'\]"):
    conll.find_split_file(str(wnut), "train")
  with pytest.raises(ValueError, match="Unknown split 'validation'"):
    conll.find_split_file(str(wnut), "validation")


def test_label_goes_on_the_first_piece(tokenizer):
  sentence = _sentence(["John", "Smithson", "lives", "in", "Berlin"],
                       ["B-PER", "I-PER", "O", "O", "B-LOC"])
  labels = ["O", "B-LOC", "B-PER", "I-PER"]
  features = conll.convert_sentences_to_features([sentence], labels, tokenizer, max_seq_length=10)
  # [CLS] john smith ##son lives in berlin [SEP] [PAD] [PAD]
  assert features.input_word_ids.tolist() == [[2, 4, 5, 6, 7, 8, 9, 3, 0, 0]]
  assert features.input_mask.tolist() == [[1] * 8 + [0] * 2]
  assert features.input_type_ids.tolist() == [[0] * 10]
  assert features.label_ids.tolist() == [[-1, 2, 3, -1, 0, 0, 1, -1, -1, -1]]
  assert features.word_index.tolist() == [[-1, 0, 1, -1, 2, 3, 4, -1, -1, -1]]
  assert features.label_mask.tolist() == [[0, 1, 1, 0, 1, 1, 1, 0, 0, 0]]
  assert features.sentence_index.tolist() == [0]
  assert (features.num_split_sentences, features.num_truncated_words) == (0, 0)


def test_long_sentences_are_split_between_words(tokenizer):
  sentences = [_sentence(["John", "Smithson", "lives", "in", "Berlin"],
                         ["B-PER", "I-PER", "O", "O", "B-LOC"]),
               _sentence(["Berlin"], ["B-LOC"])]
  labels = ["O", "B-LOC", "B-PER", "I-PER"]
  features = conll.convert_sentences_to_features(sentences, labels, tokenizer, max_seq_length=5)
  # Three pieces a feature: "john smith ##son" | "lives in berlin" | "berlin".
  assert features.input_word_ids.tolist() == [[2, 4, 5, 6, 3], [2, 7, 8, 9, 3], [2, 9, 3, 0, 0]]
  assert features.word_index.tolist() == [[-1, 0, 1, -1, -1], [-1, 2, 3, 4, -1],
                                          [-1, 0, -1, -1, -1]]
  assert features.label_ids.tolist() == [[-1, 2, 3, -1, -1], [-1, 0, 0, 1, -1],
                                         [-1, 1, -1, -1, -1]]
  assert features.sentence_index.tolist() == [0, 0, 1]
  assert (features.num_sentences, features.num_split_sentences) == (2, 1)
  tags = conll.predictions_to_tags(features, _gold_as_predictions(features), sentences, labels)
  assert tags == [list(s.tags) for s in sentences]


def test_words_longer_than_a_feature_are_truncated_and_counted(tokenizer):
  sentence = _sentence(["Smithson", "\u200b", "in"], ["B-PER", "O", "O"])
  features = conll.convert_sentences_to_features([sentence], ["O", "B-PER"], tokenizer,
                                                 max_seq_length=3)
  # One piece a feature: "smith" (of smith ##son), "[UNK]" for the format character, "in".
  assert features.input_word_ids.tolist() == [[2, 5, 3], [2, 1, 3], [2, 8, 3]]
  assert features.label_ids[:, 1].tolist() == [1, 0, 0]
  assert (features.num_truncated_words, features.num_empty_words) == (1, 1)
  assert conll.predictions_to_tags(
      features, [[0, 1, 0], [0, 0, 0], [0, 1, 0]], [sentence], ["O", "B-PER"]) == [
          ["B-PER", "O", "B-PER"]]


def test_unknown_tag_is_reported_with_its_line(tokenizer):
  sentence = _sentence(["John", "Berlin"], ["B-PER", "B-GPE"], line=40)
  with pytest.raises(ValueError, match=r"mem:41: tag 'B-GPE' is not among the labels"):
    conll.convert_sentences_to_features([sentence], ["O", "B-PER"], tokenizer, 8)


def test_untagged_sentences_get_ignored_labels_but_a_prediction_mask(tokenizer):
  sentence = _sentence(["John", "Smithson"], None)
  features = conll.convert_sentences_to_features([sentence], ["O", "B-PER"], tokenizer, 6)
  assert (features.label_ids == -1).all()
  assert features.label_mask.tolist() == [[0, 1, 1, 0, 0, 0]]
  logits = np.zeros([1, 6, 2])
  logits[0, 1, 1] = 1.0
  assert conll.predictions_to_tags(features, logits, [sentence], ["O", "B-PER"]) == [
      ["B-PER", "O"]]


def test_predictions_must_match_the_features(tokenizer):
  sentences = [_sentence(["John"], ["O"])]
  features = conll.convert_sentences_to_features(sentences, ["O"], tokenizer, 4)
  with pytest.raises(ValueError, match=r"shape \(1, 3\), the features \(1, 4\)"):
    conll.predictions_to_tags(features, np.zeros([1, 3]), sentences, ["O"])
  with pytest.raises(ValueError, match="2 sentences, but the features come from 1"):
    conll.predictions_to_tags(features, np.zeros([1, 4]), sentences * 2, ["O"])


def test_write_predictions_atomically(tmp_path):
  tagged = [_sentence(["John", "lives"], ["B-PER", "O"]), _sentence(["Hi"], ["O"])]
  path = tmp_path / "predictions.txt"
  conll.write_predictions(str(path), tagged, [["B-PER", "B-LOC"], ["O"]])
  assert path.read_text() == "John B-PER B-PER\nlives O B-LOC\n\nHi O O\n\n"
  # The written file reads back with the predictions as its (last-column) tags.
  assert [s.tags for s in conll.read_conll_file(str(path))] == [("B-PER", "B-LOC"), ("O",)]

  conll.write_predictions(str(path), [_sentence(["John"], None)], [["B-PER"]])
  assert path.read_text() == "John B-PER\n\n"
  with pytest.raises(ValueError, match="1 words but 2 predicted tags"):
    conll.write_predictions(str(path), [_sentence(["John"], None)], [["O", "O"]])
  assert path.read_text() == "John B-PER\n\n"
  assert os.listdir(tmp_path) == ["predictions.txt"]


def test_dataset_feeds_a_keras_tagger(tokenizer):
  sentences = [_sentence(["John", "Smithson", "lives", "in", "Berlin"],
                         ["B-PER", "I-PER", "O", "O", "B-LOC"])] * 3
  labels = ["O", "B-LOC", "B-PER", "I-PER"]
  features = conll.convert_sentences_to_features(sentences, labels, tokenizer, max_seq_length=6)
  assert len(features) == 6
  batches = list(conll.make_dataset(features, batch_size=4))
  inputs, label_ids, label_mask = batches[0]
  assert [b[1].shape[0] for b in batches] == [4, 2]
  np.testing.assert_array_equal(inputs["input_word_ids"].numpy(), features.input_word_ids[:4])
  np.testing.assert_array_equal(label_ids.numpy(), features.label_ids[:4])
  np.testing.assert_array_equal(label_mask.numpy(), features.label_mask[:4])
  assert label_mask.dtype.name == "float32" and inputs["input_mask"].dtype.name == "int32"

  # Keras reads (x, y, sample_weight); the -1 labels are skipped through `ignore_class`.
  word_ids = keras.Input([6], dtype="int32", name="input_word_ids")
  hidden = keras.layers.Embedding(len(VOCAB), 8)(word_ids)
  model = keras.Model({"input_word_ids": word_ids}, keras.layers.Dense(len(labels))(hidden))
  model.compile(optimizer=keras.optimizers.Adam(0.05),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1))
  training = conll.make_dataset(features, batch_size=2, is_training=True, seed=1).map(
      lambda x, y, w: ({"input_word_ids": x["input_word_ids"]}, y, w))
  history = model.fit(training, steps_per_epoch=10, epochs=3, shuffle=False, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  assert history.history["loss"][-1] < history.history["loss"][0]
  logits = model.predict(conll.make_dataset(features, batch_size=4).map(
      lambda x, y, w: {"input_word_ids": x["input_word_ids"]}), verbose=0)
  assert conll.predictions_to_tags(features, logits, sentences, labels) == [
      list(s.tags) for s in sentences]


def test_bert_token_classifier_predictions_re_assemble_per_word(tokenizer):
  sentences = [_sentence(["John", "Smithson", "lives", "in", "Berlin"], None),
               _sentence(["Berlin", "."], None)]
  labels = ["O", "B-LOC", "B-PER", "I-PER"]
  features = conll.convert_sentences_to_features(sentences, labels, tokenizer, max_seq_length=5)
  config = tiny_bert_config(len(VOCAB))
  model = BertTokenClassifier(config, num_classes=len(labels))
  logits = np.concatenate([model(inputs)["logits"].numpy()
                           for inputs, _, _ in conll.make_dataset(features, batch_size=2)])
  assert logits.shape == (len(features), 5, len(labels))
  tags = conll.predictions_to_tags(features, logits, sentences, labels)
  assert [len(t) for t in tags] == [5, 2]
  best = logits.argmax(-1)
  # "lives" is the first word of the second feature of sentence 0, at position 1.
  assert tags[0][2] == labels[best[1, 1]]


def test_wnut17_slice_round_trip(tmp_path):
  sentences = conll.read_conll_file(str(shared_data("ner/wnut17/train.conll")))
  assert len(sentences) == 3394  # the published size of the WNUT-17 training set
  assert sentences[0].words[:3] == ("@paulwalk", "It", "'s")
  assert sentences[0].tags[14:17] == ("B-location", "I-location", "I-location")
  labels = conll.get_label_list(sentences)
  assert labels[0] == "O" and len(labels) == 13
  tokenizer = tokenization.FullTokenizer(str(shared_data("vocab/bert-base-uncased-vocab.txt")))
  some = sentences[:300]
  features = conll.convert_sentences_to_features(some, labels, tokenizer, max_seq_length=24)
  assert features.num_split_sentences > 0
  assert len(features) > len(some)
  # Every word is labelled exactly once, on one feature position.
  assert (features.label_ids >= 0).sum() == sum(len(s.words) for s in some)
  tags = conll.predictions_to_tags(features, _gold_as_predictions(features), some, labels)
  assert tags == [list(s.tags) for s in some]
  report = ner_metrics.evaluate([s.tags for s in some], tags)
  assert report.overall.f1 == 1.0 and report.overall.num_gold > 100
  path = tmp_path / "wnut_predictions.txt"
  conll.write_predictions(str(path), some, tags)
  assert [s.words for s in conll.read_conll_file(str(path))] == [s.words for s in some]
