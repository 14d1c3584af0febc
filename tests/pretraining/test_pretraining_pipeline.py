"""End-to-end tests of pre-training data creation: text -> TFRecords with the original features."""

import functools
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert import tokenization
from official_bert.pretraining import corpus as corpus_module
from official_bert.pretraining import pipeline
from official_bert.pretraining.corpus import read_shards
from official_bert.pretraining.instances import FEATURE_NAMES, InstanceOptions, Instances
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import feature_spec
from official_bert.pretraining.workers import ShardRunner
from official_bert.pretraining.writer import serialize_instances

from testing import (
  REPOSITORY,
  assert_no_scheme_folders,
  file_uri,
  run_python,
  shared_data,
  write_corpus,
  write_vocab,
)

ORIGINAL_DTYPES = {"input_ids": "int64_list", "input_mask": "int64_list",
                   "segment_ids": "int64_list", "masked_lm_positions": "int64_list",
                   "masked_lm_ids": "int64_list", "masked_lm_weights": "float_list",
                   "next_sentence_labels": "int64_list"}


def run(tmp_path, inputs, vocab, name="out.tfrecord", **kwargs):
  kwargs.setdefault("options", InstanceOptions(max_seq_length=64, dupe_factor=2))
  kwargs.setdefault("num_workers", 1)
  output = str(tmp_path / name)
  stats = create_pretraining_data(inputs, output, vocab, **kwargs)
  return output, stats


def read_records(path, compression=""):
  return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  folder = tmp_path_factory.mktemp("corpus")
  return write_corpus(folder / "a.txt"), write_vocab(folder / "vocab.txt")


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
  return run(tmp_path_factory.mktemp("out"), *corpus)


def test_output_parses_with_the_original_feature_spec(written):
  path, stats = written
  records = read_records(path)
  assert len(records) == stats.instances > 100
  spec = feature_spec(64, 20)
  for record in records[:50]:
    features = tf.train.Example.FromString(record).features.feature
    assert {k: features[k].WhichOneof("kind") for k in features} == ORIGINAL_DTYPES
    parsed = tf.io.parse_single_example(record, spec)
    assert parsed["input_ids"].shape == [64] and parsed["masked_lm_weights"].dtype == tf.float32
    assert int(parsed["next_sentence_labels"][0]) in (0, 1)


def test_serialized_protos_equal_examples_built_one_by_one():
  rng = np.random.default_rng(0)
  instances = Instances(
      input_ids=rng.integers(0, 30000, (5, 8)), input_mask=np.ones((5, 8), np.int32),
      segment_ids=rng.integers(0, 2, (5, 8)), masked_lm_positions=rng.integers(0, 8, (5, 3)),
      masked_lm_ids=rng.integers(0, 30000, (5, 3)), masked_lm_weights=rng.random((5, 3)),
      next_sentence_labels=np.array([0, 1, 1, 0, 1]))
  records = serialize_instances(instances)
  for row, record in enumerate(records):
    expected = tf.train.Example()
    for name in FEATURE_NAMES:
      values = np.asarray(getattr(instances, name)[row]).reshape(-1).tolist()
      feature = expected.features.feature[name]
      if name == "masked_lm_weights":
        feature.float_list.value.extend(values)
      else:
        feature.int64_list.value.extend(values)
    assert tf.train.Example.FromString(record) == expected


def test_records_hold_the_tokenized_text(corpus, written):
  text_file, vocab_file = corpus
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  lines = [line for line in open(text_file).read().split("\n") if line.strip()]
  flat = "," + ",".join(
      ",".join(map(str, tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))))
      for line in lines) + ","
  spec = feature_spec(64, 20)
  for record in read_records(written[0])[:40]:
    ex = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
    ids = ex["input_ids"].copy()
    real = ex["masked_lm_weights"] > 0
    ids[ex["masked_lm_positions"][real]] = ex["masked_lm_ids"][real]
    length = ex["input_mask"].sum()
    seps = np.flatnonzero(ids[:length] == 3)
    assert ids[0] == 2 and len(seps) == 2 and seps[1] == length - 1
    for part in (ids[1:seps[0]], ids[seps[0] + 1:seps[1]]):
      assert "," + ",".join(map(str, part)) + "," in flat


def test_statistics_of_the_generated_data(written):
  _, stats = written
  assert 0.14 < stats.mask_rate < 0.17
  # Above one half: short documents end in single-sentence chunks, which always take a random next.
  assert 0.45 < stats.random_next_rate < 0.7
  assert 0.05 < stats.random_token_predictions / stats.predictions < 0.15
  assert 0.05 < stats.kept_predictions / stats.predictions < 0.15
  assert stats.documents == 40 and stats.blank_lines == 39 and stats.undecodable_lines == 0


def test_same_seed_same_bytes_other_seed_other_bytes(corpus, written, tmp_path):
  again, _ = run(tmp_path, *corpus, name="again.tfrecord")
  other, _ = run(tmp_path, *corpus, name="other.tfrecord", random_seed=1)
  assert pathlib.Path(again).read_bytes() == pathlib.Path(written[0]).read_bytes()
  assert pathlib.Path(other).read_bytes() != pathlib.Path(written[0]).read_bytes()


def test_instances_are_spread_round_robin(corpus, written, tmp_path):
  outputs = f"{tmp_path / 'x.tfrecord'},{tmp_path / 'y.tfrecord'}"
  create_pretraining_data(
      corpus[0], outputs, corpus[1], num_workers=1, shard_bytes=2000,
      options=InstanceOptions(max_seq_length=64, dupe_factor=2))
  single, _ = run(tmp_path, *corpus, name="single.tfrecord", shard_bytes=2000)
  x, y = read_records(tmp_path / "x.tfrecord"), read_records(tmp_path / "y.tfrecord")
  everything = read_records(single)
  assert x == everything[0::2] and y == everything[1::2]


def test_gzip_output_is_read_back(corpus, written, tmp_path):
  path, _ = run(tmp_path, *corpus, name="out.tfrecord.gz", gzip=True)
  assert pathlib.Path(path).read_bytes()[:2] == b"\x1f\x8b"
  assert read_records(path, "GZIP") == read_records(written[0])


def test_shards_end_at_document_boundaries_and_cut_long_documents(tmp_path):
  lines = [f"sentence {i} of the long document" for i in range(300)]
  path = tmp_path / "long.txt"
  path.write_text("first doc\n\n" + "\n".join(lines) + "\n\nlast doc\n")
  shards = list(read_shards([str(path)], 1000))
  pieces = [p for s in shards for p in s.pieces]
  assert b"".join(p.data for p in pieces) == path.read_bytes()
  assert pieces[0].data.startswith(b"first doc\n\n")
  assert sum(not p.ends_document for p in pieces) >= 3
  assert all(len(p.data) <= 2000 + 50 for p in pieces)
  numbers = [p.first_line for p in pieces]
  assert numbers[0] == 1 and numbers == sorted(numbers)
  assert pieces[1].first_line == 1 + pieces[0].data.count(b"\n")


def test_bytes_that_are_not_utf8_are_dropped_counted_and_located(tmp_path, corpus):
  path = tmp_path / "bad.txt"
  good = pathlib.Path(corpus[0]).read_bytes()
  path.write_bytes(b"the cat sat .\n\xff\xfe broken\n" + good)
  _, stats = run(tmp_path, str(path), corpus[1])
  # As the original's convert_to_unicode: the two bytes go, " broken" stays a sentence.
  assert stats.undecodable_lines == 1 and stats.undecodable_bytes == 2
  assert stats.undecodable == [f"{path}:2: dropped 2 byte(s) that are not UTF-8"]
  assert "Dropped 2 bytes that are not UTF-8 from 1 lines" in stats.summary()[2]
  assert stats.lines == good.count(b"\n") + 2 and stats.instances > 100


def test_a_line_keeps_its_utf8_text_around_dropped_bytes():
  piece = corpus_module.TextPiece("in.txt", 7, b"ok .\nbro\xffken \xc3\xa9t\xc3\n\nnext\n")
  text = corpus_module.decode_shard(corpus_module.Shard(0, (piece,)))
  assert text.sentences == ["ok .", "broken \u00e9t", "next"]
  assert (text.num_undecodable_lines, text.num_undecodable_bytes) == (1, 2)
  assert text.undecodable == ["in.txt:8: dropped 2 byte(s) that are not UTF-8"]


def test_missing_input_is_a_clear_error(tmp_path, corpus):
  with pytest.raises(FileNotFoundError, match="nothing_here"):
    run(tmp_path, f"{corpus[0]},{tmp_path}/nothing_here*.txt", corpus[1])
  assert not os.listdir(tmp_path)


def test_empty_input_is_a_clear_error_and_leaves_no_file(tmp_path, corpus):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n   \n\n")
  out = tmp_path / "out"
  with pytest.raises(ValueError, match="holds no text"):
    run(out, str(empty), corpus[1])
  assert not os.listdir(out)


def test_vocab_without_special_tokens_is_a_clear_error(tmp_path, corpus):
  vocab = write_vocab(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "cat", "dog"])
  with pytest.raises(ValueError, match=r"lacks the special tokens \['\[SEP\]', '\[MASK\]'\]"):
    run(tmp_path, corpus[0], vocab)
  with pytest.raises(FileNotFoundError, match="no_vocab.txt"):
    run(tmp_path, corpus[0], str(tmp_path / "no_vocab.txt"))


def test_real_text_sample(tmp_path):
  sample = shared_data("corpus/sample_text.txt")
  vocab = shared_data("vocab/bert-base-uncased-vocab.txt")
  path, stats = run(tmp_path, str(sample), str(vocab), options=InstanceOptions(dupe_factor=5))
  tokenizer = tokenization.FullTokenizer(str(vocab))
  lines = [line for line in sample.read_text(encoding="utf-8").split("\n") if line.strip()]
  flat = "," + ",".join(
      ",".join(map(str, tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))))
      for line in lines) + ","
  spec = feature_spec(128, 20)
  for record in read_records(path)[:30]:
    ex = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
    ids = ex["input_ids"].copy()
    real = ex["masked_lm_weights"] > 0
    ids[ex["masked_lm_positions"][real]] = ex["masked_lm_ids"][real]
    seps = np.flatnonzero(ids == tokenizer.vocab["[SEP]"])
    for part in (ids[1:seps[0]], ids[seps[0] + 1:seps[1]]):
      assert "," + ",".join(map(str, part)) + "," in flat
  assert 0.13 < stats.mask_rate < 0.17 and stats.documents == 3


def test_real_book_statistics(tmp_path):
  book = shared_data("corpus/gutenberg/carroll-alice.txt")
  vocab = shared_data("vocab/bert-base-uncased-vocab.txt")
  _, stats = run(tmp_path, str(book), str(vocab), shard_bytes=50_000,
                 options=InstanceOptions(dupe_factor=2))
  assert 0.145 < stats.mask_rate < 0.16
  assert 0.45 < stats.random_next_rate < 0.56
  assert abs(stats.random_token_predictions / stats.predictions - 0.1) < 0.01
  assert stats.cut_documents >= 1  # a book without blank lines is one long document


# The shard size that `--shard_size_mb=0.003` gives.
SMALL_SHARD_BYTES = int(0.003 * 2**20)


@pytest.fixture(scope="module")
def small_shards(corpus, tmp_path_factory):
  """The corpus in shards of `SMALL_SHARD_BYTES`, by this process alone, with seed 3; shared by
  the two tests below, which compare other processes' output with it."""
  return run(tmp_path_factory.mktemp("small_shards"), *corpus, random_seed=3,
             shard_bytes=SMALL_SHARD_BYTES)


@pytest.mark.slow
def test_a_worker_process_writes_the_same_bytes(corpus, small_shards, tmp_path, monkeypatch):
  """Both rounds (tokenizing, building) in a worker process, against this process alone."""
  monkeypatch.setattr(pipeline.workers, "ShardRunner",
                      functools.partial(ShardRunner, work_here=False))
  two, stats = run(tmp_path, *corpus, name="two.tfrecord", shard_bytes=SMALL_SHARD_BYTES,
                   random_seed=3, num_workers=2)
  assert pathlib.Path(small_shards[0]).read_bytes() == pathlib.Path(two).read_bytes()
  assert stats.instances > 100 and len(list(read_shards([corpus[0]], SMALL_SHARD_BYTES))) > 3


def test_script_with_two_workers_matches_one_worker_in_process(corpus, small_shards, tmp_path):
  # Every path a file:// URL (the workers read the vocabulary too), as gs:// ones would be given.
  output = tmp_path / "script.tfrecord"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  result = run_python([sys.executable, str(REPOSITORY / "create_pretraining_data.py"),
                       f"--input_file={file_uri(corpus[0])}", f"--output_file={file_uri(output)}",
                       f"--vocab_file={file_uri(corpus[1])}", "--max_seq_length=64",
                       "--dupe_factor=2", "--num_workers=2", "--shard_size_mb=0.003",
                       "--random_seed=3"],
                      env=env, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "instances" in result.stderr and "% [MASK]" in result.stderr
  assert output.read_bytes() == pathlib.Path(small_shards[0]).read_bytes()
  assert not [f for f in os.listdir(tmp_path) if "incomplete" in f or f.startswith(".")]
  assert_no_scheme_folders(tmp_path)
