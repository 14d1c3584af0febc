"""Next-sentence fidelity of `create_pretraining_data.py` against the original tool's algorithm.

    python benchmarks/nsp_fidelity.py [--dupe_factor 1] [--max_seq_length 128] [--num_workers 1]

The original cannot run here, so `reference_statistics` follows its algorithm (all documents in
memory, shuffled, every document of every pass paired, a random next sentence from a random OTHER
document of the whole input) on the same tokenized documents as the tool, counting only lengths:
what it would write, statistically. The input is the 17 Gutenberg books (one paragraph a line, no
blank lines: each book is one document) and WikiText-2 valid + test (a document per paragraph)
beside the repository. The table compares the instances, their mean length in tokens, the share
with a random next sentence, and the share of those whose B comes from A's own document.
"""

import argparse
import glob
import os
import pathlib
import random
import sys
import tempfile
import time

from results import recorded

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"

# The original's chance of a random next sentence, and its tries to draw another document.
_RANDOM_NEXT_PROB = 0.5
_RANDOM_DOCUMENT_TRIES = 10


def reference_statistics(documents, max_seq_length, short_seq_prob, dupe_factor, seed):
  """The original tool's pairing, on sentence lengths; returns what it would write.

  Args:
    documents: list of documents, each a list of sentence lengths in tokens (all positive).
    max_seq_length: as the flag.
    short_seq_prob: as the flag.
    dupe_factor: as the flag.
    seed: for `random.Random`.

  Returns:
    dict: `instances`, `tokens` (`[CLS]` and `[SEP]` included, after truncation), `random_next`,
    `random_next_same_document`.
  """
  rng = random.Random(seed)
  documents = list(documents)
  rng.shuffle(documents)
  max_num_tokens = max_seq_length - 3
  counts = dict(instances=0, tokens=0, random_next=0, random_next_same_document=0)
  for _ in range(dupe_factor):
    for index, document in enumerate(documents):
      target = max_num_tokens
      if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)
      chunk, length, i = [], 0, 0
      while i < len(document):
        chunk.append(document[i])
        length += document[i]
        if i == len(document) - 1 or length >= target:
          a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
          len_a = sum(chunk[:a_end])
          if len(chunk) == 1 or rng.random() < _RANDOM_NEXT_PROB:
            for _ in range(_RANDOM_DOCUMENT_TRIES):
              other = rng.randint(0, len(documents) - 1)
              if other != index:
                break
            len_b = 0
            for sentence in documents[other][rng.randint(0, len(documents[other]) - 1):]:
              len_b += sentence
              if len_b >= target - len_a:
                break
            # The chunk's unused sentences start the next chunk.
            i -= len(chunk) - a_end
            counts["random_next"] += 1
            counts["random_next_same_document"] += other == index
          else:
            len_b = sum(chunk[a_end:])
          counts["instances"] += 1
          counts["tokens"] += min(len_a + len_b, max_num_tokens) + 3
          chunk, length = [], 0
        i += 1
  return counts


def tokenized_documents(files, vocab_file, shard_bytes, do_lower_case=True):
  """The documents the tool builds from `files`, as lists of sentence lengths."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  from official_bert.preprocessing import tokenizer_layer  # pylint: disable=g-import-not-at-top
  from official_bert.pretraining import corpus  # pylint: disable=g-import-not-at-top
  tokenizer = tokenizer_layer.BertTokenizerLayer(vocab_file, do_lower_case)
  documents = []
  for shard in corpus.read_shards(files, shard_bytes):
    text = corpus.decode_shard(shard)
    token_ids, row_splits = tokenizer.tokenize_flat_numpy(text.sentences, batch_size=2048)
    docs, _ = corpus.documents_from_tokens(text, token_ids, row_splits)
    lengths = np.diff(docs.sentence_splits).tolist()
    splits = docs.document_splits.tolist()
    documents.extend(lengths[lo:hi] for lo, hi in zip(splits[:-1], splits[1:]))
  return documents


def tool_statistics(files, vocab_file, options, seed, num_workers, shard_bytes):
  """Runs the tool; returns its counts (as `reference_statistics`) and its wall time."""
  from official_bert.pretraining import pipeline  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as folder:
    start = time.perf_counter()
    stats = pipeline.create_pretraining_data(
        files, os.path.join(folder, "out.tfrecord"), vocab_file, options=options,
        random_seed=seed, num_workers=num_workers, shard_bytes=shard_bytes)
    wall = time.perf_counter() - start
  return dict(instances=stats.instances, tokens=stats.tokens, random_next=stats.random_next,
              random_next_same_document=stats.random_next_same_document), wall


def table(tool, reference, runs=1):
  """The comparison as lines of text, and the relative gaps as a dict.

  Args:
    tool: counts as `reference_statistics` returns them, summed over `runs` runs.
    reference: the same for the reference.
    runs: the instances shown are the mean per run.
  """
  def rows(counts):
    n = max(counts["instances"], 1)
    return (round(counts["instances"] / runs), counts["tokens"] / n, counts["random_next"] / n,
            counts["random_next_same_document"] / max(counts["random_next"], 1))
  ours, theirs = rows(tool), rows(reference)
  names = ("instances", "mean tokens", "random-next rate", "random next from A's document")
  gaps = {name: (a - b) / b if b else float(a != b) for name, a, b in zip(names, ours, theirs)}
  lines = [f"{'':<32}{'tool':>12}{'reference':>12}{'gap':>9}"]
  for name, a, b in zip(names, ours, theirs):
    cells = (f"{a:>12}{b:>12}" if name == "instances" else f"{a:>12.4f}{b:>12.4f}")
    lines.append(f"{name:<32}{cells}{100 * gaps[name]:>8.1f}%")
  return lines, gaps


def _sum(runs):
  return {key: sum(run[key] for run in runs) for key in runs[0]}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dupe_factor", type=int, default=1)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--short_seq_prob", type=float, default=0.1)
  parser.add_argument("--seeds", type=int, default=3,
                      help="runs of each, with the seeds 12345, 12346, ...: a book is one "
                           "document, and whether it draws a short target length (short_seq_prob, "
                           "once per document) moves the counts of a single run by several percent")
  parser.add_argument("--num_workers", type=int, default=1)
  args = parser.parse_args()
  books = sorted(glob.glob(str(DATA / "corpus" / "gutenberg" / "*.txt")))
  wiki = [str(DATA / "corpus" / "wikitext-2" / name) for name in ("valid.txt", "test.txt")]
  if not books or not all(os.path.exists(f) for f in wiki):
    sys.exit(f"{DATA}/corpus is absent: this benchmark needs the shared data.")
  from official_bert.pretraining import InstanceOptions, pipeline  # pylint: disable=g-import-not-at-top
  files = books + wiki
  vocab = str(DATA / "vocab" / "bert-base-uncased-vocab.txt")
  options = InstanceOptions(max_seq_length=args.max_seq_length, dupe_factor=args.dupe_factor,
                            short_seq_prob=args.short_seq_prob)
  documents = tokenized_documents(files, vocab, pipeline.DEFAULT_SHARD_BYTES)
  print(f"Gutenberg (17 books) + WikiText-2 valid/test: {len(documents)} documents, "
        f"max_seq_length {args.max_seq_length}, short_seq_prob {args.short_seq_prob}, "
        f"dupe_factor {args.dupe_factor}, {args.num_workers} worker(s).")
  tools, references = [], []
  for seed in range(12345, 12345 + args.seeds):
    tool, wall = tool_statistics(files, vocab, options, seed, args.num_workers,
                                 pipeline.DEFAULT_SHARD_BYTES)
    reference = reference_statistics(documents, args.max_seq_length, args.short_seq_prob,
                                     args.dupe_factor, seed)
    tools.append(tool)
    references.append(reference)
    print(f"seed {seed}: tool {tool['instances']} instances ({wall:.1f} s), reference "
          f"{reference['instances']}")
  lines, _ = table(_sum(tools), _sum(references), args.seeds)
  print(f"Over {args.seeds} seed(s) (instances: the mean per run):")
  print("\n".join(lines))


if __name__ == "__main__":
  with recorded("nsp_fidelity"):
    main()
