"""Tests of `official_bert.tokenization`: the original BERT rules, one by one."""

import json
import random
import unicodedata

import pytest

from official_bert import tokenization

from testing import shared_data, write_vocab

TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "un", "##aff", "##able", "want", "##want", "##ed", "runn", "##ing", ",", "!", "?", ".",
    "hello", "world", "the", "a", "##b", "中", "文", "x", "##x", "é", "##é",
]




@pytest.fixture
def tiny_vocab_file(tmp_path):
  return write_vocab(tmp_path / "vocab.txt", TINY_VOCAB)


def basic(text, do_lower_case=True):
  return tokenization.BasicTokenizer(do_lower_case=do_lower_case).tokenize(text)


def test_convert_to_unicode_drops_bytes_that_are_not_utf8_as_the_original(caplog):
  assert tokenization.convert_to_unicode("héllo") == "héllo"
  assert tokenization.convert_to_unicode("héllo".encode()) == "héllo"
  # The original's decode("utf-8", "ignore"): the stray bytes go, the rest stays; here counted.
  assert tokenization.convert_to_unicode(b"ab\xff\xfecd \xc3\xa9\xc3") == "abcd é"
  assert "Dropped 3 byte(s) that are not UTF-8" in caplog.text
  # The tokenizers take bytes the same way.
  assert tokenization.BasicTokenizer().tokenize(b"caf\xc3\xa9\xff ok") == ["cafe", "ok"]
  with pytest.raises(ValueError, match="Expected str or bytes"):
    tokenization.convert_to_unicode(42)


def test_load_vocab_keeps_line_order_and_rejects_duplicates(tmp_path, tiny_vocab_file):
  vocab = tokenization.load_vocab(tiny_vocab_file)
  assert list(vocab) == TINY_VOCAB
  assert vocab["[UNK]"] == 1 and vocab["##é"] == len(TINY_VOCAB) - 1
  duplicated = write_vocab(tmp_path / "dup.txt", ["[UNK]", "a", "b", "a"])
  with pytest.raises(ValueError, match=r"dup.txt, line 4: token 'a' repeats line 2"):
    tokenization.load_vocab(duplicated)


def test_clean_text_drops_nul_replacement_and_control_chars():
  # NUL, U+FFFD, a C0 control, a soft hyphen (Cf) and a zero-width space (Cf) are deleted, so
  # the words around them join; they do not split words as a space would.
  assert basic("ab\x00cd \ufffdef gh\x07ij co\u00adop ze\u200bro") == [
      "abcd", "ef", "ghij", "coop", "zero"]


def test_whitespace_characters_separate_words():
  # Tab, newline, return, no-break space and the ideographic space (Zs), line separator.
  assert basic("a\tb\nc\r\nd\u00a0e\u3000f\u2028g   h") == list("abcdefgh")


def test_cjk_ideographs_become_single_words():
  assert basic("中文abc字") == ["中", "文", "abc", "字"]
  # Extension B ideograph, and a compatibility ideograph (which NFD maps to U+8C48 when uncased).
  assert basic("x\U00020000y\uf900z", do_lower_case=False) == [
      "x", "\U00020000", "y", "\uf900", "z"]
  assert basic("x\uf900z") == ["x", "\u8c48", "z"]
  # Hiragana, Katakana and Hangul are not in the original's CJK ranges: they stay words.
  assert basic("ひらがなカタカナ", do_lower_case=False) == ["ひらがなカタカナ"]
  assert basic("한국어", do_lower_case=False) == ["한국어"]


def test_lower_case_strips_accents_and_cased_keeps_them():
  assert basic("Héllo WÖRLD Ångström") == ["hello", "world", "angstrom"]
  assert basic("Héllo WÖRLD Ångström", do_lower_case=False) == ["Héllo", "WÖRLD", "Ångström"]
  # "İ" lower-cases to "i" plus a combining dot, which the accent stripping removes.
  assert basic("İstanbul") == ["istanbul"]
  # Compatibility characters are not folded (the original uses NFD, not NFKD).
  assert basic("ﬁ … ²") == ["ﬁ", "…", "²"]
  # Uncased output stays decomposed: Hangul syllables become jamo.
  assert basic("한") == ["\u1112\u1161\u11ab"]


def test_punctuation_splits_ascii_symbols_and_unicode_p_categories():
  assert basic("a$b^c`d+e|f~g") == ["a", "$", "b", "^", "c", "`", "d", "+", "e", "|", "f", "~", "g"]
  assert basic("«hi»—¿ok? l'été") == ["«", "hi", "»", "—", "¿", "ok", "?", "l", "'", "ete"]
  # Non-ASCII symbols (S*) are not punctuation: they stay inside words.
  assert basic("5€ a→b 😀x") == ["5€", "a→b", "😀x"]


@pytest.mark.parametrize("lower", [True, False])
def test_character_replacements_apply_the_basic_tokenizers_rules_one_character_at_a_time(lower):
  replacements = tokenization.character_replacements(lower)
  # Deleted, whitespace, accented, compatibility and case-folding characters, Hangul, a
  # letter whose lower case is two characters, CJK, and characters no step changes.
  text = ("Caf\u00e9 \u00b5Guru \ufb01ne co\u00adop a\u200db \x00\ufffd\x0b\t\u00a0\u3000"
          "\uff21bc \u2026 \u00df \u0130stanbul \ud55c\uad6d \u8c48\uf900 \u2028 \U0001F600 "
          "\u00c5ngstr\u00f6m NA\u00cfVE \u0391\u0392 \ue000")
  mapped = "".join(replacements.get(char, char) for char in text)
  # The rules of `BasicTokenizer.tokenize`, steps 1 and 4, on the whole text at once.
  cleaned = "".join(" " if char in "\t\u00a0\u3000" else char for char in text
                    if char not in "\x00\ufffd\x0b\u00ad\u200b\u200d")
  stripped = "".join(char for char in unicodedata.normalize("NFD", cleaned.lower())
                     if unicodedata.category(char) != "Mn")
  assert mapped == (stripped if lower else cleaned)
  assert replacements["\x00"] == "" and replacements["\u00ad"] == ""
  assert ("\u00b5" in replacements) is False  # the micro sign is its own lower case
  assert replacements.get("\u0130") == ("i" if lower else None)
  assert all(len(char) == 1 for char in replacements)


def test_wordpiece_greedy_longest_match_first(tiny_vocab_file):
  vocab = tokenization.load_vocab(tiny_vocab_file)
  wordpiece = tokenization.WordpieceTokenizer(vocab)
  assert wordpiece.tokenize("unaffable") == ["un", "##aff", "##able"]
  assert wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
  # One character that no piece covers spoils the whole word.
  assert wordpiece.tokenize("unwantedX") == ["[UNK]"]
  assert wordpiece.tokenize("") == []


def test_wordpiece_words_over_200_characters_are_unknown(tiny_vocab_file):
  wordpiece = tokenization.WordpieceTokenizer(tokenization.load_vocab(tiny_vocab_file))
  assert wordpiece.tokenize("x" * 200) == ["x"] + ["##x"] * 199
  assert wordpiece.tokenize("x" * 201) == ["[UNK]"]
  # The limit counts characters, not UTF-8 bytes.
  assert wordpiece.tokenize("é" * 150) == ["é"] + ["##é"] * 149
  short = tokenization.WordpieceTokenizer({"x": 0, "##x": 1}, max_input_chars_per_word=3)
  assert short.tokenize("xxx xxxx") == ["x", "##x", "##x", "[UNK]"]


def test_full_tokenizer_and_id_conversion(tiny_vocab_file):
  tokenizer = tokenization.FullTokenizer(tiny_vocab_file, do_lower_case=True)
  assert tokenizer.do_lower_case
  assert isinstance(tokenizer.basic_tokenizer, tokenization.BasicTokenizer)
  assert isinstance(tokenizer.wordpiece_tokenizer, tokenization.WordpieceTokenizer)
  tokens = tokenizer.tokenize("UNwant\u00e9d,running! Hello 中文?")
  assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing", "!", "hello", "中", "文", "?"]
  ids = tokenizer.convert_tokens_to_ids(tokens)
  assert ids == [5, 9, 10, 13, 11, 12, 14, 17, 22, 23, 15]
  assert tokenizer.convert_ids_to_tokens(ids) == tokens
  assert tokenizer.inv_vocab[1] == "[UNK]"
  cased = tokenization.FullTokenizer(tiny_vocab_file, do_lower_case=False)
  assert cased.tokenize("Hello hello") == ["[UNK]", "hello"]
  with pytest.raises(KeyError, match="'nope' is not in the vocabulary"):
    tokenizer.convert_tokens_to_ids(["nope"])
  with pytest.raises(KeyError, match="Id 999 is outside the vocabulary"):
    tokenizer.convert_ids_to_tokens([999])


def test_full_tokenizer_requires_unk(tmp_path):
  path = write_vocab(tmp_path / "no_unk.txt", ["[PAD]", "a", "b"])
  with pytest.raises(ValueError, match=r"no_unk.txt has no \[UNK\] line"):
    tokenization.FullTokenizer(path)


def test_model_tokenizer_rejects_a_vocabulary_larger_than_the_model(tiny_vocab_file):
  size = len(TINY_VOCAB)
  assert len(tokenization.model_tokenizer(tiny_vocab_file, True, size).vocab) == size
  with pytest.raises(ValueError, match=f"has {size} tokens but the model's vocab_size is 5"):
    tokenization.model_tokenizer(tiny_vocab_file, True, 5)


def test_real_uncased_vocab_known_ids():
  vocab_file = shared_data("vocab/bert-base-uncased-vocab.txt")
  tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  tokens = tokenizer.tokenize("Hello, how are you? Unaffable!")
  assert tokens == ["hello", ",", "how", "are", "you", "?", "una", "##ffa", "##ble", "!"]
  assert tokenizer.convert_tokens_to_ids(tokens[:6]) == [7592, 1010, 2129, 2024, 2017, 1029]
  assert len(tokenizer.vocab) == 30522


def test_truncate_seq_pair_pops_from_longer_and_ties_from_b():
  a, b = list("abcde"), list("vwxyz")
  tokenization.truncate_seq_pair(a, b, 5)
  assert (a, b) == (list("abc"), list("vw"))
  a, b = list("abcdefghij"), list("xy")
  tokenization.truncate_seq_pair(a, b, 6)
  assert (a, b) == (list("abcd"), list("xy"))
  rng = random.Random(0)
  for _ in range(200):
    len_a, len_b, max_length = rng.randrange(30), rng.randrange(30), rng.randrange(1, 40)
    a, b = list(range(len_a)), list(range(len_b))
    tokenization.truncate_seq_pair(a, b, max_length)
    assert len(a) + len(b) == min(len_a + len_b, max_length)
    assert a == list(range(len(a))) and b == list(range(len(b)))
    assert abs(len(a) - len(b)) <= 1 or len(a) == len_a or len(b) == len_b


@pytest.mark.parametrize("name, cased_ok, uncased_ok", [
    ("uncased_L-12_H-768_A-12", False, True),
    ("uncased_L-2_H-128_A-2", False, True),
    ("wwm_uncased_L-24_H-1024_A-16", False, True),
    ("chinese_L-12_H-768_A-12", False, True),
    ("cased_L-12_H-768_A-12", True, False),
    ("multi_cased_L-12_H-768_A-12", True, False),
    ("my_own_model", True, True),
])
def test_case_guard_by_model_name(name, cased_ok, uncased_ok):
  checkpoint = f"/nonexistent/{name}/bert_model.ckpt"
  for do_lower_case, ok in ((False, cased_ok), (True, uncased_ok)):
    if ok:
      tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
    else:
      with pytest.raises(ValueError, match=f"--do_lower_case={not do_lower_case}"):
        tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
  tokenization.validate_case_matches_checkpoint(False, None)
  tokenization.validate_case_matches_checkpoint(False, "")


@pytest.mark.parametrize("config_name",
                         ["bert_config.json", "tokenizer_config.json", "config.json"])
def test_case_guard_reads_config_files(tmp_path, config_name):
  model_dir = tmp_path / "some_model"
  model_dir.mkdir()
  (model_dir / config_name).write_text(json.dumps({"do_lower_case": False, "hidden_size": 4}))
  for checkpoint in (str(model_dir), str(model_dir / "bert_model.ckpt")):
    tokenization.validate_case_matches_checkpoint(False, checkpoint)
    with pytest.raises(ValueError, match=rf"{config_name} says it is a cased model"):
      tokenization.validate_case_matches_checkpoint(True, checkpoint)


def test_case_guard_config_file_overrides_the_name(tmp_path):
  # A folder named like Google's uncased model, whose tokenizer config says cased.
  model_dir = tmp_path / "uncased_L-12_H-768_A-12"
  model_dir.mkdir()
  (model_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  tokenization.validate_case_matches_checkpoint(False, str(model_dir / "bert_model.ckpt"))
  # Without a do_lower_case field, the name decides.
  (model_dir / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
  with pytest.raises(ValueError, match="uncased model"):
    tokenization.validate_case_matches_checkpoint(False, str(model_dir / "bert_model.ckpt"))


def test_case_guard_rejects_broken_config(tmp_path):
  (tmp_path / "bert_config.json").write_text("{not json")
  with pytest.raises(ValueError, match="bert_config.json is not valid JSON"):
    tokenization.validate_case_matches_checkpoint(True, str(tmp_path))
