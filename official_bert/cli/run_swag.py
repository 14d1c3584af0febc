"""Fine-tunes BERT for multiple choice on SWAG (Zellers et al., 2018) or data in its format.

The flags are those of `run_classifier.py` (the original names and defaults), plus where the data
is:

    python run_swag.py --do_train=true --do_eval=true --data_dir=swagaf/data \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=80 \
      --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/swag_output/

`--data_dir` holds `train.csv`, `val.csv` and `test.csv` of the SWAG release (header
`video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label`; the test file
has no labels); `--train_file`, `--eval_file`, `--predict_file` name other files, CSV or JSON lines
(`sent1`, `sent2`, `ending0`.., `label`). Outputs: `eval_results.txt` (`eval_accuracy`,
`eval_loss`, `global_step`), `test_results.tsv` and `test_predictions.jsonl` (per-choice
probabilities), the fine-tuned model folder, and with `--export_dir` a serving SavedModel.
Running the same command again resumes.
"""


from official_bert.cli import fine_tuning_flags
from official_bert.cli.launch import launch
from official_bert.tasks import experiment


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  fine_tuning_flags.define_split_file_flags(
      data_dir="Folder with the SWAG files train.csv, val.csv and test.csv (or .jsonl).",
      train_file="The training file (.csv or .jsonl), if not data_dir/train.csv.",
      eval_file="The labelled evaluation file, if not data_dir/val.csv.",
      predict_file="The file to predict, if not data_dir/test.csv.")
  fine_tuning_flags.define_fine_tuning_flags()


def task_config_from_flags():
  """The task's node of the run's config, from the parsed flags."""
  return experiment.SwagConfig(**fine_tuning_flags.task_args_from_flags(),
                               **fine_tuning_flags.split_files_from_flags())


def main():
  fine_tuning_flags.run_task_from_flags(task_config_from_flags())


def run():
  """The `bert-run-swag` command (and `python run_swag.py`)."""
  define_flags()
  launch(main, fine_tuning_flags.REQUIRED_FLAGS,
         inputs=fine_tuning_flags.INPUT_FLAGS + fine_tuning_flags.SPLIT_FILE_FLAGS,
         outputs=fine_tuning_flags.OUTPUT_FLAGS,
         output_files=fine_tuning_flags.output_file_flags)


if __name__ == "__main__":
  run()
