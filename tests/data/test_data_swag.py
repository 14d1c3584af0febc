"""Tests for official_bert.data.swag: reading CSV and JSON lines, packing choices, tf.data input."""

import json

import numpy as np
import pytest

from official_bert import BertMultipleChoice, tokenization
from official_bert.data import swag

from testing import shared_data, tiny_bert_config, tiny_tokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "runs", ".", "he", "stops",
         "jump", "##s", "high", "falls", "sits"]
CSV_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"


@pytest.fixture
def tokenizer(tmp_path):
  return tiny_tokenizer(tmp_path / "vocab.txt", VOCAB)


def _example(label=1):
  return swag.SwagExample(example_id="0", context="The man runs.", start_ending="He",
                          endings=("stops.", "jumps high.", "falls quickly", "sits"), label=label)


def test_read_csv_with_and_without_labels(tmp_path):
  labelled = tmp_path / "val.csv"
  labelled.write_text(
      CSV_HEADER + ",label\n"
      'lsmdc1,17,"A man, smiling, waves. He",A man waves.,He,gold,"waves, again.",sits.,runs.,'
      "eats.,2\n"
      "anetv_x,18,Someone cooks. She,Someone cooks.,She,gen,stirs.,sings.,sleeps.,jumps.,0\n")
  examples = swag.read_swag_csv(str(labelled))
  assert examples[0] == swag.SwagExample(
      example_id="17", context="A man waves.", start_ending="He",
      endings=("waves, again.", "sits.", "runs.", "eats."), label=2)
  assert [e.label for e in examples] == [2, 0]

  test = tmp_path / "test.csv"
  test.write_text(CSV_HEADER + "\nv,5,s,Someone cooks.,She,gen,a.,b.,c.,d.\n")
  (example,) = swag.read_swag_examples(str(test))
  assert example.label is None
  assert example.endings == ("a.", "b.", "c.", "d.")


def test_read_csv_with_a_leading_index_column(tmp_path):
  # The released swagaf files start with an unnamed column (a pandas index).
  path = tmp_path / "train.csv"
  path.write_text("," + CSV_HEADER + ",label\n0,v,9,s,A man sits.,He,gold,a.,b.,c.,d.,3\n")
  (example,) = swag.read_swag_csv(str(path))
  assert (example.example_id, example.context, example.endings[0], example.label) == (
      "9", "A man sits.", "a.", 3)


def test_csv_errors_name_file_line_and_field(tmp_path):
  path = tmp_path / "bad.csv"
  path.write_text(CSV_HEADER + ",label\nv,1,s,A.,B,g,a,b,c,d,1\nv,2,s,A.,B,g,a,b,c,d,7\n")
  with pytest.raises(ValueError, match=r"bad\.csv:3: field 'label' must be an integer in \[0, 4\)"):
    swag.read_swag_csv(str(path))
  path.write_text(CSV_HEADER + ",label\nv,1,s,A.,B,g,a,b,c,d,1.0\n")
  with pytest.raises(ValueError, match=r"bad\.csv:2: field 'label' .* got '1\.0'"):
    swag.read_swag_csv(str(path))
  path.write_text(CSV_HEADER + ",label\nv,1,s,A.,B,g,a,b,c,d,1,extra\n")
  with pytest.raises(ValueError, match=r"bad\.csv:2: the row has more fields than the 11"):
    swag.read_swag_csv(str(path))
  path.write_text(CSV_HEADER + ",label\nv,1,s,A.,B,g,a,b\n")
  with pytest.raises(ValueError, match=r"bad\.csv:2: the row ends before the field\(s\) \['en"):
    swag.read_swag_csv(str(path))
  path.write_text("video-id,sent1,ending0,ending1\n")
  with pytest.raises(ValueError, match=r"bad\.csv:1: header lacks the column\(s\) \['sent2'\]"):
    swag.read_swag_csv(str(path))
  # A SWAG CSV without ending3: the first label 3 names the missing column.
  path.write_text(CSV_HEADER.replace(",ending3", "") + ",label\nv,1,s,A.,B,g,a,b,c,1\n"
                  "v,2,s,A.,B,g,a,b,c,3\n")
  with pytest.raises(ValueError, match=r"bad\.csv:3: .* got '3' \(the endings are ending0 to "
                                       r"ending2: is ending3 missing\?\)"):
    swag.read_swag_csv(str(path))
  path.write_text("sent1,sent2,ending0,ending2\n")
  with pytest.raises(ValueError, match=r"bad\.csv:1: no column\(s\) ending1: "):
    swag.read_swag_csv(str(path))


def test_read_jsonl(tmp_path):
  path = tmp_path / "dev.jsonl"
  rows = [{"sent1": "A.", "sent2": "B", "ending0": "c", "ending1": "d", "ending2": "e",
           "ending3": "f", "label": 3},
          {"id": "x7", "sent1": "G.", "sent2": "H", "ending0": "i", "ending1": "j", "ending2": "k",
           "ending3": "l"}]
  path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n")
  first, second = swag.read_swag_examples(str(path))
  assert first == swag.SwagExample("dev.jsonl:1", "A.", "B", ("c", "d", "e", "f"), 3)
  assert (second.example_id, second.label, second.endings[3]) == ("x7", None, "l")


@pytest.mark.parametrize("line, message", [
    ("{not json", r"t\.jsonl:2: not valid JSON"),
    ('["a"]', r"t\.jsonl:2: expected a JSON object"),
    ('{"sent1": 5, "sent2": "B", "ending0": "a", "ending1": "b", "ending2": "c", "ending3": "d"}',
     r"t\.jsonl:2: field 'sent1' must be a string"),
    ('{"sent1": "A", "sent2": "B", "ending0": "a", "ending1": "b", "ending2": "c", "ending3": "d",'
     ' "label": true}', r"t\.jsonl:2: field 'label' must be an integer"),
    ('{"sent1": "A", "sent2": "B", "ending0": "a", "ending1": "b", "ending2": "c"}',
     r"t\.jsonl:2: no key\(s\) ending3, which the first example has \(4 endings\)"),
])
def test_jsonl_errors_name_file_line_and_field(tmp_path, line, message):
  path = tmp_path / "t.jsonl"
  good = {"sent1": "A", "sent2": "B", "ending0": "a", "ending1": "b", "ending2": "c",
          "ending3": "d", "label": 0}
  path.write_text(json.dumps(good) + "\n" + line + "\n")
  with pytest.raises(ValueError, match=message):
    swag.read_swag_jsonl(str(path))


def test_real_sample(tmp_path):
  path = shared_data("swag/sample.jsonl")
  examples = swag.read_swag_examples(str(path))
  assert len(examples) == 10
  assert examples[0].context.startswith("Members of the procession walk down the street")
  assert examples[0].start_ending == "A drum line"
  assert [e.label for e in examples[:3]] == [0, 3, 1]
  tokenizer = tokenization.FullTokenizer(str(shared_data("vocab/bert-base-uncased-vocab.txt")))
  features = swag.convert_examples_to_features(examples, tokenizer, max_seq_length=64)
  assert features.input_word_ids.shape == (10, 4, 64)
  assert features.labels.tolist() == [e.label for e in examples]
  assert features.num_truncated_choices == 0
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  for example, word_ids, type_ids in zip(examples, features.input_word_ids,
                                         features.input_type_ids):
    context = tokenizer.tokenize(example.context)
    for ending, ids, types in zip(example.endings, word_ids, type_ids):
      second = tokenizer.tokenize(example.start_ending) + tokenizer.tokenize(ending)
      expected = tokenizer.convert_tokens_to_ids(["[CLS]"] + context + ["[SEP]"] + second
                                                 + ["[SEP]"])
      assert ids[:len(expected)].tolist() == expected
      assert not ids[len(expected):].any()
      assert types.tolist() == ([0] * (len(context) + 2) + [1] * (len(second) + 1)
                                + [0] * (64 - len(expected)))
      assert ids[0] == cls_id and (ids == sep_id).sum() == 2


def test_packing_by_hand(tokenizer):
  features = swag.convert_examples_to_features([_example()], tokenizer, max_seq_length=12)
  # [CLS]=2 the=5 man=6 runs=7 .=8 [SEP]=3 he=9 stops=10 jump=11 ##s=12 high=13 falls=14 sits=15,
  # "quickly" is not in the vocab: [UNK]=1.
  assert features.input_word_ids[0].tolist() == [
      [2, 5, 6, 7, 8, 3, 9, 10, 8, 3, 0, 0],
      [2, 5, 6, 7, 8, 3, 9, 11, 12, 13, 8, 3],
      [2, 5, 6, 7, 8, 3, 9, 14, 1, 3, 0, 0],
      [2, 5, 6, 7, 8, 3, 9, 15, 3, 0, 0, 0],
  ]
  assert features.input_mask[0].tolist() == [
      [1] * 10 + [0] * 2, [1] * 12, [1] * 10 + [0] * 2, [1] * 9 + [0] * 3]
  assert features.input_type_ids[0].tolist() == [
      [0] * 6 + [1] * 4 + [0] * 2, [0] * 6 + [1] * 6, [0] * 6 + [1] * 4 + [0] * 2,
      [0] * 6 + [1] * 3 + [0] * 3]
  assert features.labels.tolist() == [1]
  assert features.input_word_ids.dtype == np.int32
  assert features.num_truncated_choices == 0


def test_truncation_takes_from_the_longer_part(tokenizer):
  features = swag.convert_examples_to_features([_example(label=None)], tokenizer, max_seq_length=8)
  # Choice 1: context "the man runs ." (4) and "he jump ##s high ." (5) must fit in 5 tokens.
  # Longer-first, the second on ties: 4/5 -> 4/4 -> 4/3 -> 3/3 -> 3/2.
  assert features.input_word_ids[0, 1].tolist() == [2, 5, 6, 7, 3, 9, 11, 3]
  assert features.input_type_ids[0, 1].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
  # Choice 3: "the man runs ." (4) and "he sits" (2): 4/2 -> 3/2.
  assert features.input_word_ids[0, 3].tolist() == [2, 5, 6, 7, 3, 9, 15, 3]
  assert features.num_truncated_choices == 4
  assert features.labels.tolist() == [swag.NO_LABEL]


def test_examples_must_agree_on_the_number_of_choices(tokenizer):
  odd = swag.SwagExample("1", "The man.", "He", ("runs", "sits"), 0)
  with pytest.raises(ValueError, match="example '1' has 2 endings, the first example 4"):
    swag.convert_examples_to_features([_example(), odd], tokenizer, max_seq_length=16)


def test_dataset(tokenizer):
  examples = [_example(label=i % 4) for i in range(5)]
  features = swag.convert_examples_to_features(examples, tokenizer, max_seq_length=12)
  batches = list(swag.make_dataset(features, batch_size=2))
  assert len(batches) == 3
  inputs, labels = batches[0]
  assert set(inputs) == {"input_word_ids", "input_mask", "input_type_ids"}
  for name, tensor in inputs.items():
    assert tensor.dtype.name == "int32"
    np.testing.assert_array_equal(tensor.numpy(), getattr(features, name)[:2])
  assert labels.numpy().tolist() == [0, 1]
  assert batches[2][1].numpy().tolist() == [0]
  config = tiny_bert_config(len(VOCAB))
  assert BertMultipleChoice(config, num_choices=4)(inputs)["logits"].shape == (2, 4)

  training = swag.make_dataset(features, batch_size=2, is_training=True, seed=3)
  seen = [labels.numpy().tolist() for _, labels in training.take(5)]
  assert all(len(batch) == 2 for batch in seen)
  # Ten labels drawn from two passes over the five examples: each example exactly twice.
  assert sorted(sum(seen, [])) == sorted([0, 1, 2, 3, 0] * 2)
