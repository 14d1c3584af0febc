"""Tests of `official_bert.tokenization.vocab_builder` and the `build_vocab.py` script."""

import os
import random
import sys

import pytest

from official_bert import tokenization
from official_bert.preprocessing import BertTokenizerLayer
from official_bert.tokenization import vocab_builder

from testing import REPOSITORY, assert_no_scheme_folders, file_uri, run_python

STEMS = ["play", "walk", "talk", "jump", "paint", "read", "cook", "clean", "open", "work", "help",
         "call", "listen", "watch", "learn", "teach", "build", "Über", "Café", "naïve"]
SUFFIXES = ["", "s", "ed", "ing", "er", "ers", "able"]
PREFIXES = ["", "", "", "re", "un", "over"]


def write_corpus(path, num_lines=400, seed=0):
  """Sentences of inflected words, punctuation and a few CJK characters."""
  rng = random.Random(seed)
  lines = []
  for _ in range(num_lines):
    words = [rng.choice(PREFIXES) + rng.choice(STEMS) + rng.choice(SUFFIXES)
             for _ in range(rng.randrange(4, 12))]
    lines.append(" ".join(words) + rng.choice([".", "!", "?", ", 中文."]))
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return lines


def test_build_vocab_writes_reserved_tokens_first_and_fits_its_corpus(tmp_path):
  lines = write_corpus(tmp_path / "a.txt") + write_corpus(tmp_path / "b.txt", seed=1)
  output = tmp_path / "out" / "vocab.txt"
  stats = vocab_builder.build_vocab([str(tmp_path / "*.txt")], str(output), vocab_size=120)
  tokens = output.read_text(encoding="utf-8").splitlines()
  assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert len(tokens) == stats.vocab_size <= 120 and len(set(tokens)) == len(tokens)
  assert any(t.startswith("##") and len(t) > 3 for t in tokens), "no multi-character suffixes"
  assert stats.files == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
  assert stats.num_lines == len(lines) == 800
  assert stats.unk_rate < 0.01
  assert os.listdir(output.parent) == ["vocab.txt"]  # no temporary file left behind

  # The counts agree with tokenizing every line with FullTokenizer and the new vocabulary.
  tokenizer = tokenization.FullTokenizer(str(output), do_lower_case=True)
  all_tokens = [t for line in lines for t in tokenizer.tokenize(line)]
  assert stats.num_tokens == len(all_tokens)
  assert stats.num_unk == all_tokens.count("[UNK]")
  # Uncased: no capitals, no accents.
  assert all(t == t.lower() and not set(t) & set("üéïÜÉ") for t in tokens[5:])
  # The in-graph tokenizer accepts the vocabulary and agrees.
  layer = BertTokenizerLayer(str(output), do_lower_case=True)
  assert [ids.tolist() for ids in layer.tokenize_numpy(lines[:50])] == [
      tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines[:50]]


def test_build_vocab_cased_keeps_case_and_limits_lines(tmp_path):
  write_corpus(tmp_path / "a.txt")
  output = tmp_path / "vocab.txt"
  output.write_text("old\n")
  stats = vocab_builder.build_vocab([str(tmp_path / "a.txt")], str(output), vocab_size=200,
                                    do_lower_case=False, max_input_lines=50)
  assert stats.num_lines == 50
  tokens = output.read_text(encoding="utf-8").splitlines()
  assert "old" not in tokens and len(tokens) == stats.vocab_size
  assert any(t[:1].isupper() for t in tokens) and "Ü" in tokens


def test_vocab_size_too_small_and_empty_input(tmp_path):
  write_corpus(tmp_path / "a.txt")
  with pytest.raises(ValueError, match="vocab_size=10 is too small"):
    vocab_builder.build_vocab([str(tmp_path / "a.txt")], str(tmp_path / "v.txt"), vocab_size=10)
  (tmp_path / "empty.txt").write_text("\n  \n")
  with pytest.raises(ValueError, match="no words"):
    vocab_builder.build_vocab([str(tmp_path / "empty.txt")], str(tmp_path / "v.txt"))
  assert not (tmp_path / "v.txt").exists()


def test_missing_input_and_bad_utf8_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="nothing_here_\\*.txt"):
    vocab_builder.build_vocab([str(tmp_path / "nothing_here_*.txt")], str(tmp_path / "v.txt"))
  (tmp_path / "bad.txt").write_bytes(b"fine line\nbroken \xff line\n")
  with pytest.raises(ValueError, match=r"bad.txt, line 2: not valid UTF-8"):
    vocab_builder.build_vocab([str(tmp_path / "bad.txt")], str(tmp_path / "v.txt"))


def run_script(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return run_python([sys.executable, str(REPOSITORY / "build_vocab.py"), *args],
                    cwd=REPOSITORY, env=env, timeout=300)


def test_build_vocab_script_end_to_end(tmp_path):
  # Every path a file:// URL, as a gs:// one would be given.
  write_corpus(tmp_path / "part1.txt")
  write_corpus(tmp_path / "part2.txt", seed=3)
  output = tmp_path / "vocab.txt"
  result = run_script(f"--input_file={file_uri(tmp_path / 'part1.txt')},"
                      f"{file_uri(tmp_path)}/part2*.txt", f"--output_file={file_uri(output)}",
                      "--vocab_size=150", "--do_lower_case=true")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "800 lines of 2 files" in result.stdout
  assert "[UNK] rate 0.0" in result.stdout
  assert output.read_text(encoding="utf-8").splitlines()[:5] == [
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  # Its refusal of a missing input runs with the other tools' in tests/faults/test_faults_paths.
  assert_no_scheme_folders(tmp_path)
