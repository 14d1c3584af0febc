"""Exports a fine-tuned (or pre-trained) BERT folder for serving: a SavedModel for TF Serving,
a LiteRT `.tflite` file that takes raw text, or an ONNX file or OpenVINO folder that take token
ids.

    python export_saved_model.py --model_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc_savedmodel/1
    python export_saved_model.py --model_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc_bf16/1 \
        --dtype=bfloat16
    python export_saved_model.py --model_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc.tflite \
        --format=litert
    python export_saved_model.py --model_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc.onnx \
        --format=onnx
    python export_saved_model.py --model_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc_openvino/1 \
        --format=openvino --precision=int8

`--model_dir` is a model folder: the `--output_dir` of a fine-tuning script, a converted or
pre-trained one (its `model.json` names the kind, which picks the signatures; a pre-trained one is
exported as a text encoder), or an original TF1 or Hugging Face folder with its `vocab.txt`. The
signatures of each task are listed in `official_bert/export/saved_model.py`; a client needs
TensorFlow and `import tensorflow_text` to run them. `--format=litert`, `onnx` and `openvino` need
the extras of the same names (`official_bert/export/formats.py` says what each format holds).
`--format=openvino --precision=int8` calibrates on `--calibration_file`, by default the dev
split's features that the fine-tuning run left in its output folder (`eval.tf_record`).
"""

from absl import flags

from official_bert import export
from official_bert.cli.launch import launch
from official_bert.common import paths

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags on absl's global `FLAGS`; `run()` calls it before parsing."""
  flags.DEFINE_string("model_dir", None,
                      "Model folder (with model.json), or an original TF1 or Hugging Face folder.")
  flags.DEFINE_string("export_dir", None, "The SavedModel or OpenVINO folder to write (TF Serving "
                      "and OpenVINO Model Server expect <model_base_path>/<version>), or the "
                      ".tflite / .onnx file of --format.")
  flags.DEFINE_enum("format", "saved_model", list(export.FORMATS),
                    "saved_model: a SavedModel folder (raw text, token ids, tf.Examples in); "
                    "litert: one .tflite file with the tokenizer inside (raw text in); onnx: one "
                    ".onnx file (token ids in); openvino: an OpenVINO IR folder (token ids in).")
  flags.DEFINE_enum("precision", "float32", list(export.PRECISIONS),
                    "For --format=litert|onnx|openvino: float32, or int8 (litert, onnx: dynamic, "
                    "int8 weights of the matrix products, activations quantized per call; "
                    "openvino: static, calibrated on --calibration_file, the fastest).")
  flags.DEFINE_string("calibration_file", None,
                      "For --format=openvino --precision=int8: the examples to calibrate on, a "
                      "TFRecord file of features (*.tf_record) or a text file (one example a "
                      "line, a pair's texts separated by a tab). Default: eval.tf_record in "
                      "--model_dir, which a fine-tuning run with --do_eval writes.")
  flags.DEFINE_integer("max_seq_length", None,
                       "Sequence length of the raw-text signatures. Default: the one of training, "
                       "or 128 for a pre-trained folder.")
  flags.DEFINE_bool("do_lower_case", None,
                    "Whether the model is uncased. Default: from model.json; required for a "
                    "pre-trained folder.")
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir.")
  flags.DEFINE_list("buckets", None,
                    "Sequence lengths a raw-text batch is padded to: the smallest that holds its "
                    "longest text (max_seq_length is always one). Default: 16, 32, 64, ... below "
                    "max_seq_length; 'none' pads every batch to max_seq_length.")
  flags.DEFINE_enum("dtype", "float32", list(export.SERVING_DTYPES),
                    "The dtype the SavedModel stores its weights in and computes in: bfloat16 "
                    "serves faster on CPUs with AMX or AVX512-BF16 (outputs stay float32).")
  flags.DEFINE_bool("jit_compile", None,
                    "Compile the model (not the tokenizer) with XLA inside the SavedModel. "
                    "Default: off for bfloat16 (XLA's CPU code has no AMX kernels) and for "
                    "float32 on Intel CPUs with VNNI, AVX512-BF16 or AMX (TensorFlow's oneDNN "
                    "kernels serve it faster), on for float32 on other CPUs.")


def _buckets(values):
  """The --buckets list as ints (None for the default, () for 'none')."""
  if values is None:
    return None
  if [value.lower() for value in values] == ["none"]:
    return ()
  try:
    return [int(value) for value in values]
  except ValueError:
    raise ValueError(f"--buckets takes whole numbers or 'none', got {','.join(values)}.") from None


def _check_paths():
  """`launch`'s checks of the paths, with --export_dir a file for the one-file formats."""
  outputs = {"export_dir": FLAGS.export_dir}
  paths.check_apart({"model_dir": FLAGS.model_dir, "calibration_file": FLAGS.calibration_file},
                    outputs)
  paths.check_writable("export_dir", FLAGS.export_dir,
                       is_file=FLAGS.format not in export.FOLDER_FORMATS)


def main():
  _check_paths()
  if FLAGS.format == "saved_model" and FLAGS.precision != "float32":
    raise export.FormatError("--precision is for --format=litert|onnx|openvino; a SavedModel "
                             "takes --dtype=float32|bfloat16.")
  if FLAGS.format != "saved_model":
    if FLAGS.dtype != "float32" or FLAGS.jit_compile is not None or FLAGS.buckets is not None:
      raise export.FormatError(f"--dtype, --jit_compile and --buckets are SavedModel settings; "
                               f"--format={FLAGS.format} exports float32 at max_seq_length.")
    export.export_model_dir_as(FLAGS.model_dir, FLAGS.export_dir, format=FLAGS.format,
                               max_seq_length=FLAGS.max_seq_length,
                               do_lower_case=FLAGS.do_lower_case, overwrite=FLAGS.overwrite,
                               precision=FLAGS.precision, calibration=FLAGS.calibration_file)
    return
  export.export_model_dir(FLAGS.model_dir, FLAGS.export_dir, max_seq_length=FLAGS.max_seq_length,
                          do_lower_case=FLAGS.do_lower_case, overwrite=FLAGS.overwrite,
                          buckets=_buckets(FLAGS.buckets), dtype=FLAGS.dtype,
                          jit_compile=FLAGS.jit_compile)


def run():
  """The `bert-export-saved-model` command (and `python export_saved_model.py`)."""
  define_flags()
  # The paths are checked in `main`: whether --export_dir is a folder or a file depends on --format.
  launch(main, ["model_dir", "export_dir"])


if __name__ == "__main__":
  run()
