"""The OpenVINO side of `serving_throughput.py --formats=openvino`: our classifier in OpenVINO.

Run with the Python of an environment that has `openvino` and `nncf` (`--openvino_python`; neither
is a dependency of this package); it imports neither TensorFlow nor this package. It reads a job
(JSON) from stdin and writes one JSON object to stdout. From the float32 ONNX file of the
classifier on token ids that `format_serving.py` writes (`official_bert.export.onnx`):

* `classifier OpenVINO`, `float32`: OpenVINO's CPU plugin, `INFERENCE_PRECISION_HINT=f32`;
* `bfloat16`: the same model with the plugin's bfloat16 inference precision (its default on CPUs
  with AMX);
* `int8`: NNCF's post-training quantization (`nncf.quantize`, `ModelType.TRANSFORMER`: int8
  weights and activations of the matrix products, with SmoothQuant), calibrated on the job's
  batches; the rest in the plugin's default precision.

Each model is reshaped to each cell's static shape `[batch, seq]` and compiled with the `LATENCY`
performance hint, as OpenVINO's documentation advises for a server that answers one request at a
time; each cell is timed by `serving_common.time_calls` like every other row, and its logits are
compared with the job's float32 reference on the same ids.
"""

import json
import os
import sys
import time

import nncf
import numpy as np
import openvino
from serving_common import time_calls, token_id_inputs

_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _compiled(core, model, batch, seq, hint):
  model = model.clone()
  model.reshape({name: [batch, seq] for name in _NAMES})
  config = {"PERFORMANCE_HINT": "LATENCY"}
  if hint:
    config["INFERENCE_PRECISION_HINT"] = hint
  return core.compile_model(model, "CPU", config).create_infer_request()


def main():
  job = json.load(sys.stdin)
  # NNCF draws progress bars on stdout; the answer alone goes there, the rest to stderr.
  answer = os.fdopen(os.dup(sys.stdout.fileno()), "w")
  os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
  core = openvino.Core()
  float32 = core.read_model(job["onnx"])
  with np.load(job["calibration"]) as batches:
    calibration = [{name: batches[f"{name}_{i}"] for name in _NAMES}
                   for i in range(len(batches.files) // len(_NAMES))]
  start = time.perf_counter()
  int8 = nncf.quantize(float32, nncf.Dataset(calibration), model_type=nncf.ModelType.TRANSFORMER,
                       subset_size=sum(len(b["input_mask"]) for b in calibration))
  quantize_s = time.perf_counter() - start
  check = {name: np.asarray(value, np.int32) for name, value in job["check"].items()}
  reference = np.asarray(job["reference"], np.float32)
  cells = []
  for precision, model, hint in (("float32", float32, "f32"), ("bfloat16", float32, "bf16"),
                                 ("int8", int8, None)):
    batch, seq = check["input_mask"].shape
    error = float(np.abs(_compiled(core, model, batch, seq, hint).infer(check)["logits"]
                         - reference).max())
    for cell in job["cells"]:
      request = _compiled(core, model, cell["batch"], cell["seq"], hint)
      inputs = token_id_inputs(cell["batch"], cell["seq"], job["vocab_size"])
      timed = time_calls(lambda r=request, x=inputs: r.infer(x), cell["batch"], job["seconds"],
                         job["calls"])
      cells.append(dict(cell, **timed, model="classifier OpenVINO", dtype=precision,
                        error=error))
  json.dump({"versions": {"openvino": openvino.__version__, "nncf": nncf.__version__},
             "threads": os.cpu_count(), "quantize_s": quantize_s, "cells": cells}, answer)
  answer.close()


if __name__ == "__main__":
  main()
