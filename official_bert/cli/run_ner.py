"""Fine-tunes BERT for named-entity recognition (token classification) on CoNLL-style files.

The flags are those of `run_classifier.py` (the original names and defaults), plus where the data
is:

    python run_ner.py --do_train=true --do_eval=true --do_predict=true --data_dir=conll2003 \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=false \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/ner_output/

`--data_dir` holds `train.txt`, `dev.txt` (or `valid.txt`) and `test.txt`, or the same names
ending in `.conll` (WNUT-17); `--train_file`, `--eval_file`, `--predict_file` name other files.
One token a line, the tag (IOB1 or IOB2) in the last column, a blank line between sentences,
`-DOCSTART-` lines ignored. Outputs: `labels.txt` (the training tags), `eval_results.txt`
(entity-level precision, recall and F1, overall and per type; token accuracy; `eval_loss`),
`eval_predictions.txt` / `test_predictions.txt` (CoNLL, one `token [gold] predicted` line per
original word), the fine-tuned model folder, and with `--export_dir` a serving SavedModel.
Running the same command again resumes.
"""

from official_bert.cli import fine_tuning_flags
from official_bert.cli.launch import launch
from official_bert.tasks import experiment


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  fine_tuning_flags.define_split_file_flags(
      data_dir="Folder with train.txt, dev.txt (or valid.txt) and test.txt, or *.conll.",
      train_file="The training file, if not in data_dir; its tags are the labels.",
      eval_file="The tagged evaluation file, if not in data_dir.",
      predict_file="The file to tag, if not in data_dir.")
  fine_tuning_flags.define_fine_tuning_flags()


def task_config_from_flags():
  """The task's node of the run's config, from the parsed flags."""
  return experiment.NerConfig(**fine_tuning_flags.task_args_from_flags(),
                              **fine_tuning_flags.split_files_from_flags())


def main():
  fine_tuning_flags.run_task_from_flags(task_config_from_flags())


def run():
  """The `bert-run-ner` command (and `python run_ner.py`)."""
  define_flags()
  launch(main, fine_tuning_flags.REQUIRED_FLAGS,
         inputs=fine_tuning_flags.INPUT_FLAGS + fine_tuning_flags.SPLIT_FILE_FLAGS,
         outputs=fine_tuning_flags.OUTPUT_FLAGS,
         output_files=fine_tuning_flags.output_file_flags)


if __name__ == "__main__":
  run()
