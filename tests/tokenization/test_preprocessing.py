"""Tests of `official_bert.preprocessing`: the in-graph tokenizer against `FullTokenizer`, and the
input packer against `truncate_seq_pair`."""

import csv
import os
import random
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import tokenization
from official_bert.preprocessing import BertInputPacker, BertTokenizerLayer

from testing import SPECIAL_TOKENS, shared_data, write_vocab

HANDWRITTEN = [
    "Hello, World! Héllo wörld — «quoted» ¿qué? l'été",
    "UNwant\u00e9d,running İstanbul STRASSE Straße ΟΔΟΣ σας Σ",
    "中文字符abc日本語のテキスト 한국어 텍스트",
    "emoji 😀👍🏽 and 5€ a→b ﬁ … ½ ²",
    "ab\x00cd \ufffdef gh\x07ij co\u00adop ze\u200bro a\u200db",
    "tab\there\nnew\r\nline\u00a0nbsp\u3000wide\u2028sep  ",
    "x" * 200 + " " + "x" * 201 + ",x " + "é" * 150 + " " + "é" * 201 + " ж" * 3 + " " + "ж" * 201,
    "",
    "   ",
    "[CLS] [UNK] ##ing #hash $5.00 C++ e-mail @user",
]


def read_tsv_column(path, column):
  with open(path, encoding="utf-8-sig", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  return [row[column] for row in rows[1:] if len(row) > column]




def char_vocab(texts, do_lower_case, extra=(), basic=None):
  """Every character of the texts' words, alone and as a continuation, plus a few whole pieces.

  `basic` splits the texts into words: a `BasicTokenizer(do_lower_case)` by default.
  """
  basic = basic or tokenization.BasicTokenizer(do_lower_case)
  chars = sorted({c for text in texts for word in basic.tokenize(text) for c in word})
  pieces = SPECIAL_TOKENS + list(extra)
  return pieces + [c for c in chars if c not in pieces] + ["##" + c for c in chars]


def assert_agreement(vocab_file, do_lower_case, texts):
  """Returns the number of texts compared; fails listing the first disagreements."""
  reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
  got = layer.tokenize_numpy(texts)
  differ = []
  for text, ids in zip(texts, got):
    expected = reference.convert_tokens_to_ids(reference.tokenize(text))
    if ids.tolist() != expected:
      differ.append((text[:80], reference.convert_ids_to_tokens(expected)[:20],
                     reference.convert_ids_to_tokens(ids.tolist())[:20]))
  assert not differ, f"{len(differ)} of {len(texts)} texts differ, first: {differ[:3]}"
  return len(texts)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_layer_matches_full_tokenizer_on_handwritten_text(tmp_path, do_lower_case):
  extra = ["hello", "world", "un", "##want", "##ed", "runn", "##ing", "##ll", "xx", "##xx"]
  vocab_file = write_vocab(tmp_path / "vocab.txt", char_vocab(HANDWRITTEN, do_lower_case, extra))
  assert assert_agreement(vocab_file, do_lower_case, HANDWRITTEN) == len(HANDWRITTEN)
  layer = BertTokenizerLayer(vocab_file, do_lower_case=do_lower_case)
  long_words = layer.tokenize_numpy(["x" * 201, "x" * 200, "é" * 201, "é" * 150])
  assert long_words[0].tolist() == [layer.unk_id] and long_words[2].tolist() == [layer.unk_id]
  assert len(long_words[1]) == 100 and len(long_words[3]) == 150
  # A batch without a run of 201 characters skips the long-word rewrite (tokenize_numpy's
  # shortcut); its ids are still those of the layer's call, which always rewrites.
  short_words = ["x" * 200, "é" * 150 + ",x", "hello world"]
  assert [ids.tolist() for ids in layer.tokenize_numpy(short_words)] == (
      layer(tf.constant(short_words)).to_list())


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_layer_matches_full_tokenizer_on_real_text(do_lower_case):
  vocab_file = str(shared_data("vocab/bert-base-uncased-vocab.txt"))
  texts = list(HANDWRITTEN)
  wikitext = shared_data("corpus/wikitext-2/valid.txt").read_text(encoding="utf-8").splitlines()
  texts += [line for line in wikitext if line.strip()][:1500]
  for path in sorted(shared_data("corpus/gutenberg").glob("*.txt")):
    texts += path.read_text(encoding="utf-8").splitlines()[:100]
  texts += read_tsv_column(shared_data("glue/SST-2/dev.tsv"), 0)
  texts += read_tsv_column(shared_data("glue/MRPC/dev.tsv"), 3)
  texts += read_tsv_column(shared_data("glue/MRPC/dev.tsv"), 4)
  assert assert_agreement(vocab_file, do_lower_case, texts) > 4500


class _Memoized:
  """A `BasicTokenizer` whose words of each of `texts` are computed once, when it is made."""

  def __init__(self, basic, texts):
    self.words = {text: basic.tokenize(text) for text in texts}

  def tokenize(self, text):
    return self.words[text]


@pytest.mark.slow  # a heavyweight comparison: both tokenizers on 290,000 texts, twice
def test_disagreements_on_all_assigned_code_points_are_only_icu_case_gaps(tmp_path):
  """Checks every code point assigned in Python's Unicode 14, inside and at the end of a word.

  Uncased, the only disagreements are the capitals new in Unicode 14 (e.g. U+2C2F, U+A7C0, the
  Vithkuqi letters U+10570...) that TensorFlow's older ICU does not lower-case; cased, none.
  """
  code_points = [cp for cp in range(0x110000)
                 if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co")]
  texts = [f"Ab{chr(cp)}cD e{chr(cp)}" for cp in code_points]
  icu_lower = tf.strings.lower([chr(cp) for cp in code_points], encoding="utf-8").numpy()
  icu_case_gaps = {cp for cp, lowered in zip(code_points, icu_lower)
                   if chr(cp).lower() != chr(cp) and lowered.decode("utf-8") == chr(cp)}
  assert len(icu_case_gaps) <= 64
  for do_lower_case in (True, False):
    # The words of each text are split once, for the vocabulary and for the reference.
    basic = _Memoized(tokenization.BasicTokenizer(do_lower_case), texts)
    vocab_file = write_vocab(tmp_path / f"v{do_lower_case}.txt",
                             char_vocab(texts, do_lower_case, basic=basic))
    reference = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    reference.basic_tokenizer = basic
    got = BertTokenizerLayer(vocab_file, do_lower_case).tokenize_numpy(texts, batch_size=8192)
    differ = {cp for cp, text, ids in zip(code_points, texts, got)
              if ids.tolist() != reference.convert_tokens_to_ids(reference.tokenize(text))}
    assert differ == (icu_case_gaps if do_lower_case else set()), sorted(map(hex, differ))[:20]


@pytest.fixture
def small_vocab_file(tmp_path):
  return write_vocab(tmp_path / "vocab.txt", char_vocab(HANDWRITTEN, True, ["hello", "world"]))


def test_special_ids_and_errors(tmp_path, small_vocab_file):
  layer = BertTokenizerLayer(small_vocab_file)
  assert (layer.pad_id, layer.unk_id, layer.cls_id, layer.sep_id, layer.mask_id) == (0, 1, 2, 3, 4)
  assert layer.vocab_size == len(tokenization.load_vocab(small_vocab_file))
  no_mask = write_vocab(tmp_path / "no_mask.txt", ["[PAD]", "[UNK]", "a"])
  with pytest.raises(ValueError, match=r"no_mask.txt has no \[MASK\] line"):
    _ = BertTokenizerLayer(no_mask).mask_id
  no_unk = write_vocab(tmp_path / "no_unk.txt", ["[PAD]", "a"])
  with pytest.raises(ValueError, match=r"no_unk.txt has no \[UNK\] line"):
    BertTokenizerLayer(no_unk)


def test_call_tokenize_numpy_tf_data_and_ids_to_tokens_agree(small_vocab_file):
  layer = BertTokenizerLayer(small_vocab_file)
  ragged = layer(tf.constant(HANDWRITTEN))
  assert ragged.dtype == tf.int32 and ragged.shape.rank == 2
  numpy_ids = layer.tokenize_numpy(HANDWRITTEN, batch_size=3)
  assert [row.tolist() for row in numpy_ids] == ragged.to_list()
  flat_ids, row_splits = layer.tokenize_flat_numpy(HANDWRITTEN, batch_size=4)
  assert flat_ids.dtype == np.int32 and row_splits.dtype == np.int64
  np.testing.assert_array_equal(flat_ids, ragged.flat_values)
  np.testing.assert_array_equal(row_splits, ragged.row_splits)
  empty_ids, empty_splits = layer.tokenize_flat_numpy([])
  assert empty_ids.shape == (0,) and empty_splits.tolist() == [0]
  dataset = tf.data.Dataset.from_tensor_slices(HANDWRITTEN).batch(4).map(layer)
  assert [row for batch in dataset for row in batch.to_list()] == ragged.to_list()
  tokens = layer.ids_to_tokens(layer(tf.constant(["Hello world!"]))).to_list()
  assert tokens == [[b"hello", b"world", b"!"]]


def test_savedmodel_round_trip_carries_the_vocab(tmp_path, small_vocab_file):
  layer = BertTokenizerLayer(small_vocab_file)
  module = tf.Module()
  module.tokenizer = layer
  module.tokenize = tf.function(
      lambda text: layer(text).to_tensor(-1), input_signature=[tf.TensorSpec([None], tf.string)])
  export_dir = str(tmp_path / "saved")
  tf.saved_model.save(module, export_dir)
  os.remove(small_vocab_file)
  assert os.listdir(os.path.join(export_dir, "assets")) == ["vocab.txt"]
  loaded = tf.saved_model.load(export_dir)
  expected = layer(tf.constant(HANDWRITTEN)).to_tensor(-1).numpy()
  np.testing.assert_array_equal(loaded.tokenize(tf.constant(HANDWRITTEN)).numpy(), expected)


def test_keras_model_export_and_config_round_trip(tmp_path, small_vocab_file):
  tokenizer = BertTokenizerLayer(small_vocab_file, do_lower_case=True)
  packer = BertInputPacker(seq_length=12, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id)
  text_a = keras.Input(shape=(), dtype="string")
  text_b = keras.Input(shape=(), dtype="string")
  model = keras.Model([text_a, text_b], packer([tokenizer(text_a), tokenizer(text_b)]))
  inputs = [tf.constant(HANDWRITTEN[:4]), tf.constant(HANDWRITTEN[4:8])]
  expected = {k: v.numpy() for k, v in model(inputs).items()}

  export_dir = str(tmp_path / "exported")
  model.export(export_dir, format="tf_saved_model", verbose=False)
  assert os.listdir(os.path.join(export_dir, "assets")) == ["vocab.txt"]
  served = tf.saved_model.load(export_dir).serve(inputs)
  for name, value in expected.items():
    np.testing.assert_array_equal(served[name].numpy(), value)

  keras_file = str(tmp_path / "model.keras")
  model.save(keras_file)
  reloaded = keras.models.load_model(keras_file)
  for name, value in reloaded(inputs).items():
    np.testing.assert_array_equal(value.numpy(), expected[name])
  config = tokenizer.get_config()
  assert config["vocab_file"] == small_vocab_file and config["do_lower_case"] is True
  clone = BertTokenizerLayer.from_config(config)
  assert clone(inputs[0]).to_list() == tokenizer(inputs[0]).to_list()


def pack_reference(a, b, seq_length, cls_id=101, sep_id=102, pad_id=0):
  """The original run_classifier packing, in Python: an empty `b` packs as a single segment."""
  a, b = list(a), list(b) if b is not None else None
  if not b:
    a = a[:seq_length - 2]
    ids, types = [cls_id] + a + [sep_id], [0] * (len(a) + 2)
  else:
    tokenization.truncate_seq_pair(a, b, seq_length - 3)
    ids = [cls_id] + a + [sep_id] + b + [sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
  mask = [1] * len(ids)
  padding = seq_length - len(ids)
  return ids + [pad_id] * padding, mask + [0] * padding, types + [0] * padding


def test_packer_single_and_pair_layout():
  packer = BertInputPacker(seq_length=8, cls_id=101, sep_id=102, pad_id=0)
  single = packer([tf.ragged.constant([[7, 8, 9], [1, 2, 3, 4, 5, 6, 7]])])
  np.testing.assert_array_equal(single["input_word_ids"],
                                [[101, 7, 8, 9, 102, 0, 0, 0], [101, 1, 2, 3, 4, 5, 6, 102]])
  np.testing.assert_array_equal(single["input_mask"], [[1] * 5 + [0] * 3, [1] * 8])
  np.testing.assert_array_equal(single["input_type_ids"], np.zeros([2, 8]))
  pair = packer((tf.ragged.constant([[7, 8, 9]]), tf.ragged.constant([[4, 5]])))
  np.testing.assert_array_equal(pair["input_word_ids"], [[101, 7, 8, 9, 102, 4, 5, 102]])
  np.testing.assert_array_equal(pair["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1, 1]])
  for value in pair.values():
    assert value.dtype == tf.int32 and value.shape == (1, 8)
  # A second segment without tokens packs as a single one, as in the original.
  empty_b = packer((tf.ragged.constant([[7, 8, 9], [7]]), tf.ragged.constant([[], [4]], tf.int32)))
  np.testing.assert_array_equal(empty_b["input_word_ids"], [[101, 7, 8, 9, 102, 0, 0, 0],
                                                            [101, 7, 102, 4, 102, 0, 0, 0]])
  np.testing.assert_array_equal(empty_b["input_type_ids"], [[0] * 8, [0, 0, 0, 1, 1, 0, 0, 0]])
  # A bare ragged tensor is one segment; dense int64 input is accepted too.
  bare = packer(tf.ragged.constant([[7, 8, 9]], dtype=tf.int64))
  dense = packer([tf.constant([[7, 8, 9]], dtype=tf.int64)])
  np.testing.assert_array_equal(bare["input_word_ids"], dense["input_word_ids"])


def test_packer_truncation_equals_truncate_seq_pair():
  rng = random.Random(1)
  seq_length = 16
  packer = BertInputPacker(seq_length=seq_length, cls_id=101, sep_id=102, pad_id=0)
  lengths = [(rng.randrange(25), rng.randrange(25)) for _ in range(600)]
  lengths += [(n, n) for n in range(20)] + [(n, 0) for n in range(20)]
  segments_a = [list(range(1000, 1000 + la)) for la, _ in lengths]
  segments_b = [list(range(2000, 2000 + lb)) for _, lb in lengths]
  pair = packer([tf.ragged.constant(segments_a, dtype=tf.int32, ragged_rank=1),
                 tf.ragged.constant(segments_b, dtype=tf.int32, ragged_rank=1)])
  single = packer([tf.ragged.constant(segments_a, dtype=tf.int32, ragged_rank=1)])
  for i, (a, b) in enumerate(zip(segments_a, segments_b)):
    for packed, second in ((pair, b), (single, None)):
      ids, mask, types = pack_reference(a, second, seq_length)
      assert packed["input_word_ids"][i].numpy().tolist() == ids, (len(a), len(b))
      assert packed["input_mask"][i].numpy().tolist() == mask
      assert packed["input_type_ids"][i].numpy().tolist() == types


def test_packer_config_and_errors():
  with pytest.raises(ValueError, match="at least 3"):
    BertInputPacker(seq_length=2, cls_id=1, sep_id=2)
  packer = BertInputPacker(seq_length=6, cls_id=1, sep_id=2, pad_id=9)
  with pytest.raises(ValueError, match="one or two segments, got 3"):
    packer([tf.ragged.constant([[3]])] * 3)
  clone = BertInputPacker.from_config(packer.get_config())
  assert (clone.seq_length, clone.cls_id, clone.sep_id, clone.pad_id) == (6, 1, 2, 9)


def test_layers_under_mixed_precision(small_vocab_file):
  text = tf.constant(["Hello world!"])
  expected = BertInputPacker(6, 2, 3)(BertTokenizerLayer(small_vocab_file)(text))
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_float16")
  try:
    tokenizer = BertTokenizerLayer(small_vocab_file)
    packed = BertInputPacker(6, tokenizer.cls_id, tokenizer.sep_id)(tokenizer(text))
  finally:
    keras.config.set_dtype_policy(previous)
  for name, value in expected.items():
    assert packed[name].dtype == tf.int32
    np.testing.assert_array_equal(packed[name], value)
