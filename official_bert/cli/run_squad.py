"""Fine-tunes BERT for extractive question answering on SQuAD v1.1 or v2.0, and answers questions.

The original flags keep their names, meanings and defaults, so the original README's command runs
unchanged:

    python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True \
      --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
      --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

Outputs in `--output_dir`: `predictions.json`, `nbest_predictions.json` (and `null_odds.json`
with `--version_2_with_negative`), `eval_results.txt` when the predict file has answers (the
official SQuAD metrics), the fine-tuned model folder, and with `--export_dir` a serving SavedModel
that answers a raw question about a raw context. Running the same command again resumes.
"""

from absl import app, flags

from official_bert.cli import fine_tuning_flags
from official_bert.cli.launch import launch
from official_bert.data import squad
from official_bert.tasks import experiment

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("train_file", None,
                      "SQuAD JSON file for training, e.g. train-v1.1.json.")
  flags.DEFINE_string("predict_file", None,
                      "SQuAD JSON file whose questions are answered, e.g. dev-v1.1.json; scored "
                      "into eval_results.txt when it holds answers.")
  flags.DEFINE_integer("doc_stride", 128,
                       "A context too long for one window is split into windows whose starts are "
                       "this many WordPieces apart.")
  flags.DEFINE_integer("max_query_length", 64,
                       "Questions longer than this many WordPieces are cut to it.")
  flags.DEFINE_integer("n_best_size", 20,
                       "Candidate answers kept per question (nbest_predictions.json).")
  flags.DEFINE_integer("max_answer_length", 30,
                       "The longest answer predicted, in WordPieces; start and end are "
                       "predicted separately, so longer spans are ruled out here.")
  flags.DEFINE_bool("verbose_logging", False,
                    "Log the first windows' tokens and maps and every question's answer.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "SQuAD v2.0: some questions have no answer in their context.")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "SQuAD v2.0: predict no answer when the null score minus the best span's "
                     "score is above this.")
  flags.DEFINE_enum("bad_answer_policy", "skip", squad.BAD_ANSWER_POLICIES,
                    "A training answer whose text is not at its answer_start: skip it (counted and "
                    "logged by question id, as the original) or stop with an error listing them.")
  fine_tuning_flags.define_fine_tuning_flags()
  FLAGS.set_default("max_seq_length", 384)


def main():
  if FLAGS.do_eval:
    raise app.UsageError("run_squad.py has no --do_eval: --do_predict answers --predict_file and "
                         "scores it when the file holds answers.")
  fine_tuning_flags.run_task_from_flags(task_config_from_flags())


def task_config_from_flags():
  """The task's node of the run's config, from the parsed flags."""
  return experiment.SquadConfig(
      **fine_tuning_flags.task_args_from_flags(), train_file=FLAGS.train_file,
      predict_file=FLAGS.predict_file, doc_stride=FLAGS.doc_stride,
      max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
      max_answer_length=FLAGS.max_answer_length,
      version_2_with_negative=FLAGS.version_2_with_negative,
      null_score_diff_threshold=FLAGS.null_score_diff_threshold,
      verbose_logging=FLAGS.verbose_logging, bad_answer_policy=FLAGS.bad_answer_policy)


def run():
  """The `bert-run-squad` command (and `python run_squad.py`)."""
  define_flags()
  launch(main, fine_tuning_flags.REQUIRED_FLAGS,
         inputs=fine_tuning_flags.INPUT_FLAGS + ["train_file", "predict_file"],
         outputs=fine_tuning_flags.OUTPUT_FLAGS,
         output_files=fine_tuning_flags.output_file_flags)


if __name__ == "__main__":
  run()
