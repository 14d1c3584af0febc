"""The Apache Beam path of pre-training data: the local path's records, in one random order."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining import shuffle
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import feature_spec

from testing import REPOSITORY, SPECIAL_TOKENS, run_python, write_vocab

# Each book, and the short documents, use words of their own: a token tells its source.
SOURCES = ["alpha", "bravo", "short"]
WORDS = {source: [f"{source}{i}" for i in range(10)] for source in SOURCES}
OPTIONS = InstanceOptions(max_seq_length=48, dupe_factor=2)
# One worker thread in this process: Beam's FnApiRunner, quick to start.
IN_PROCESS = ["--runner=DirectRunner", "--direct_running_mode=multi_threading",
              "--direct_num_workers=1"]


def beam_pipeline():
  pytest.importorskip("apache_beam", reason='needs the Beam extra: pip install -e ".[beam]"')
  from official_bert.pretraining import beam_pipeline as module
  return module


@pytest.fixture(scope="module")
def books(tmp_path_factory):
  """Two books (one document each, no blank lines) and a file of short documents.

  Returns the files, the vocabulary and the shard size that makes each book a shard of its own.
  """
  folder = tmp_path_factory.mktemp("books")
  rng = np.random.default_rng(0)
  def line(source):
    return " ".join(rng.choice(WORDS[source], rng.integers(4, 12)))
  files = []
  for source in SOURCES[:2]:
    path = folder / f"{source}.txt"
    path.write_text("\n".join(line(source) for _ in range(60)) + "\n")
    files.append(str(path))
  path = folder / "short.txt"
  path.write_text("\n\n".join("\n".join(line("short") for _ in range(rng.integers(1, 4)))
                              for _ in range(80)) + "\n")
  files.append(str(path))
  vocab = folder / "vocab.txt"
  write_vocab(vocab, SPECIAL_TOKENS + [w for s in SOURCES for w in WORDS[s]])
  return files, str(vocab), min(os.path.getsize(f) for f in files[:2])


def records_of(pattern, compression=""):
  """The records of all files matching `pattern`, sorted: their set, whatever their order."""
  files = sorted(tf.io.gfile.glob(pattern))
  return sorted(r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=compression))


def run_both(books, tmp_path, beam_args, gzip=False, **kwargs):
  """Runs the local path and the Beam path on the books; returns their records and stats."""
  files, vocab, shard_bytes = books
  local = str(tmp_path / "local.tfrecord")
  local_stats = create_pretraining_data(files, local, vocab, options=OPTIONS, num_workers=1,
                                        shard_bytes=shard_bytes, gzip=gzip)
  beam_stats = beam_pipeline().create_pretraining_data_beam(
      files, str(tmp_path / "beam" / "train.tfrecord"), vocab, beam_args, options=OPTIONS,
      shard_bytes=shard_bytes, gzip=gzip, **kwargs)
  compression = "GZIP" if gzip else ""
  return (records_of(local, compression), local_stats,
          records_of(str(tmp_path / "beam" / "train.tfrecord-*-of-*"), compression), beam_stats)


def source_of(token_ids):
  return {SOURCES[(i - len(SPECIAL_TOKENS)) // 10] for i in token_ids.tolist()}


def segments_of(records):
  """For each record: the token ids of sentences A and B, masks undone, and whether B is random."""
  if not records:
    return []
  spec = feature_spec(OPTIONS.max_seq_length, OPTIONS.max_predictions_per_seq)
  # Parsed in one batch: one record at a time, the eager calls would cost seconds.
  parsed = {k: v.numpy() for k, v in tf.io.parse_example(tf.constant(records), spec).items()}
  return [_segments({k: v[i] for k, v in parsed.items()}) for i in range(len(records))]


def _segments(example):
  ids = example["input_ids"].copy()
  real = example["masked_lm_weights"] > 0
  ids[example["masked_lm_positions"][real]] = example["masked_lm_ids"][real]
  first_sep, second_sep = np.flatnonzero(ids[:example["input_mask"].sum()] == 3)
  return ids[1:first_sep], ids[first_sep + 1:second_sep], bool(example["next_sentence_labels"][0])


@pytest.fixture(scope="module")
def books_in_process(books, tmp_path_factory):
  """The books by the local path and by Beam in this process, to 3 files: `run_both`'s results
  and the Beam output's folder."""
  folder = tmp_path_factory.mktemp("books_in_process")
  return (*run_both(books, folder, IN_PROCESS, num_shards=3), folder / "beam")


def test_records_and_stats_equal_the_local_path(books_in_process):
  local, local_stats, records, stats, folder = books_in_process
  assert len(local) == local_stats.instances > 100
  assert records == local
  assert stats == local_stats
  assert len(tf.io.gfile.glob(str(folder / "train.tfrecord-*-of-00003"))) == 3


def test_random_next_sentences_come_from_the_whole_corpus(books_in_process):
  """Each book is a shard of its own: its random next sentences must come from other shards."""
  _, _, records, stats, _ = books_in_process
  assert stats.documents == 82 and stats.cut_documents == 0
  random_from_books = 0
  for a_ids, b_ids, random_next in segments_of(records):
    (a_source,), (b_source,) = source_of(a_ids), source_of(b_ids)
    if random_next and a_source != "short":
      assert b_source != a_source
      random_from_books += 1
  assert random_from_books > 10


@pytest.mark.slow
def test_two_worker_processes_write_the_local_records(books, tmp_path):
  local, local_stats, records, stats = run_both(
      books, tmp_path, ["--runner=DirectRunner", "--direct_num_workers=2",
                        "--direct_running_mode=multi_processing"], gzip=True)
  assert len(local) == local_stats.instances > 100
  assert records == local
  assert stats == local_stats


# === The order of the records: one random order over the whole corpus ===

# The ordered corpus: GROUPS stretches of consecutive documents, each with words of its own, so a
# record's sentence A tells which stretch of the corpus it comes from.
GROUPS = 8
ORDER_SEED = 7
# Buckets of a few records each: several per file, so their pieces are joined in bucket order.
SMALL_BUCKETS = 16 << 10


def group_word(group, i):
  return f"g{group}w{i}"


def groups_of(records):
  """The stretch of each record."""
  groups = []
  for a_ids, _, _ in segments_of(records):
    (group,) = {(i - len(SPECIAL_TOKENS)) // 10 for i in a_ids.tolist()}
    groups.append(group)
  return groups


@pytest.fixture(scope="module")
def ordered_corpus(tmp_path_factory):
  """GROUPS stretches of 12 documents in one file, about a shard each.

  Returns the files, the vocabulary, the shard size and the counts (documents, sentences, tokens).
  """
  folder = tmp_path_factory.mktemp("ordered")
  rng = np.random.default_rng(1)
  documents = [[" ".join(group_word(group, i) for i in rng.integers(0, 10, rng.integers(5, 10)))
                for _ in range(rng.integers(3, 6))]
               for group in range(GROUPS) for _ in range(12)]
  path = folder / "corpus.txt"
  path.write_text("\n\n".join("\n".join(lines) for lines in documents) + "\n")
  vocab = folder / "vocab.txt"
  write_vocab(vocab, SPECIAL_TOKENS + [group_word(g, i) for g in range(GROUPS) for i in range(10)])
  counts = (len(documents), sum(len(lines) for lines in documents),
            sum(len(line.split()) for lines in documents for line in lines))
  return [str(path)], str(vocab), path.stat().st_size // GROUPS, counts


def run_ordered(corpus, output_prefix, **kwargs):
  files, vocab, shard_bytes, _ = corpus
  return beam_pipeline().create_pretraining_data_beam(
      files, str(output_prefix), vocab, IN_PROCESS, options=OPTIONS, shard_bytes=shard_bytes,
      **kwargs)


def records_in_order(path, compression=""):
  return [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def file_names(count):
  return [f"train.tfrecord-{i:05d}-of-{count:05d}" for i in range(count)]


@pytest.fixture(scope="module")
def shuffled(ordered_corpus, tmp_path_factory):
  """The ordered corpus written to 3 files with small buckets.

  Returns the output folder, the stats and `{file name: its records in order}`.
  """
  folder = tmp_path_factory.mktemp("shuffled")
  stats = run_ordered(ordered_corpus, folder / "train.tfrecord", random_seed=ORDER_SEED,
                      num_shards=3, bucket_bytes=SMALL_BUCKETS)
  return folder, stats, {name: records_in_order(folder / name) for name in file_names(3)}


def test_each_file_mixes_the_whole_corpus_from_its_first_record(shuffled):
  _, _, files = shuffled
  for name, records in files.items():
    groups = groups_of(records)
    # In corpus order (each shard's records together) the first records come from one or two
    # stretches; in random order, 16 records miss 5 of 8 stretches with a chance of about 1e-5.
    assert len(set(groups[:16])) >= 4, (name, groups[:16])
    # No drift through the file either: the correlation of place and stretch is 0 +- 0.1.
    assert abs(np.corrcoef(np.arange(len(groups)), groups)[0, 1]) < 0.5, (name, groups)


def test_every_file_is_a_random_sample_of_the_whole_corpus(shuffled):
  folder, stats, files = shuffled
  sizes = [len(records) for records in files.values()]
  assert sum(sizes) == stats.instances > 300
  # A file's share is binomial: 1/3 +- 0.03 of the records.
  assert all(abs(size / stats.instances - 1 / 3) < 0.15 for size in sizes), sizes
  for name, records in files.items():
    # Each stretch has about 15 records in each file; none in one would be a chance of 1e-8.
    assert set(groups_of(records)) == set(range(GROUPS)), name


def test_a_run_leaves_only_its_outputs(shuffled):
  folder, _, _ = shuffled
  assert sorted(p.name for p in folder.iterdir()) == file_names(3)


def test_records_are_those_of_the_local_path_and_the_estimate_is_on_the_high_side(
    ordered_corpus, shuffled, tmp_path):
  files, vocab, shard_bytes, counts = ordered_corpus
  _, stats, shuffled_files = shuffled
  local = str(tmp_path / "local.tfrecord")
  create_pretraining_data(files, local, vocab, options=OPTIONS, num_workers=1,
                          random_seed=ORDER_SEED, shard_bytes=shard_bytes)
  records = sorted(r for rs in shuffled_files.values() for r in rs)
  assert records == records_of(local)
  written = sum(len(r) for r in records)
  estimate = shuffle.estimated_record_bytes(OPTIONS, *counts)
  assert written < estimate < 4 * written


def test_the_same_seed_writes_the_same_bytes_and_another_seed_another_order(
    ordered_corpus, shuffled, tmp_path):
  folder, _, files = shuffled
  # One bucket a file this time: the bytes do not depend on the buckets, only on the seed.
  run_ordered(ordered_corpus, tmp_path / "again" / "train.tfrecord", random_seed=ORDER_SEED,
              num_shards=3)
  for name in files:
    assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes(), name
  run_ordered(ordered_corpus, tmp_path / "other" / "train.tfrecord", random_seed=ORDER_SEED + 1,
              num_shards=3, bucket_bytes=SMALL_BUCKETS)
  for name, records in files.items():
    other = records_in_order(tmp_path / "other" / name)
    assert groups_of(other) != groups_of(records), name


def test_without_num_shards_one_file_per_text_bytes_times_dupe_factor(
    ordered_corpus, shuffled, tmp_path, monkeypatch):
  module = beam_pipeline()
  files, _, _, _ = ordered_corpus
  _, _, expected = shuffled
  # The rule, scaled to the small corpus: text for 2.5 files (times dupe_factor) makes 3.
  text = os.path.getsize(files[0]) * OPTIONS.dupe_factor
  monkeypatch.setattr(module, "TEXT_BYTES_PER_OUTPUT", int(text / 2.5))
  run_ordered(ordered_corpus, tmp_path / "train.tfrecord", random_seed=ORDER_SEED, gzip=True,
              bucket_bytes=SMALL_BUCKETS)
  assert sorted(p.name for p in tmp_path.iterdir()) == file_names(3)
  # GZIP-compressed, the same records in the same files and order as with num_shards=3.
  for name, records in expected.items():
    assert records_in_order(tmp_path / name, "GZIP") == records, name


def test_a_failed_run_removes_its_pieces(ordered_corpus, tmp_path):
  # A folder in the way of the second output fails its rename, once all pieces are written.
  (tmp_path / file_names(3)[1]).mkdir()
  with pytest.raises(Exception, match="Is a directory"):
    run_ordered(ordered_corpus, tmp_path / "train.tfrecord", random_seed=ORDER_SEED,
                num_shards=3, bucket_bytes=SMALL_BUCKETS)
  # Outputs renamed before the failure are complete; no piece, folder or partial file remains.
  assert {p.name for p in tmp_path.iterdir()} <= set(file_names(3))


def test_the_layout_cuts_the_keys_into_equal_ranges_in_order():
  layout = beam_pipeline().OutputLayout(num_files=3, buckets_per_file=5)
  keys = sorted(np.random.default_rng(0).integers(1 << 63, size=2000, dtype=np.int64).tolist())
  places = [layout.place(k) for k in [0, *keys, (1 << 63) - 1]]
  assert places[0] == (0, 0) and places[-1] == (2, 4)
  # Keys in order go to files and buckets in order: a file is its buckets, each sorted, in order.
  assert places == sorted(places)
  counts = np.bincount([f * 5 + b for f, b in places[1:-1]], minlength=15)
  assert counts.min() > 2000 / 15 / 2
  assert layout.place(1 << 62) == (1, 2)  # the middle of the middle file's middle bucket
  assert layout.output_path("out/train", 2) == "out/train-00002-of-00003"


def test_the_file_count_follows_the_text_size_and_the_buckets_the_estimate():
  module = beam_pipeline()
  choose = module.OutputLayout.choose
  options = InstanceOptions(max_seq_length=128, dupe_factor=10)
  counts = [(0, 100, 10_000, 200_000), (1, 100, 10_000, 200_000)]
  per_output = module.TEXT_BYTES_PER_OUTPUT
  estimate = shuffle.estimated_record_bytes(options, 200, 20_000, 400_000)
  for text_bytes, files in [(1, 1), (per_output // 10, 1), (per_output // 10 + 1, 2),
                            (per_output, 10)]:
    layout = choose(counts, text_bytes, options, 0, 1 << 20, per_output)
    assert layout.num_files == files, text_bytes
    assert layout.buckets_per_file == int(np.ceil(estimate / (files << 20)))
  assert choose(counts, per_output, options, 7, 1 << 40, per_output) == module.OutputLayout(7, 1)


def test_a_runner_without_apache_beam_names_the_extra(books, tmp_path):
  files, vocab, _ = books
  # Hides Apache Beam from the tool, whether or not it is installed here.
  code = ("import sys; sys.modules['apache_beam'] = None; "
          "from official_bert.cli import create_pretraining_data as tool; tool.run()")
  done = run_python(
      [sys.executable, "-c", code, f"--input_file={files[0]}",
       f"--output_file={tmp_path / 'out.tfrecord'}", f"--vocab_file={vocab}",
       "--runner=DirectRunner", "--direct_num_workers=2"],
      timeout=300, env=dict(os.environ, PYTHONPATH=str(REPOSITORY)))
  errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
  assert done.returncode == 2, done.stderr
  assert errors == ['error: --runner=DirectRunner needs Apache Beam, which is not installed: '
                    'pip install -e ".[beam]" (or pip install "official_bert[beam]")']
  assert not list(tmp_path.glob("out.tfrecord*"))


def test_input_without_text_is_a_clear_error_and_leaves_no_file(books, tmp_path):
  _, vocab, _ = books
  blank = tmp_path / "blank.txt"
  blank.write_text("\n\n\n")
  with pytest.raises(ValueError, match="no pre-training instances.*3 lines, 3 blank"):
    beam_pipeline().create_pretraining_data_beam(
        str(blank), str(tmp_path / "out" / "train.tfrecord"), vocab, IN_PROCESS, options=OPTIONS)
  # Neither an (empty) output nor the shuffle's folder remains.
  assert not list((tmp_path / "out").glob("*")) and not list((tmp_path / "out").glob(".*"))


@pytest.mark.slow
def test_the_script_hands_the_flags_it_does_not_know_to_beam(books, tmp_path):
  beam_pipeline()
  files, vocab, shard_bytes = books
  local = str(tmp_path / "local.tfrecord")
  create_pretraining_data(files, local, vocab, options=OPTIONS, num_workers=1,
                          shard_bytes=shard_bytes)
  output = tmp_path / "beam" / "train.tfrecord"
  done = run_python([sys.executable, str(REPOSITORY / "create_pretraining_data.py"),
                     f"--input_file={','.join(files)}",
                     f"--output_file={output}", f"--vocab_file={vocab}", "--max_seq_length=48",
                     "--dupe_factor=2", f"--shard_size_mb={shard_bytes / 2**20}",
                     "--num_output_shards=2", "--runner", "DirectRunner",
                     "--direct_running_mode", "multi_threading", "--direct_num_workers=1"],
                    timeout=600, env=dict(os.environ, PYTHONPATH=str(REPOSITORY)))
  assert done.returncode == 0, done.stderr[-3000:]
  assert sorted(p.name for p in output.parent.iterdir()) == [
      "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
  assert records_of(f"{output}-*-of-*") == records_of(local)


def test_a_flag_that_neither_the_tool_nor_beam_knows_is_refused_before_any_work(books, tmp_path):
  beam_pipeline()
  files, vocab, _ = books
  output = tmp_path / "beam" / "train.tfrecord"
  done = run_python(
      [sys.executable, str(REPOSITORY / "create_pretraining_data.py"),
       f"--input_file={','.join(files)}", f"--output_file={output}", f"--vocab_file={vocab}",
       "--runner=DirectRunner", "--max_seq_len=64", "--direct_num_workers=1"],
      timeout=300, env=dict(os.environ, PYTHONPATH=str(REPOSITORY)))
  assert done.returncode == 2, done.stderr[-3000:]
  error = done.stderr.strip().splitlines()[-1]
  assert error.startswith("error: unknown flag(s) --max_seq_len (did you mean --max_seq_length?)")
  assert "Traceback" not in done.stderr
  assert not output.parent.exists() or not list(output.parent.iterdir())
