r"""Converts BERT checkpoints: original TF1 or Hugging Face into a model folder, and back.

    bert-convert-checkpoint --input_format=tf1 \
        --input=uncased_L-4_H-256_A-4/bert_model.ckpt --output_dir=bert_mini
    bert-convert-checkpoint --input_format=tf1 --input=mrpc_output/model.ckpt-343 \
        --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json --output_dir=mrpc_model
    bert-convert-checkpoint --input_format=keras --input=mrpc_model --output_format=tf1 \
        --output_dir=mrpc_tf1

The folder holds `bert_config.json`, `vocab.txt` (when the source has one) and the weights:
`model.weights.h5` and its manifest `model.json` for `--output_format=keras` (kind `pretrainer`,
`classifier` or `span_labeler` when the source holds that head: the original pre-training,
`run_classifier.py` or `run_squad.py`; `encoder` otherwise; see
`official_bert/checkpoints/model_dir.py`), or `bert_model.ckpt.*` for `--output_format=tf1`, which
the original scripts read as `--init_checkpoint`, head included.
`official_bert.load_encoder(output_dir)` and every training script's `--init_checkpoint` read it.
"""

from absl import flags

from official_bert.checkpoints import converter
from official_bert.cli.launch import launch


def define_flags(flag_values=flags.FLAGS):
  """Defines this script's flags (on `flag_values`, the global `FLAGS` by default)."""
  flags.DEFINE_enum("input_format", None, list(converter.INPUT_FORMATS),
                    "Format of --input: `tf1` (bert_model.ckpt), `hf` (Hugging Face) or `keras` "
                    "(a model folder, to --output_format=tf1).",
                    flag_values=flag_values)
  flags.DEFINE_string("input", None,
                      "TF1 checkpoint prefix or folder, Hugging Face folder, or model folder.",
                      flag_values=flag_values)
  flags.DEFINE_string("output_dir", None, "Folder to write the converted checkpoint to.",
                      flag_values=flag_values)
  flags.DEFINE_enum("output_format", converter.KERAS, list(converter.OUTPUT_FORMATS),
                    "`keras` (a model folder: model.weights.h5 + model.json) or `tf1` "
                    "(bert_model.ckpt).",
                    flag_values=flag_values)
  flags.DEFINE_string("bert_config_file", None,
                      "bert_config.json, when none lies beside a TF1 checkpoint.",
                      flag_values=flag_values)
  flags.mark_flags_as_required(["input_format", "input", "output_dir"], flag_values=flag_values)


def convert_from_flags(flag_values):
  """Converts the checkpoint that parsed `flag_values` name; returns the output folder."""
  return converter.convert(flag_values.input_format, flag_values.input, flag_values.output_dir,
                           output_format=flag_values.output_format,
                           config_file=flag_values.bert_config_file)


def run():
  """The `bert-convert-checkpoint` command (`python -m official_bert.cli.convert_checkpoint`)."""
  define_flags()
  launch(lambda: convert_from_flags(flags.FLAGS), inputs=["input", "bert_config_file"],
         outputs=["output_dir"])


if __name__ == "__main__":
  run()
