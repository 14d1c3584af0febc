"""Pre-trains BERT (masked LM + next sentence) on `create_pretraining_data.py` output.

The original flags keep their names and meaning, so the original README's command runs unchanged:

    python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord \
      --output_dir=/tmp/pretraining_output --do_train=True --do_eval=True \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --train_batch_size=32 \
      --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=20 \
      --num_warmup_steps=10 --learning_rate=2e-5

Running the same command again resumes from the newest checkpoint in `--output_dir`. The engine
flags (`--distribution_strategy`, `--dtype`, `--enable_xla`, ...) choose how it runs.
"""

from absl import flags

from official_bert.cli import engine_flags, fine_tuning_flags
from official_bert.cli.launch import launch
from official_bert.tasks import driver, experiment
from official_bert.tasks.base import Modes

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the model to train.")
  flags.DEFINE_string("input_file", None, "Input TFRecord files: comma-separated names or globs.")
  flags.DEFINE_string("output_dir", None, "Where checkpoints, eval_results.txt and the export go.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial encoder weights: an original TF1 checkpoint or a model folder.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked LM predictions per sequence.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to run evaluation on the input files.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for evaluation.")
  flags.DEFINE_float("learning_rate", 5e-5, "The peak learning rate for Adam.")
  flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
  flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
  flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of evaluation steps.")
  flags.DEFINE_bool("dynamic_masking", False,
                    "Draw new masks for every batch (needs --vocab_file) instead of the stored "
                    "ones.")
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary: for --dynamic_masking, and copied into the export.")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens masked by --dynamic_masking.")
  flags.DEFINE_bool("do_whole_word_mask", False, "--dynamic_masking masks whole words.")
  flags.DEFINE_bool("export_tf1", False,
                    "Also export the original TF1 checkpoint format (bert_model.ckpt).")
  engine_flags.define_engine_flags()
  engine_flags.define_tpu_flags()
  fine_tuning_flags.define_output_folder_flags()


def experiment_config_from_flags():
  """The run's `ExperimentConfig`: the flags mapped onto the tree."""
  return experiment.ExperimentConfig(
      task=experiment.PretrainingConfig(
          input_file=FLAGS.input_file, vocab_file=FLAGS.vocab_file,
          max_seq_length=FLAGS.max_seq_length,
          max_predictions_per_seq=FLAGS.max_predictions_per_seq,
          max_eval_steps=FLAGS.max_eval_steps, dynamic_masking=FLAGS.dynamic_masking,
          masked_lm_prob=FLAGS.masked_lm_prob, do_whole_word_mask=FLAGS.do_whole_word_mask,
          export_tf1=FLAGS.export_tf1),
      trainer=engine_flags.trainer_config_from_flags(
          train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
          num_train_steps=FLAGS.num_train_steps,
          save_checkpoints_steps=FLAGS.save_checkpoints_steps,
          optimizer={"learning_rate": FLAGS.learning_rate,
                     "num_warmup_steps": FLAGS.num_warmup_steps}),
      runtime=engine_flags.runtime_config_from_flags(),
      model=fine_tuning_flags.model_config_from_flags(), output_dir=FLAGS.output_dir,
      init_checkpoint=FLAGS.init_checkpoint, overwrite_output_dir=FLAGS.overwrite_output_dir)


def main():
  driver.run_experiment(experiment_config_from_flags(),
                        Modes(train=FLAGS.do_train, eval=FLAGS.do_eval))


def run():
  """The `bert-run-pretraining` command (and `python run_pretraining.py`)."""
  define_flags()
  launch(main, ["bert_config_file", "input_file", "output_dir"],
         inputs=["bert_config_file", "input_file", "init_checkpoint", "vocab_file"],
         outputs=["output_dir"])


if __name__ == "__main__":
  run()
