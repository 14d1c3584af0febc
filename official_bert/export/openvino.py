"""OpenVINO exports: an IR folder (`model.xml`, `model.bin`), token ids in, in float32 or int8.

The folder holds OpenVINO's intermediate representation of the model's `serve_token_ids` (the
inputs and outputs of the ONNX export, `onnx.py`), converted by OpenVINO's TensorFlow frontend
from the same traced function, and this package's mark. Its layout is the one
OpenVINO Model Server serves (`<model_base_path>/<version>/model.xml`). A client tokenizes with
the package, as for ONNX, and runs it with OpenVINO:

    import openvino
    compiled = openvino.Core().compile_model("/tmp/mrpc_openvino/1/model.xml", "CPU")
    logits = compiled({"input_word_ids": ids, "input_mask": mask,
                       "input_type_ids": type_ids})["logits"]

`precision="int8"` is static int8: NNCF's post-training quantization (`nncf.quantize` with
`ModelType.TRANSFORMER`: int8 weights and activations of the matrix products, with
SmoothQuant), its activation ranges measured on calibration examples (`calibration.py`). It is
the fastest int8 of the candidates measured (`benchmarks/serving_throughput.py --formats`), and
keeps the dev accuracy of float32 within half a point (`benchmarks/int8_accuracy.py`).

A float32 folder stores float32 weights; OpenVINO's CPU plugin computes it in bfloat16 on CPUs
with AMX unless a client asks for `INFERENCE_PRECISION_HINT: "f32"`.
"""

import contextlib
import logging as std_logging
import os
import sys
import tempfile

from absl import logging
import tensorflow as tf

from official_bert.export import archive, calibration, formats

FILES = ("model.xml", "model.bin")
MARK_FORMAT = "official_bert OpenVINO"


def check_kind(kind):
  """Refuses a kind without a `serve_token_ids` signature (every model kind has one)."""
  if kind not in formats.TOKEN_ID_KINDS:
    raise formats.FormatError(f"--format=openvino has no signature for models of kind "
                              f"{kind!r}; the kinds are {', '.join(formats.TOKEN_ID_KINDS)}.")


def convert(model, info, *, precision="float32", examples=None):
  """The `openvino.Model` of a model's token-id signature.

  Args:
    model: the model (any dtype and kernels: its portable copy is converted).
    info: its `checkpoints.ModelInfo`.
    precision: `float32` or `int8`.
    examples: for int8, the calibration examples (`calibration.read_file`).
  """
  import nncf  # pylint: disable=import-outside-toplevel
  import openvino  # pylint: disable=import-outside-toplevel

  check_kind(info.kind)
  if precision == "int8" and not examples:
    raise calibration.CalibrationError("--precision=int8 for --format=openvino calibrates on "
                                       "examples: give --calibration_file.")
  # OpenVINO's TensorFlow frontend converts the traced function itself (the ONNX export's):
  # the way through an ONNX file (tf2onnx) needs many times the weights' size in memory.
  function = formats.token_id_function(model, info)
  converted = openvino.convert_model(function.get_concrete_function())
  if precision == "int8":
    logging.info("Quantizing to int8, calibrated on %d examples.", len(examples))
    # NNCF draws its progress bars on stdout, which is the caller's (a tool's output, a
    # program's JSON): they go to stderr, with the logs.
    with _nncf_errors_only(), contextlib.redirect_stdout(sys.stderr):
      converted = nncf.quantize(converted, nncf.Dataset(examples),
                                model_type=nncf.ModelType.TRANSFORMER, subset_size=len(examples))
  return converted


@contextlib.contextmanager
def _nncf_errors_only():
  """NNCF logs each statistic it collects at INFO: its logger says errors only while it
  quantizes, and is put back after. Not `nncf.set_log_level`, which also sets the level of every
  handler on that logger for the rest of the process, the caller's handlers included."""
  logger = std_logging.getLogger("nncf")
  level = logger.level
  logger.setLevel(std_logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


def export(model, info, path, *, max_seq_length, do_lower_case=None, precision="float32",
           examples=None, overwrite=False):
  """Writes the IR folder of `convert` to `path` whole (`do_lower_case` is the client's
  tokenizer's, recorded in the mark).

  Returns:
    `path`.
  """
  import openvino  # pylint: disable=import-outside-toplevel

  converted = convert(model, info, precision=precision, examples=examples)

  def fill(staging):
    tf.io.gfile.makedirs(staging)
    # OpenVINO writes local files only; they are copied through tf.io.gfile (any file system).
    with tempfile.TemporaryDirectory() as workdir:
      # Float32 weights as trained: OpenVINO would store them in float16 by default.
      openvino.save_model(converted, os.path.join(workdir, FILES[0]), compress_to_fp16=False)
      for name in FILES:
        tf.io.gfile.copy(os.path.join(workdir, name), os.path.join(staging, name))

  mark = {"format": MARK_FORMAT, "kind": info.kind, "max_seq_length": max_seq_length,
          "do_lower_case": do_lower_case, "precision": precision}
  return archive.write_folder(path, fill, mark, overwrite, what="the OpenVINO model")


def read_mark(path):
  """The mark of an OpenVINO export folder of this package (a dict), or None."""
  mark = archive.read_mark(path)
  return mark if mark and mark.get("format") == MARK_FORMAT else None

