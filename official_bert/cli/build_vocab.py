"""Learns a WordPiece vocab.txt from text files.

  python build_vocab.py --input_file=a.txt,b*.txt --output_file=vocab.txt --vocab_size=30522 \
      --do_lower_case=true

The vocabulary starts with [PAD] [UNK] [CLS] [SEP] [MASK], then the learned pieces. At the end the
script prints how the input tokenizes under it: tokens, [UNK] count and rate.
"""

from absl import flags

from official_bert.cli.launch import launch
from official_bert.tokenization import vocab_builder

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("input_file", None, "Comma-separated input files or glob patterns (UTF-8).")
  flags.DEFINE_string("output_file", None, "Where to write the vocab.txt.")
  flags.DEFINE_integer("vocab_size", 30522, "The most lines the vocabulary may have.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Learn an uncased vocabulary (lower-case, strip accents).")
  flags.DEFINE_integer("max_input_lines", None, "Read at most this many lines in all.")


def main():
  stats = vocab_builder.build_vocab(
      FLAGS.input_file, FLAGS.output_file, vocab_size=FLAGS.vocab_size,
      do_lower_case=FLAGS.do_lower_case, max_input_lines=FLAGS.max_input_lines)
  print(f"Wrote {FLAGS.output_file}: {stats.vocab_size} tokens (min_count {stats.min_count}) from "
        f"{stats.num_lines} lines of {len(stats.files)} files, {stats.num_words} words "
        f"({stats.num_distinct_words} distinct) in {stats.seconds:.1f} s.")
  print(f"Input under the new vocabulary: {stats.num_tokens} tokens, {stats.num_unk} [UNK], "
        f"[UNK] rate {stats.unk_rate:.6f}")


def run():
  """The `bert-build-vocab` command (and `python build_vocab.py`)."""
  define_flags()
  launch(main, ["input_file", "output_file"], inputs=["input_file"], outputs=["output_file"])


if __name__ == "__main__":
  run()
