"""Fine-tunes BERT for sentence(-pair) classification: GLUE, TFDS `glue/*` or your own files.

The original flags keep their names, meanings and defaults, so the original README's command runs
unchanged:

    python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output/

XNLI: `--task_name=XNLI` with `--data_dir` holding XNLI-1.0's `xnli.dev.tsv` and XNLI-MT-1.0's
`multinli/` folder, and `--xnli_language` (default `zh`). Other data: `--tfds_name=glue/sst2`
(TensorFlow Datasets), or `--task_name=custom` with `--text_a_column`, `--label_column` (and
`--text_b_column`, `--is_regression`, `--has_header`) for `train/dev/test.{csv,tsv,jsonl}` in
`--data_dir`. Outputs: `eval_results.txt`,
`test_results.tsv`, the GLUE submission file `<TASK>.tsv`, the fine-tuned model folder, and with
`--export_dir` a serving SavedModel. Running the same command again resumes.
"""

from absl import flags

from official_bert.cli import fine_tuning_flags
from official_bert.cli.launch import launch
from official_bert.tasks import experiment

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("data_dir", None,
                      "The input data dir. Should contain the .tsv files (or other data files) for "
                      "the task.")
  flags.DEFINE_string("task_name", None,
                      "The name of the task to train: a GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, "
                      "MNLI, QNLI, RTE, WNLI, AX), XNLI or 'custom' for your own files.")
  flags.DEFINE_string("xnli_language", None,
                      "XNLI: the language to train (multinli/multinli.train.<language>.tsv) and "
                      "evaluate (the xnli.dev.tsv rows of that language) on; default zh, the "
                      "original's.")
  flags.DEFINE_string("tfds_name", None,
                      "Read a TensorFlow Datasets GLUE dataset instead of files, e.g. glue/sst2.")
  flags.DEFINE_string("text_a_column", None,
                      "custom: column (header name, JSON key or 0-based position) of the sentence.")
  flags.DEFINE_string("text_b_column", None,
                      "custom: column of the second sentence, for sentence-pair tasks.")
  flags.DEFINE_string("label_column", None, "custom: column of the label.")
  flags.DEFINE_bool("is_regression", False, "custom: the labels are numbers to regress on.")
  flags.DEFINE_bool("has_header", True, "custom: CSV/TSV files start with a header row.")
  flags.DEFINE_string("train_file", None, "custom: the training file, if not data_dir/train.*.")
  flags.DEFINE_string("dev_file", None, "custom: the dev file, if not data_dir/dev.*.")
  flags.DEFINE_string("test_file", None, "custom: the test file, if not data_dir/test.*.")
  flags.DEFINE_bool("skip_malformed_rows", None,
                    "Skip (and count) malformed data rows instead of stopping at the first. "
                    "Default: skip for QQP only.")
  fine_tuning_flags.define_fine_tuning_flags()


_CUSTOM_FLAGS = ("text_a_column", "text_b_column", "label_column", "is_regression", "has_header",
                 "train_file", "dev_file", "test_file")


def task_config_from_flags():
  """The task's node of the run's config, from the parsed flags."""
  return experiment.ClassificationConfig(
      **fine_tuning_flags.task_args_from_flags(), task_name=FLAGS.task_name,
      data_dir=FLAGS.data_dir, tfds_name=FLAGS.tfds_name,
      custom_options={name: FLAGS[name].value for name in _CUSTOM_FLAGS if FLAGS[name].present},
      skip_malformed_rows=FLAGS.skip_malformed_rows, xnli_language=FLAGS.xnli_language)


def main():
  fine_tuning_flags.run_task_from_flags(task_config_from_flags())


def run():
  """The `bert-run-classifier` command (and `python run_classifier.py`)."""
  define_flags()
  launch(main, fine_tuning_flags.REQUIRED_FLAGS,
         inputs=fine_tuning_flags.INPUT_FLAGS + ["data_dir", "train_file", "dev_file",
                                                 "test_file"],
         outputs=fine_tuning_flags.OUTPUT_FLAGS,
         output_files=fine_tuning_flags.output_file_flags)


if __name__ == "__main__":
  run()
