"""One model folder, four serving formats: SavedModel, LiteRT (`.tflite`), ONNX (`.onnx`) and
OpenVINO (an IR folder).

`export_model_dir_as(model_dir, path, format=...)` is the library side of
`export_saved_model.py --format`. A SavedModel (`saved_model.py`) and an OpenVINO IR
(`openvino.py`) are folders, written as `archive.write_folder` writes them; LiteRT and ONNX
exports are one file each. Each is written whole or not at all and carries a mark of this
package (a file's metadata, a folder's `official_bert_export.json`): an existing file or folder
without the mark (someone else's model, or anything else) is never replaced, and one with it only
under `overwrite`.

What each format can express:

  litert   raw text in, the tokenizer inside (`litert.py`): the classifier (`text`, or `text_a`
           and `text_b` for a sentence-pair model), the encoder (`text`; `serve_text_pair`) and
           the token classifier, each with the outputs of its SavedModel's raw-text signature.
  onnx     token ids in (`onnx.py`): every kind, with the outputs of its `serve_token_ids`.
  openvino the same as ONNX, as OpenVINO's IR (`openvino.py`).

int8 (`precision="int8"`) quantizes the matrix products. LiteRT and ONNX quantize dynamically
(activations at each call, no calibration); OpenVINO statically, calibrated on examples
(`calibration.py`), which serves fastest.

The new runtimes are optional: `pip install "official_bert[litert]"`, `"official_bert[onnx]"`
or `"official_bert[openvino]"`; an export names the extra it needs before any work.

Example:

>>> FORMATS
('saved_model', 'litert', 'onnx', 'openvino')
>>> file_extension("litert")
'.tflite'
"""

import importlib.util
import os

import tensorflow as tf

from official_bert import checkpoints, tokenization
from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.export import archive, precision, signatures
from official_bert.export import calibration as calibration_lib
from official_bert.models import (
  BertClassifier,
  BertMultipleChoice,
  BertPretrainer,
  BertSpanLabeler,
  BertTokenClassifier,
)
from official_bert.networks import BertEncoder

FORMATS = ("saved_model", "litert", "onnx", "openvino")
# The formats written as a folder; the others are one file.
FOLDER_FORMATS = ("saved_model", "openvino")
# The precisions of the one-file formats; int8 quantizes the weights of the matrix products.
PRECISIONS = ("float32", "int8")
# The modules an export to a format imports, and the extra that installs them.
_REQUIREMENTS = {"litert": (("ai_edge_litert",), "litert"),
                 "onnx": (("tf2onnx", "onnx"), "onnx"),
                 "openvino": (("openvino", "nncf"), "openvino")}
_EXTENSIONS = {"litert": ".tflite", "onnx": ".onnx"}
# The kinds whose `serve_token_ids` `token_id_outputs` gives.
TOKEN_ID_KINDS = (BertClassifier.kind, BertTokenClassifier.kind, BertSpanLabeler.kind,
                  BertMultipleChoice.kind, BertEncoder.kind, BertPretrainer.kind)
# The metadata key of the mark an export of this package carries.
MARK = "official_bert"


class FormatError(UserError):
  """The format cannot be written here, or cannot express the model's signatures."""


class ExportFileError(UserError, FileExistsError):
  """The output file is taken: someone else's file, or an export kept without `overwrite`."""


def check_format(format):  # pylint: disable=redefined-builtin
  """Refuses a format that is unknown or that the installed packages cannot write.

  Args:
    format: one of `FORMATS`.

  Raises:
    FormatError: one line naming the extra to install.
  """
  if format not in FORMATS:
    raise FormatError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}.")
  modules, extra = _REQUIREMENTS.get(format, ((), None))
  missing = [name for name in modules if importlib.util.find_spec(name) is None]
  if missing:
    raise FormatError(f"--format={format} needs {', '.join(missing)}, which is not installed: "
                      f"pip install \"official_bert[{extra}]\".")


def file_extension(format):  # pylint: disable=redefined-builtin
  """The file name ending of a one-file format (`.tflite`, `.onnx`)."""
  return _EXTENSIONS[format]


def check_output_file(path, format, overwrite, is_ours):  # pylint: disable=redefined-builtin
  """Refuses an output file that an export may not write.

  Args:
    path: the `.tflite` or `.onnx` file to write.
    format: `litert` or `onnx`.
    overwrite: replace an earlier export of this package at `path`.
    is_ours: `is_ours(data)` tells whether a file's bytes are an export of this package.

  Raises:
    ExportFileError: `path` does not end in the format's extension, is a folder, or holds a file
      that is no export of ours, or one that is and `overwrite` is False.
  """
  path = os.fspath(path)
  extension = file_extension(format)
  if not path.endswith(extension):
    raise ExportFileError(f"export_dir {path} must name the {extension} file to write for "
                          f"--format={format} (end it in {extension}).")
  if not tf.io.gfile.exists(path):
    return
  if tf.io.gfile.isdir(path):
    raise ExportFileError(f"export_dir {path} is a folder; --format={format} writes one "
                          f"{extension} file. Choose another path.")
  with tf.io.gfile.GFile(path, "rb") as f:
    ours = is_ours(f.read())
  if not ours:
    raise ExportFileError(f"export_dir {path} exists and was not written by this package; it is "
                          "never replaced. Choose another path.")
  if not overwrite:
    raise ExportFileError(f"export_dir {path} holds an earlier export; pass overwrite=True "
                          "(--overwrite) to replace it, or choose another path.")


def write_file(path, data):
  """Writes `data` (bytes) to `path` whole: under a temporary name, then renamed.

  Args:
    path: the file to write (local or any `tf.io.gfile` scheme).
    data: its bytes.
  """
  path = os.fspath(path)
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  try:
    with file_io.atomic_write(path, "wb") as f:
      f.write(data)
  except (OSError, tf.errors.OpError) as error:
    file_io.raise_if_disk_full(error, f"writing {path} (nothing of it is kept)")
    raise
  return path


def portable_model(model):
  """`model` in float32 on the stock kernels: plain TensorFlow ops that every converter knows.

  The fused CPU forms (`cpu_xla`, `cpu_onednn`) are shaped for TensorFlow's own compilers; a
  LiteRT or ONNX converter sees through none of them, so the exports are built on `stock`.

  Args:
    model: an instance of a registered model class, trained in any dtype on any kernels.
  """
  return precision.with_dtype(model, "float32", kernels="stock")


def token_id_outputs(model, info):
  """The function of a kind's `serve_token_ids` outputs, on the encoder inputs.

  Args:
    model: the (portable) model.
    info: its `checkpoints.ModelInfo`.

  Returns:
    `outputs(inputs)`: the encoder's input dict -> the signature's output dict.
  """
  # Class names as text: the label names, else the ids (as the SavedModel's `label` gives them).
  labels = info.labels or [str(i) for i in range(getattr(model, "num_classes", 0))]
  if info.kind == BertClassifier.kind:
    if info.is_regression:
      return lambda inputs: signatures.regression_outputs(model(inputs, training=False)["logits"])
    return lambda inputs: signatures.class_outputs(model(inputs, training=False)["logits"],
                                                   labels)
  if info.kind == BertTokenClassifier.kind:
    return lambda inputs: signatures.class_outputs(model(inputs, training=False)["logits"],
                                                   labels)
  if info.kind == BertSpanLabeler.kind:
    def spans(inputs):
      outputs = model(inputs, training=False)
      return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}
    return spans
  if info.kind == BertMultipleChoice.kind:
    def choices(inputs):
      logits = tf.cast(model(inputs, training=False)["logits"], tf.float32)
      return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
              "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}
    return choices
  if info.kind in (BertEncoder.kind, BertPretrainer.kind):
    encoder = model if isinstance(model, BertEncoder) else model.encoder
    return lambda inputs: signatures.encoder_outputs(encoder(inputs, training=False))
  raise FormatError(f"No serving signatures for models of kind {info.kind!r}.")


def token_id_function(model, info):
  """The kind's `serve_token_ids` as a `tf.function` with its input signature: the graph that
  the ONNX and OpenVINO converters read.

  Args:
    model: the model (any dtype and kernels: its portable copy is traced).
    info: its `checkpoints.ModelInfo`.
  """
  model = portable_model(model)
  outputs = token_id_outputs(model, info)
  shape = (None, model.num_choices, None) if info.kind == BertMultipleChoice.kind else (None, None)
  specs = signatures.token_id_specs(shape)

  def serve_token_ids(input_word_ids, input_mask, input_type_ids):
    return outputs({"input_word_ids": input_word_ids, "input_mask": input_mask,
                    "input_type_ids": input_type_ids})

  return tf.function(serve_token_ids, input_signature=specs, autograph=False)


def _writer(format):  # pylint: disable=redefined-builtin
  """The module that writes `format`, once its packages are known to be installed."""
  check_format(format)
  if format == "saved_model":
    raise FormatError("export_task_model_as writes litert, onnx or openvino; a SavedModel is "
                      "export_task_model's.")
  # Imported only now: each needs its format's optional packages.
  from official_bert.export import litert, onnx, openvino  # pylint: disable=import-outside-toplevel
  return {"litert": litert, "onnx": onnx, "openvino": openvino}[format]


def _check_output(path, format, overwrite, writer):  # pylint: disable=redefined-builtin
  """`check_output_file` for a one-file format, `archive.check_export_dir` for a folder."""
  if format in FOLDER_FORMATS:
    archive.check_export_dir(path, overwrite)
  else:
    check_output_file(path, format, overwrite, writer.is_ours)


def _check_calibration(format, precision, calibration):  # pylint: disable=redefined-builtin
  """Refuses calibration examples where the export does not calibrate."""
  if calibration is not None and (format, precision) != ("openvino", "int8"):
    raise FormatError("--calibration_file is for the openvino format in int8 precision (static "
                      "int8); the other int8 exports quantize dynamically, without calibration.")


def check_export_settings(format, precision, *, has_export_dir, calibration_file=None):  # pylint: disable=redefined-builtin
  """Refuses an export format or precision that is unknown or does not go together.

  The settings of a run's export (`ExperimentConfig.export_format`, `export_precision`; the
  scripts' `--export_format`, `--export_precision`), checked with the config.

  Args:
    format: one of `FORMATS`.
    precision: one of `PRECISIONS`; `int8` is for the formats other than `saved_model`.
    has_export_dir: whether the run exports at all.
    calibration_file: the examples of OpenVINO's int8, when named.

  Raises:
    FormatError: one line naming the setting.
  """
  if format not in FORMATS:
    raise FormatError(f"--export_format must be one of {', '.join(FORMATS)}, got {format!r}.")
  if precision not in PRECISIONS:
    raise FormatError(f"--export_precision must be one of {', '.join(PRECISIONS)}, got "
                      f"{precision!r}.")
  if format == "saved_model" and precision != "float32":
    raise FormatError("--export_precision=int8 is for --export_format=litert|onnx|openvino; a "
                      "SavedModel is exported in the dtype the model was trained in.")
  if not has_export_dir and (format, precision) != ("saved_model", "float32"):
    raise FormatError("--export_format and --export_precision need --export_dir: the file to "
                      "export to.")
  _check_calibration(format, precision, calibration_file)


def check_export_target(path, format, precision, calibration_file=None):  # pylint: disable=redefined-builtin
  """Refuses, before any work, an export of a run that could not be written.

  Args:
    path: the `.tflite` or `.onnx` file, or the OpenVINO folder, a run exports to (a SavedModel
      folder is checked by `archive.check_export_dir`).
    format: `litert`, `onnx` or `openvino`.
    precision: one of `PRECISIONS`.
    calibration_file: the examples of OpenVINO's int8, when named.

  Raises:
    FormatError: the format's packages are missing.
    ExportFileError, archive.ExportDirError: the file or folder is taken (an earlier export of
      this package is replaced).
    calibration_lib.CalibrationError: the calibration file is missing or empty.
  """
  check_precision(precision)
  _check_calibration(format, precision, calibration_file)
  writer = _writer(format)
  _check_output(path, format, True, writer)
  if calibration_file is not None:
    calibration_lib.check_file(calibration_file, kind=None)


def check_kind(format, kind, calibration_file=None):  # pylint: disable=redefined-builtin
  """Refuses a model kind whose signatures `format` cannot express, or whose calibration
  examples the file cannot give.

  Raises:
    FormatError, calibration_lib.CalibrationError: one line naming the kind.
  """
  _writer(format).check_kind(kind)
  if calibration_file is not None:
    calibration_lib.check_file(calibration_file, kind)


def check_precision(precision):
  """Refuses a precision that is not one of `PRECISIONS`."""
  if precision not in PRECISIONS:
    raise FormatError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")


def export_task_model_as(model, info, path, *, format, max_seq_length=None,  # pylint: disable=redefined-builtin
                         do_lower_case=None, overwrite=False, precision="float32",
                         calibration=None):
  """Writes a LiteRT, ONNX or OpenVINO export of an in-memory model (see the module docstring).

  Args:
    model: the model `checkpoints.load_model` returned, or one in memory.
    info: its `checkpoints.ModelInfo`.
    path: the `.tflite` or `.onnx` file, or the OpenVINO folder, to write.
    format: `litert`, `onnx` or `openvino`.
    max_seq_length: the packed length (LiteRT) or the longest ids (ONNX, OpenVINO); default the
      info's, else 128.
    do_lower_case: overrides `info.do_lower_case` (LiteRT's tokenizer needs one of them).
    overwrite: replace an earlier export of this package at `path`.
    precision: `float32`, or `int8`: for LiteRT and ONNX dynamic int8 (the weights of the matrix
      products in int8, activations quantized per call), for OpenVINO static int8 calibrated on
      `calibration`.
    calibration: OpenVINO int8's examples: a file (`calibration.read_file`) or a list of input
      dicts (`calibration.from_dataset`).

  Returns:
    `path`.
  """
  check_precision(precision)
  _check_calibration(format, precision, calibration)
  writer = _writer(format)
  writer.check_kind(info.kind)
  _check_output(path, format, overwrite, writer)
  max_seq_length = max_seq_length or info.max_seq_length or 128
  if do_lower_case is None:
    do_lower_case = info.do_lower_case
  if format != "openvino":
    return writer.export(model, info, path, max_seq_length=max_seq_length,
                         do_lower_case=do_lower_case, precision=precision)
  examples = calibration
  if isinstance(calibration, (str, os.PathLike)):
    examples = _calibration_examples(calibration, model, info, max_seq_length, do_lower_case)
  return writer.export(model, info, path, max_seq_length=max_seq_length,
                       do_lower_case=do_lower_case, precision=precision, examples=examples,
                       overwrite=overwrite)


def _calibration_examples(path, model, info, max_seq_length, do_lower_case):
  """The examples of a calibration file, tokenized as the model folder's text."""
  return calibration_lib.read_file(path, info.kind, vocab_file=info.vocab_file,
                               do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                               num_choices=getattr(model, "num_choices", None))


def default_calibration_file(model_dir):
  """The dev split's features that a fine-tuning run wrote beside its model folder
  (`<model_dir>/eval.tf_record`), or None when there are none."""
  path = os.path.join(os.fspath(model_dir), "eval.tf_record")
  return path if tf.io.gfile.exists(path) else None


def export_model_dir_as(model_dir, path, *, format, max_seq_length=None,  # pylint: disable=redefined-builtin
                        do_lower_case=None, overwrite=False, precision="float32",
                        calibration=None):
  """Exports a model folder as a LiteRT or ONNX file or an OpenVINO folder:
  `export_saved_model.py --format`.

  Everything that can be checked without the model is checked first: the format's packages,
  the output, and the calibration file.

  Args:
    model_dir: a model folder, or an original TF1 or Hugging Face folder (as an encoder).
    path: the `.tflite` or `.onnx` file, or the OpenVINO folder, to write.
    format: `litert`, `onnx` or `openvino`.
    max_seq_length: overrides the folder's `max_seq_length` (default 128 when it has none).
    do_lower_case: overrides the folder's `do_lower_case`.
    overwrite: replace an earlier export of this package at `path`.
    precision: `float32` or `int8` (see `export_task_model_as`).
    calibration: OpenVINO int8's examples (a file or a list, see `export_task_model_as`);
      default the dev split's features of the fine-tuning run that wrote `model_dir`
      (`eval.tf_record`).

  Returns:
    `path`.

  Example:

    export_model_dir_as("/tmp/mrpc_output", "/tmp/mrpc.tflite", format="litert")
    export_model_dir_as("/tmp/mrpc_output", "/tmp/mrpc_openvino/1", format="openvino",
                        precision="int8", calibration="/tmp/mrpc_calibration.txt")
  """
  check_precision(precision)
  _check_calibration(format, precision, calibration)
  if (format, precision) == ("openvino", "int8") and calibration is None:
    calibration = default_calibration_file(model_dir)
    if calibration is None:
      raise calibration_lib.CalibrationError(
          f"--precision=int8 for --format=openvino calibrates on examples, and {model_dir} holds "
          "no eval.tf_record (the dev split's features of a fine-tuning run): give "
          "--calibration_file.")
  writer = _writer(format)
  _check_output(path, format, overwrite, writer)
  if isinstance(calibration, (str, os.PathLike)):
    calibration_lib.check_file(calibration, kind=None)
  model, info = checkpoints.load_model(model_dir, dtype="float32")
  if do_lower_case is None:
    do_lower_case = info.do_lower_case
  if do_lower_case is not None:
    tokenization.validate_case_matches_checkpoint(do_lower_case, os.fspath(model_dir))
  return export_task_model_as(model, info, path, format=format, max_seq_length=max_seq_length,
                              do_lower_case=do_lower_case, overwrite=overwrite,
                              precision=precision, calibration=calibration)
