"""The two-pass bucket shuffle, and the random order of `create_pretraining_data`'s records."""

import collections
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert.pretraining import shuffle
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import feature_spec
from official_bert.pretraining.shuffle_records import shuffle_records

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  assert_one_line_error,
  run_python,
  run_tools,
  write_vocab,
)

NUM_DOCUMENTS = 60


def shuffled(random_seed, num_records, buckets, sources):
  """The bucket shuffle of records 0..n-1 coming in `sources` groups, in numpy alone."""
  groups = np.array_split(np.arange(num_records), sources)
  bucket_of = np.concatenate([shuffle.scatter_draws(random_seed, i, len(g), buckets)
                              for i, g in enumerate(groups)])
  records = np.concatenate(groups)
  out = []
  for bucket in range(buckets):
    members = records[bucket_of == bucket]
    out.append(members[shuffle.gather_order(random_seed, bucket, len(members))])
  return np.concatenate(out)


def test_the_shuffle_is_a_uniformly_random_permutation():
  # Where record 0 and record 5 end up, over many seeds: every place equally often, as in a
  # uniform permutation, although the records come in order and in two groups.
  trials = 6000
  places = np.array([np.argsort(shuffled(seed, 6, 3, 2))[[0, 5]] for seed in range(trials)])
  for column in places.T:
    counts = np.bincount(column, minlength=6)
    expected = trials / 6
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 20.5, counts  # chi-square, 5 degrees of freedom, p = 0.001
  # Pairs: the first two places hold each ordered pair of records equally often too.
  pairs = collections.Counter(tuple(shuffled(seed, 4, 2, 2)[:2]) for seed in range(3000))
  assert len(pairs) == 12 and min(pairs.values()) > 3000 / 12 * 0.7


def test_bucket_files_give_the_numpy_order(tmp_path):
  records = [f"record {i}".encode() for i in range(500)]
  expected = shuffled(7, 500, 4, 3)
  with shuffle.Buckets(str(tmp_path / "buckets"), 4) as buckets:
    for source, group in enumerate(np.array_split(np.arange(500), 3)):
      draws = shuffle.scatter_draws(7, source, len(group), 4)
      piece = str(tmp_path / f"piece-{source}")
      sizes = shuffle.write_by_bucket(piece, [records[i] for i in group], draws, 4)
      assert sizes.sum() == os.path.getsize(piece)
      buckets.add(piece, sizes, np.bincount(draws, minlength=4))
      assert not os.path.exists(piece)
    assert buckets.records.sum() == 500
    # Framed records: an 8-byte length and its 4-byte CRC before the data, its CRC after.
    out = [r[12:-4] for bucket in buckets.gather(7) for r in bucket]
  assert out == [records[i] for i in expected]
  assert not os.path.exists(tmp_path / "buckets")


def test_bucket_count_follows_the_estimate():
  assert shuffle.num_buckets(0) == 1
  assert shuffle.num_buckets(100, bucket_bytes=100) == 1
  assert shuffle.num_buckets(101, bucket_bytes=100) == 2
  with pytest.raises(ValueError, match="bucket_bytes"):
    shuffle.num_buckets(1, bucket_bytes=0)


# === The order of create_pretraining_data's records ===

def write_marked_corpus(folder):
  """Documents whose words all name the document (`w<d>`), in order: a record's segment A says
  which document, and so where in the corpus, it comes from."""
  documents = []
  for d in range(NUM_DOCUMENTS):
    documents.append("\n".join(" ".join([f"w{d}"] * 6) + " ." for _ in range(12)))
  corpus = folder / "corpus.txt"
  corpus.write_text("\n\n".join(documents) + "\n")
  vocab = write_vocab(folder / "vocab.txt",
                      SPECIAL_TOKENS + ["."] + [f"w{d}" for d in range(NUM_DOCUMENTS)])
  return str(corpus), vocab


def documents_of(path, seq=32):
  """The document of each record's segment A, in the file's order."""
  first_word_id = len(SPECIAL_TOKENS) + 1
  spec = feature_spec(seq, 5)
  documents = []
  # Parsed a batch at a time: one record at a time, the eager calls would cost seconds.
  for batch in tf.data.TFRecordDataset(path).batch(512):
    example = tf.io.parse_example(batch, spec)
    for ids, segments in zip(example["input_ids"].numpy(), example["segment_ids"].numpy()):
      ids = ids[segments == 0]
      words = ids[ids >= first_word_id] - first_word_id
      documents.append(np.bincount(words).argmax())
  return np.array(documents)


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
  return write_marked_corpus(tmp_path_factory.mktemp("marked"))


# One bucket, and buckets of 4000 bytes.
BUCKET_BYTES = [shuffle.DEFAULT_BUCKET_BYTES, 4000]


@pytest.fixture(scope="module")
def two_outputs(marked, tmp_path_factory):
  """The marked corpus written to two outputs, a.tfrecord and b.tfrecord, in a folder of their
  own, for each of `BUCKET_BYTES`: `{bucket_bytes: (folder, outputs, stats)}`."""
  runs = {}
  for bucket_bytes in BUCKET_BYTES:
    folder = tmp_path_factory.mktemp(f"buckets_{bucket_bytes}")
    outputs = [str(folder / "a.tfrecord"), str(folder / "b.tfrecord")]
    stats = create_pretraining_data(
        marked[0], outputs, marked[1], num_workers=1, shard_bytes=1000,
        bucket_bytes=bucket_bytes,
        options=InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=3))
    runs[bucket_bytes] = folder, outputs, stats
  return runs


@pytest.mark.parametrize("bucket_bytes", BUCKET_BYTES)
def test_every_output_is_a_random_sample_in_random_order(two_outputs, bucket_bytes):
  folder, outputs, stats = two_outputs[bucket_bytes]
  counts = []
  for path in outputs:
    documents = documents_of(path)
    counts.append(len(documents))
    # In corpus order, the position of a record and its document's number go together
    # (correlation near 1); in random order they do not.
    assert abs(np.corrcoef(np.arange(len(documents)), documents)[0, 1]) < 0.2
    # The first tenth of each file already comes from all over the corpus.
    head = documents[: len(documents) // 10]
    assert head.min() < NUM_DOCUMENTS / 4 and head.max() > NUM_DOCUMENTS * 3 / 4
    assert len(set(documents)) == NUM_DOCUMENTS
  assert sum(counts) == stats.instances and abs(counts[0] - counts[1]) <= 1
  assert sorted(os.listdir(folder)) == ["a.tfrecord", "b.tfrecord"]  # no pieces, no buckets


def test_the_bucket_count_does_not_change_the_set_of_records(two_outputs):
  sets = []
  for _, outputs, _ in two_outputs.values():  # one bucket, then many
    sets.append(sorted(r.numpy() for r in tf.data.TFRecordDataset(outputs)))
  assert len(sets[0]) > 100
  assert sets[0] == sets[1]


# Runs a script with a file size limit (the process' own, set before the script starts): past
# the limit a write fails with EFBIG, as on a full disk, instead of killing the process.
_LIMITED_RUN = """
import os, resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # a later run of create_pretraining_data.py than test_pretraining_pipeline's
def test_a_full_disk_for_the_buckets_is_one_line_and_leaves_nothing(marked, tmp_path):
  output = tmp_path / "out" / "train.tfrecord"
  # Forked by `run_python`: the limit is the run's alone.
  result = run_python(
      [sys.executable, "-c", _LIMITED_RUN, "400000",
       str(REPOSITORY / "create_pretraining_data.py"),
       f"--input_file={marked[0]}", f"--output_file={output}", f"--vocab_file={marked[1]}",
       "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=30",
       "--num_workers=1", "--shard_size_mb=0.001"],
      timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 2, result.stderr[-2000:]
  error = result.stderr.strip().splitlines()[-1]
  assert error.startswith("error: ") and "out of disk space" in error
  # It names the bucket file.
  assert re.search(r"pieces-[^/]*/buckets/bucket-000000.tfrecord: out of disk space", error)
  assert "Traceback" not in result.stderr
  assert os.listdir(tmp_path / "out") == []


# === bert-shuffle-records: files written in another order ===

def write_in_order(path, count, compression=""):
  with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression)) as w:
    for i in range(count):
      w.write(f"record {i:05d}".encode())
  return str(path)


def run_tool(*flags):
  return run_python([sys.executable, str(REPOSITORY / "shuffle_records.py"), *flags], timeout=300)


def positions(path, compression=""):
  return [int(r.numpy().split()[1]) for r in tf.data.TFRecordDataset(
      str(path), compression_type=compression)]


def test_shuffle_records_spreads_files_in_order_into_random_samples(tmp_path):
  inputs = [write_in_order(tmp_path / "in-0.tfrecord", 1500),
            write_in_order(tmp_path / "in-1.tfrecord.gz", 1500, "GZIP")]
  outputs = [str(tmp_path / "out" / f"part-{i}") for i in range(3)]
  count = shuffle_records(inputs, ",".join(outputs), bucket_bytes=9000,
                          gzip=True)
  assert count == 3000
  parts = [positions(path, "GZIP") for path in outputs]
  assert [len(p) for p in parts] == [1000, 1000, 1000]
  # The two inputs hold records 0..1499 each: every record twice, nothing lost or added.
  assert sorted(sum(parts, [])) == sorted(list(range(1500)) * 2)
  for part in parts:
    assert abs(np.corrcoef(np.arange(len(part)), part)[0, 1]) < 0.15
  assert sorted(os.listdir(tmp_path / "out")) == ["part-0", "part-1", "part-2"]
  # The same seed gives the same bytes, another seed another order.
  again = str(tmp_path / "again")
  other = str(tmp_path / "other")
  shuffle_records(str(tmp_path / "in-*"), again, bucket_bytes=9000)
  shuffle_records(str(tmp_path / "in-*"), other, bucket_bytes=9000, random_seed=1)
  first = open(again, "rb").read()
  shuffle_records(str(tmp_path / "in-*"), again, bucket_bytes=9000)
  assert open(again, "rb").read() == first != open(other, "rb").read()


def test_the_shuffle_command_and_its_errors(tmp_path):
  source = write_in_order(tmp_path / "in.tfrecord", 400)
  output = tmp_path / "out" / "shuffled.tfrecord"
  result = run_tool(f"--input_file={source}", f"--output_file={output}", "--bucket_size_mb=0.002")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Wrote 400 records" in result.stdout
  assert sorted(positions(output)) == list(range(400)) and positions(output) != list(range(400))

  # A damaged input: one line naming it, and no output (nor work file) written.
  data = open(source, "rb").read()
  damaged = tmp_path / "damaged.tfrecord"
  damaged.write_bytes(data[: len(data) - 7])
  empty = write_in_order(tmp_path / "empty.tfrecord", 0)
  cases = ((damaged, "damaged.tfrecord: the TFRecord file is damaged"),
           (empty, "no records in"),
           (tmp_path / "missing-*.tfrecord", "missing-*.tfrecord"))
  target = tmp_path / "bad" / "out.tfrecord"
  # The three refusals in one process (`run_tools`); the run above is the script's own.
  results = run_tools([["shuffle_records.py", f"--input_file={bad}", f"--output_file={target}"]
                       for bad, _ in cases], tmp_path)
  for (_, message), result in zip(cases, results):
    assert_one_line_error(result, message)
  assert not (tmp_path / "bad").exists() or os.listdir(tmp_path / "bad") == []
  assert open(source, "rb").read() == data  # the input is left as it was
