"""Random next sentences come from the whole corpus: the pool, and its effect on the data."""

import importlib.util
import pathlib
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining import instances as pi
from official_bert.pretraining import next_sentences
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import feature_spec

from testing import REPOSITORY, SPECIAL_TOKENS, shared_data

# Each book, and the short documents, use words of their own: a token tells its source.
SOURCES = ["alpha", "bravo", "charlie", "short"]
WORDS = {source: [f"{source}{i}" for i in range(12)] for source in SOURCES}


def load_benchmark():
  """`benchmarks/nsp_fidelity.py`, which holds the reference (the original's algorithm).

  Its folder goes on `sys.path`, as when it runs as a script: it imports `results` from there.
  """
  folder = str(REPOSITORY / "benchmarks")
  if folder not in sys.path:
    sys.path.append(folder)
  spec = importlib.util.spec_from_file_location("nsp_fidelity",
                                                REPOSITORY / "benchmarks/nsp_fidelity.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def write_books(folder, book_lines=400, num_short=300, seed=0):
  """Three long books (one a file, no blank lines) and a file of short documents.

  Returns the files, the vocabulary file and the byte size of the smallest book.
  """
  rng = np.random.default_rng(seed)
  def line(source):
    return " ".join(rng.choice(WORDS[source], rng.integers(4, 14)))
  files = []
  for source in SOURCES[:3]:
    path = folder / f"{source}.txt"
    path.write_text("\n".join(line(source) for _ in range(book_lines)) + "\n")
    files.append(str(path))
  path = folder / "short.txt"
  path.write_text("\n\n".join("\n".join(line("short") for _ in range(rng.integers(1, 4)))
                              for _ in range(num_short)) + "\n")
  files.append(str(path))
  vocab = folder / "vocab.txt"
  vocab.write_text("\n".join(SPECIAL_TOKENS + [w for s in SOURCES for w in WORDS[s]]) + "\n")
  return files, str(vocab), min(pathlib.Path(f).stat().st_size for f in files[:3])


@pytest.fixture(scope="module")
def books(tmp_path_factory):
  return write_books(tmp_path_factory.mktemp("books"))


def source_of(token_ids):
  """The sources (book or short documents) of WordPiece ids of the generated vocabulary."""
  return {SOURCES[(i - len(SPECIAL_TOKENS)) // 12] for i in token_ids.tolist()}


def restored_pairs(path, max_seq_length):
  """`(A ids, B ids, next_sentence_label)` of each record, with the masked ids put back."""
  spec = feature_spec(max_seq_length, 20)
  # Parsed a batch at a time: one record at a time, the eager calls would cost seconds.
  for batch in tf.data.TFRecordDataset(path).batch(512):
    parsed = {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
    for i in range(len(parsed["input_ids"])):
      ids = parsed["input_ids"][i].copy()
      real = parsed["masked_lm_weights"][i] > 0
      ids[parsed["masked_lm_positions"][i][real]] = parsed["masked_lm_ids"][i][real]
      seps = np.flatnonzero(ids[:parsed["input_mask"][i].sum()] == 3)
      yield ids[1:seps[0]], ids[seps[0] + 1:seps[1]], int(parsed["next_sentence_labels"][i][0])


def test_a_book_alone_in_its_shard_draws_random_next_from_other_documents(books, tmp_path):
  files, vocab, smallest = books
  output = str(tmp_path / "out.tfrecord")
  # Every book is a shard of its own: at least `shard_bytes`, at most twice (so it is not cut).
  stats = create_pretraining_data(files, output, vocab, num_workers=1, shard_bytes=smallest,
                                  options=InstanceOptions(max_seq_length=64, dupe_factor=2))
  assert stats.documents == 303 and stats.cut_documents == 0
  random_from_books = 0
  for a, b, label in restored_pairs(output, 64):
    (a_source,) = source_of(a)
    (b_source,) = source_of(b)
    if label:
      # A short document is a document of its own: B may come from another short document.
      assert b_source != a_source or a_source == "short"
      random_from_books += a_source != "short"
    else:
      assert b_source == a_source
  assert random_from_books > 100
  assert stats.random_next_same_document == 0


def test_statistics_match_the_original_algorithm_on_books(books, tmp_path):
  files, vocab, smallest = books
  fidelity = load_benchmark()
  # No short target lengths: with three books, whether a book draws one would decide the counts.
  options = InstanceOptions(max_seq_length=64, dupe_factor=3, short_seq_prob=0.0)
  tool, _ = fidelity.tool_statistics(files, vocab, options, 5, 1, smallest)
  documents = fidelity.tokenized_documents(files, vocab, smallest)
  reference = fidelity.reference_statistics(documents, 64, 0.0, 3, 5)
  _, gaps = fidelity.table(tool, reference)
  assert all(abs(gap) < 0.03 for gap in gaps.values()), gaps
  # Random next sentences mostly come from the 300 short documents, as in the original: shorter
  # pairs than B taken from the same book (about the whole target length) would give.
  assert tool["tokens"] / tool["instances"] < 0.85 * (64 - 3 + 3)


def test_real_books_and_wikitext_match_the_original_algorithm(tmp_path):
  wiki = shared_data("corpus/wikitext-2/valid.txt")
  books = [shared_data(f"corpus/gutenberg/{name}.txt")
           for name in ("carroll-alice", "shakespeare-macbeth")]
  vocab = str(shared_data("vocab/bert-base-uncased-vocab.txt"))
  # A slice of WikiText: its first 300 KB, cut at a line.
  data = wiki.read_bytes()[:300_000]
  sliced = tmp_path / "wiki.txt"
  sliced.write_bytes(data[:data.rfind(b"\n") + 1])
  files = [str(p) for p in books] + [str(sliced)]
  fidelity = load_benchmark()
  options = InstanceOptions(max_seq_length=128, dupe_factor=2, short_seq_prob=0.0)
  # 110 KB shards: each book is alone in its shard.
  tool, _ = fidelity.tool_statistics(files, vocab, options, 3, 1, 110_000)
  documents = fidelity.tokenized_documents(files, vocab, 110_000)
  reference = fidelity.reference_statistics(documents, 128, 0.0, 2, 3)
  _, gaps = fidelity.table(tool, reference)
  assert all(abs(gap) < 0.03 for gap in gaps.values()), gaps
  assert tool["random_next_same_document"] == 0 and tool["random_next"] > 1000


def make_documents(sentence_counts, length=5):
  """Documents of `length`-token sentences; the ids are the token positions."""
  lengths = np.full(sum(sentence_counts), length)
  splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
  return pi.Documents(np.arange(splits[-1], dtype=np.int32), splits,
                      np.concatenate([[0], np.cumsum(sentence_counts)]).astype(np.int64))


def test_pool_draws_documents_uniformly_and_cuts_segments_like_the_original(tmp_path):
  # Shard 0: one document of 1,000 sentences; shard 1: 99 documents of 2 sentences.
  shards = [make_documents([1000]), make_documents([2] * 99)]
  for index, documents in enumerate(shards):
    next_sentences.save_documents(next_sentences.documents_path(str(tmp_path), index), documents)
  pool = next_sentences.build_pool(str(tmp_path), [1, 99], 20_000, 13, random_seed=1)
  assert len(pool) == 20_000
  # One document in a hundred, however long it is.
  big = pool.document_ids == 0
  assert 0.007 < big.mean() < 0.013
  sentences = np.diff(pool.segment_splits)
  # 12 tokens (max_num_tokens - 1) need three 5-token sentences, unless the document ends first.
  assert set(sentences[big].tolist()) <= {1, 2, 3} and (sentences[big] == 3).mean() > 0.99
  assert set(sentences[~big].tolist()) == {1, 2}
  # The first sentence is uniform in its document: in the short documents, half start at the end.
  assert 0.47 < (sentences[~big] == 1).mean() < 0.53
  starts = pool.token_ids[pool.sentence_splits[pool.segment_splits[:-1][big]]]
  assert starts.min() < 500 < starts.max()
  same = next_sentences.build_pool(str(tmp_path), [1, 99], 20_000, 13, random_seed=1)
  np.testing.assert_array_equal(same.token_ids, pool.token_ids)


def test_instances_take_random_next_from_the_pool_never_from_their_document():
  documents = make_documents([200, 200])
  pool_documents = make_documents([3] * 50)
  pool = next_sentences.SegmentPool(
      token_ids=pool_documents.token_ids + 10_000, sentence_splits=pool_documents.sentence_splits,
      segment_splits=pool_documents.document_splits, document_ids=np.arange(50) % 3 + 7)
  source = pi._Source.of(documents, pool, first_document=7)
  a_lo, _, b_lo, b_hi, labels, same = pi._pair_spans(
      source, InstanceOptions(max_seq_length=32), random.Random(0))
  random_next = labels == 1
  assert random_next.sum() > 20 and not same.any()
  b_first = source.token_ids[b_lo[random_next]]
  assert (b_first >= 10_000).all()
  # The pool's document of each B is not A's document (7 for the first 1,000 tokens, 8 after).
  a_document = 7 + (a_lo[random_next] >= 1000)
  b_document = ((b_first - 10_000) // 15) % 3 + 7
  assert (a_document != b_document).all()
  # B starts at a segment's start and ends inside it.
  assert ((b_first - 10_000) % 15 == 0).all()
  assert (b_hi[random_next] - b_lo[random_next] <= 15).all()


def test_a_corpus_of_one_document_takes_random_next_from_itself_and_counts_it(tmp_path):
  book = tmp_path / "book.txt"
  book.write_text("\n".join(" ".join(WORDS["alpha"][i % 12] for i in range(j, j + 8))
                            for j in range(200)) + "\n")
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(SPECIAL_TOKENS + WORDS["alpha"]) + "\n")
  stats = create_pretraining_data(str(book), str(tmp_path / "out.tfrecord"), str(vocab),
                                  num_workers=1,
                                  options=InstanceOptions(max_seq_length=32, dupe_factor=1))
  assert stats.random_next > 0 and stats.random_next_same_document == stats.random_next
