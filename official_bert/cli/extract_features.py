"""Extracts pre-trained BERT activations (feature-based use) as JSON lines, as the original did.

The original flags keep their names, defaults and output format, so its README command runs
unchanged:

    python extract_features.py --input_file=/tmp/input.txt --output_file=/tmp/output.jsonl \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
      --max_seq_length=128 --batch_size=8

One text per line, ` ||| ` between the two texts of a pair. Each output line is
`{"linex_index": i, "features": [{"token": ..., "layers": [{"index": -1, "values": [...]}]}]}`.
`--init_checkpoint` also takes a model folder or a Hugging Face folder; `--vocab_file` and
`--bert_config_file` default to the files beside it.

The original's TPU flags (`--use_tpu`, `--master`, `--num_tpu_cores`) and
`--use_one_hot_embeddings` are accepted, so its commands keep working, and ignored (a warning says
so when one is set): extraction runs on this machine's CPU or GPU, and the embedding lookup is the
encoder's own.

Added flags: `--pooling=mean|cls` (with `--normalize` and `--pooling_layer`) writes one sentence
vector per line instead, `{"linex_index": i, "embedding": [...]}`; `--export_dir` also writes a
SavedModel of the encoder (raw text or token ids in; `sequence_output`, `pooled_output`,
`encoder_outputs` out, like TF Hub's BERT encoders).
"""

import os

from absl import flags, logging

from official_bert.cli.launch import launch
from official_bert.tasks import base, driver, experiment, feature_extraction

FLAGS = flags.FLAGS
_IGNORED_FLAGS = ("use_tpu", "master", "num_tpu_cores", "use_one_hot_embeddings")


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("input_file", None, "Input text: one sequence per line, ' ||| ' between a "
                      "pair.")
  flags.DEFINE_string("output_file", None, "The JSON-lines output file.")
  flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated layer indexes (-1: the last).")
  flags.DEFINE_string("bert_config_file", None,
                      "The config json file corresponding to the pre-trained BERT model; by "
                      "default the one beside --init_checkpoint.")
  flags.DEFINE_integer("max_seq_length", 128,
                       "The maximum total input sequence length after WordPiece tokenization. "
                       "Sequences longer than this will be truncated.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model): an original TF1 "
                      "bert_model.ckpt, a model folder or a Hugging Face folder.")
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on; by default the "
                      "vocab.txt beside --init_checkpoint.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. Should be True for uncased models and "
                    "False for cased models.")
  flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
  flags.DEFINE_enum("pooling", None, feature_extraction.POOLINGS,
                    "Write one vector per line instead of per-token layers: the [CLS] vector or "
                    "the mean over the tokens of --pooling_layer.")
  flags.DEFINE_integer("pooling_layer", -1, "The layer --pooling reads (-1: the last).")
  flags.DEFINE_bool("normalize", False, "L2-normalise the --pooling vectors.")
  flags.DEFINE_string("export_dir", None,
                      "If set, also export the encoder as a SavedModel (raw text or token ids in) "
                      "to this new folder.")
  # The original's flags that have no effect here; see each one's help for why.
  flags.DEFINE_bool("use_tpu", False,
                    "Ignored, accepted for the original's commands: extraction runs on this "
                    "machine's CPU or GPU (it is one forward pass per batch, no training).")
  flags.DEFINE_string("master", None,
                      "Ignored, accepted for the original's commands: the TPU master address of "
                      "--use_tpu, which is ignored.")
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Ignored, accepted for the original's commands: the TPU cores of --use_tpu, "
                       "which is ignored.")
  flags.DEFINE_bool("use_one_hot_embeddings", False,
                    "Ignored, accepted for the original's commands: it chose a one-hot matmul "
                    "for the word-embedding lookup on TPUs; the encoder's embedding layer does "
                    "the lookup here, with the same result.")


def ignored_flags_set():
  """The names of the ignored original flags that the command line set to another value."""
  return [name for name in _IGNORED_FLAGS if FLAGS[name].value != FLAGS[name].default]


def main():
  for name in ignored_flags_set():
    logging.warning("--%s=%s is ignored: %s", name, FLAGS[name].value,
                    FLAGS[name].help.split(": ", 1)[1])
  driver.run_experiment(experiment_config_from_flags(), base.Modes(predict=True))


def experiment_config_from_flags():
  """The run's `ExperimentConfig`: the flags mapped onto the tree."""
  return experiment.ExperimentConfig(
      task=experiment.FeatureExtractionConfig(
          input_file=FLAGS.input_file, output_file=FLAGS.output_file,
          bert_config_file=FLAGS.bert_config_file, vocab_file=FLAGS.vocab_file,
          do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
          layers=FLAGS.layers, pooling=FLAGS.pooling, pooling_layer=FLAGS.pooling_layer,
          normalize=FLAGS.normalize),
      trainer=experiment.TrainerConfig(predict_batch_size=FLAGS.batch_size),
      # The task reads nothing from output_dir and writes only --output_file there.
      output_dir=os.path.dirname(FLAGS.output_file) or os.curdir,
      init_checkpoint=FLAGS.init_checkpoint, export_dir=FLAGS.export_dir)


def run():
  """The `bert-extract-features` command (and `python extract_features.py`)."""
  define_flags()
  launch(main, ["input_file", "output_file", "init_checkpoint"],
         inputs=["input_file", "bert_config_file", "init_checkpoint", "vocab_file"],
         outputs=["output_file", "export_dir"])


if __name__ == "__main__":
  run()
