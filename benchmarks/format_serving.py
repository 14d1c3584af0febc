"""The LiteRT and ONNX rows of `serving_throughput.py`: our classifier in each format and precision.

Each candidate is the classifier on token ids (the tokenizer left out, as the ONNX Runtime rows of
the Hugging Face model take ids too), converted from the same Keras model on the stock kernels
(`official_bert.export.formats.portable_model`):

* `classifier LiteRT`: TensorFlow's converter, run by LiteRT's interpreter (`ai-edge-litert`)
  with its XNNPACK delegate, in `float32`; `int8 dyn` (the converter's `Optimize.DEFAULT`: int8
  weights, activations quantized on the fly per product); `int8` (also int8 activations,
  calibrated on `calibration` batches);
* `classifier ORT`: `official_bert.export.onnx`'s file in ONNX Runtime, in `float32`, and after
  ONNX Runtime's BERT graph fusions (`... fused`, `onnxruntime.transformers.optimizer`); each
  quantized by ONNX Runtime's tools: `int8 dyn` (`quantize_dynamic`, int8 weights) and, unfused,
  `int8 QDQ` (`quantize_static` of the matrix products, calibrated on the same batches).

`rows(...)` times each as `serving_throughput.py` times its cells (`serving_common.time_calls`):
batch 1 latency (p50, p99) and sequences per second at the larger batches.
"""

import functools
import os
import time

import numpy as np
from serving_common import onnx_runtime_variants, time_calls, token_id_inputs
import tensorflow as tf

from official_bert.export import formats, litert, onnx


def litert_files(model, seq, calibration):
  """Yields `(precision, .tflite bytes)` of the classifier on token ids `[batch, seq]`, one at a
  time: a BERT-Base conversion holds several copies of the weights while it runs."""
  model = formats.portable_model(model)
  specs = [tf.TensorSpec([None, seq], tf.int32, name=name)
           for name in ("input_word_ids", "input_mask", "input_type_ids")]

  def serve(input_word_ids, input_mask, input_type_ids):
    return {"logits": model({"input_word_ids": input_word_ids, "input_mask": input_mask,
                             "input_type_ids": input_type_ids}, training=False)["logits"]}

  function = litert.concrete_function("serving_default", serve, specs)
  for precision in ("float32", "int8 dyn", "int8"):
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
    if precision != "float32":
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if precision == "int8":
      # One sequence a call: the calibrator keeps every activation of a call.
      converter.representative_dataset = lambda: ({name: value[i:i + 1] for name, value in
                                                   batch.items()}
                                                  for batch in calibration
                                                  for i in range(len(batch["input_mask"])))
    yield precision, converter.convert()


def onnx_files(model, info, seq, calibration, workdir):
  """`{(variant, precision): .onnx path}` of the classifier on token ids (variant "" or
  " fused")."""
  from onnxruntime import quantization  # pylint: disable=import-outside-toplevel

  float32 = os.path.join(workdir, "classifier.onnx")
  formats.write_file(float32, onnx.convert(model, info, max_seq_length=seq))
  files = onnx_runtime_variants(float32, "bert_tf", model.config.num_attention_heads,
                                model.config.hidden_size)

  class Reader(quantization.CalibrationDataReader):
    def __init__(self):
      self.batches = iter(calibration)

    def get_next(self):
      return next(self.batches, None)

  files["", "int8 QDQ"] = os.path.join(workdir, "classifier_int8_static.onnx")
  quantization.quantize_static(float32, files["", "int8 QDQ"], Reader(),
                               quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                               op_types_to_quantize=["MatMul"],
                               activation_type=quantization.QuantType.QUInt8,
                               weight_type=quantization.QuantType.QInt8)
  return files


def openvino_job(model, info, seq, workdir, calibration_batches=2):
  """What `openvino_serving.py` reads of the classifier: the package's OpenVINO exports in
  float32 and in int8 (calibrated on the batches `rows` makes), the seconds each export took,
  and ids with the Keras model's float32 logits on them."""
  from official_bert.export import openvino  # pylint: disable=import-outside-toplevel

  examples = [{name: value[i:i + 1] for name, value in batch.items()}
              for batch in (token_id_inputs(4, seq, model.config.vocab_size, seed=100 + i)
                            for i in range(calibration_batches))
              for i in range(len(batch["input_mask"]))]
  folders, export_s = {}, {}
  for precision in ("float32", "int8"):
    start = time.perf_counter()
    folders[precision] = openvino.export(
        model, info, os.path.join(workdir, f"classifier-openvino-{precision}"),
        max_seq_length=seq, precision=precision,
        examples=examples if precision == "int8" else None)
    export_s[precision] = time.perf_counter() - start
  check = token_id_inputs(4, seq, model.config.vocab_size)
  return {"folders": folders, "export_s": export_s, "vocab_size": model.config.vocab_size,
          "check": {name: value.tolist() for name, value in check.items()},
          "reference": model(check, training=False)["logits"].numpy().tolist()}


def rows(model, info, seq, batches, calls, seconds, workdir, formats_timed=("litert", "onnx"),
         calibration_batches=2):
  """One row per (format, precision, batch): `{model, dtype, batch, rate, p50?, p99?, first,
  error}` (`error`: the largest difference of its logits from the Keras model's in float32).

  Args:
    model: a `BertClassifier`.
    info: its `checkpoints.ModelInfo`.
    seq: the sequence length.
    batches: the batch sizes (1 gives latency).
    calls: calls at batch 1.
    seconds: timed seconds per throughput cell.
    workdir: a folder for the ONNX files.
    formats_timed: `litert`, `onnx` or both.
    calibration_batches: batches of 4 random-id sequences that calibrate the static int8 models.
  """
  import onnxruntime  # pylint: disable=import-outside-toplevel

  calibration = [token_id_inputs(4, seq, model.config.vocab_size, seed=100 + i)
                 for i in range(calibration_batches)]
  results = []
  check = token_id_inputs(4, seq, model.config.vocab_size)
  reference = model(check, training=False)["logits"].numpy()
  litert_timed = litert_files(model, seq, calibration) if "litert" in formats_timed else ()
  for precision, content in litert_timed:
    runner = litert.load_interpreter(model_content=content,
                                     num_threads=os.cpu_count()).get_signature_runner()
    error = np.abs(runner(**check)["logits"] - reference).max()
    for batch in batches:
      inputs = token_id_inputs(batch, seq, model.config.vocab_size)
      results.append(dict(time_calls(functools.partial(runner, **inputs), batch, seconds, calls),
                          model="classifier LiteRT", dtype=precision, batch=batch,
                          error=float(error)))
    del runner, content  # before the next conversion
  onnx_timed = onnx_files(model, info, seq, calibration, workdir) if "onnx" in formats_timed else {}
  for (variant, precision), path in onnx_timed.items():
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    error = np.abs(session.run(["logits"], check)[0]
                   - reference).max()
    for batch in batches:
      inputs = token_id_inputs(batch, seq, model.config.vocab_size)
      results.append(dict(time_calls(functools.partial(session.run, ["logits"], inputs), batch,
                                     seconds, calls),
                          model=f"classifier ORT{variant}", dtype=precision, batch=batch,
                          error=float(error)))
  return results
