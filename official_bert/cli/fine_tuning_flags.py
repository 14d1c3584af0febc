"""absl flags that every fine-tuning script shares (`run_classifier.py`, `run_squad.py`, ...).

The names, meanings and defaults are those of the original google-research/bert scripts; a script
whose original had other defaults changes them after defining the flags, e.g. for SQuAD
`flags.FLAGS.set_default("max_seq_length", 384)`. A script's shape:

    def define_flags():
      fine_tuning_flags.define_fine_tuning_flags()   # + the engine and TPU flags
      flags.DEFINE_string("data_dir", None, ...)     # the task's own flags

    def main():
      fine_tuning_flags.run_task_from_flags(
          MyTaskConfig(**fine_tuning_flags.task_args_from_flags(), data_dir=FLAGS.data_dir))

    def run():
      define_flags()
      launch(main, fine_tuning_flags.REQUIRED_FLAGS + ["data_dir"])

The flags map onto one `experiment.ExperimentConfig`: the task's node (`task_args_from_flags`
and the script's own flags), the trainer with its optimizer (`trainer_config_from_flags`), the
runtime (`engine_flags.runtime_config_from_flags`), the model (`--bert_config_file`) and the
paths.
"""

from absl import flags

from official_bert.cli import engine_flags
from official_bert.configs import BertConfig
from official_bert.export.formats import (
  FOLDER_FORMATS,
  FORMATS,
  PRECISIONS,
  check_export_settings,
)
from official_bert.tasks import driver, experiment
from official_bert.tasks.base import Modes

FLAGS = flags.FLAGS
REQUIRED_FLAGS = ["bert_config_file", "vocab_file", "output_dir"]
# The paths every fine-tuning script reads and writes; a script adds its data flags to INPUT_FLAGS
# (see `official_bert.common.paths`).
INPUT_FLAGS = ["bert_config_file", "vocab_file", "init_checkpoint", "calibration_file"]
OUTPUT_FLAGS = ["output_dir", "export_dir"]
SPLIT_FILE_FLAGS = ["data_dir", "train_file", "eval_file", "predict_file"]


def define_fine_tuning_flags():
  """Defines the shared fine-tuning flags, the engine flags and the original TPU flags."""
  flags.DEFINE_string("bert_config_file", None,
                      "The config json file corresponding to the pre-trained BERT model. This "
                      "specifies the model architecture.")
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_string("output_dir", None,
                      "The output directory where the model checkpoints, results and the "
                      "fine-tuned model will be written. A run with the same directory resumes.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model): an original "
                      "TF1 bert_model.ckpt, a model folder or a Hugging Face folder.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. Should be True for uncased models and "
                    "False for cased models.")
  flags.DEFINE_integer("max_seq_length", 128,
                       "The maximum total input sequence length after WordPiece tokenization. "
                       "Sequences longer than this will be truncated, and sequences shorter than "
                       "this will be padded.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
  flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test "
                    "set.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
  flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Proportion of training to perform linear learning rate warmup for. "
                     "E.g., 0.1 = 10% of training.")
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
  flags.DEFINE_string("export_dir", None,
                      "If set, export the fine-tuned model for serving here: a SavedModel "
                      "or OpenVINO folder, or the .tflite / .onnx file of --export_format.")
  flags.DEFINE_enum("export_format", "saved_model", list(FORMATS),
                    "What --export_dir gets: saved_model (a SavedModel folder: raw text, token "
                    "ids, tf.Examples in), litert (one .tflite file with the tokenizer inside, "
                    "raw text in; the litert extra), onnx (one .onnx file, token ids in; the "
                    "onnx extra) or openvino (an OpenVINO IR folder, token ids in; the openvino "
                    "extra), as export_saved_model.py --format writes them.")
  flags.DEFINE_enum("export_precision", "float32", list(PRECISIONS),
                    "For --export_format=litert|onnx|openvino: float32, or int8 (litert, onnx: "
                    "dynamic, int8 weights of the matrix products, activations quantized per "
                    "call; openvino: static, calibrated, the fastest).")
  flags.DEFINE_string("calibration_file", None,
                      "For --export_format=openvino --export_precision=int8: the examples to "
                      "calibrate on, a TFRecord file of features (*.tf_record) or a text file "
                      "(one example a line, a pair's texts separated by a tab). Default: the "
                      "first split the run evaluates (--do_eval), else predicts.")
  define_output_folder_flags()
  engine_flags.define_engine_flags()
  engine_flags.define_tpu_flags()


def define_output_folder_flags():
  """Defines `--overwrite_output_dir` and `--allow_unknown_config_keys` (fine-tuning and
  pre-training)."""
  flags.DEFINE_bool("overwrite_output_dir", False,
                    "Delete what earlier runs left in --output_dir (checkpoints, outputs) and "
                    "train afresh. Without it a run resumes, and stops when the folder was made "
                    "for another run (other task, data, model or schedule).")
  flags.DEFINE_bool("allow_unknown_config_keys", False,
                    "Ignore (with a warning) keys of --bert_config_file that are no BERT config "
                    "field, instead of stopping.")


def define_split_file_flags(*, data_dir, train_file, eval_file, predict_file):
  """Defines `--data_dir` and `--train_file`, `--eval_file`, `--predict_file`: where a task's
  splits are, a folder of conventionally named files or each file by name.

  Args:
    data_dir, train_file, eval_file, predict_file: the help of each flag (what the task's
      folder holds, which file it looks for).
  """
  flags.DEFINE_string("data_dir", None, data_dir)
  flags.DEFINE_string("train_file", None, train_file)
  flags.DEFINE_string("eval_file", None, eval_file)
  flags.DEFINE_string("predict_file", None, predict_file)


def split_files_from_flags():
  """The task arguments of `define_split_file_flags`' flags: `data_dir` and the three files."""
  return {name: FLAGS[name].value for name in SPLIT_FILE_FLAGS}


def trainer_config_from_flags():
  """The `TrainerConfig` of the batch size, epoch, checkpoint and engine flags, its optimizer's
  learning rate and warmup from theirs."""
  return engine_flags.trainer_config_from_flags(
      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size, num_train_epochs=FLAGS.num_train_epochs,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      optimizer={"learning_rate": FLAGS.learning_rate,
                 "warmup_proportion": FLAGS.warmup_proportion})


def model_config_from_flags():
  """The `BertConfig` of `--bert_config_file`."""
  return BertConfig.from_json_file(FLAGS.bert_config_file,
                                   allow_unknown_keys=FLAGS.allow_unknown_config_keys)


def experiment_config_from_flags(task_config):
  """The run's `ExperimentConfig` from the parsed flags.

  Args:
    task_config: the task's node (`experiment.TaskConfig` subclass), built by the script.
  """
  # The export flags first, before any file is read: they are the user's flags to fix.
  check_export_settings(FLAGS.export_format, FLAGS.export_precision,
                        has_export_dir=bool(FLAGS.export_dir),
                        calibration_file=FLAGS.calibration_file)
  return experiment.ExperimentConfig(
      task=task_config, trainer=trainer_config_from_flags(),
      runtime=engine_flags.runtime_config_from_flags(),
      model=model_config_from_flags(), output_dir=FLAGS.output_dir,
      init_checkpoint=FLAGS.init_checkpoint, export_dir=FLAGS.export_dir,
      overwrite_output_dir=FLAGS.overwrite_output_dir, export_format=FLAGS.export_format,
      export_precision=FLAGS.export_precision, calibration_file=FLAGS.calibration_file)


def output_file_flags():
  """The output flags that name a file: `--export_dir` of a one-file `--export_format`."""
  return ["export_dir"] if FLAGS.export_format not in FOLDER_FORMATS else []


def run_task_from_flags(task_config):
  """Runs the task of `task_config` through the one driver with the config and modes of the
  parsed flags."""
  return driver.run_experiment(experiment_config_from_flags(task_config), modes_from_flags())


def modes_from_flags():
  """The run's `Modes` from `--do_train`, `--do_eval` and `--do_predict`."""
  return Modes(train=FLAGS.do_train, eval=FLAGS.do_eval, predict=FLAGS.do_predict)


def task_args_from_flags():
  """The task-config fields every fine-tuning task shares: vocabulary, casing, length."""
  return dict(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
              max_seq_length=FLAGS.max_seq_length)
