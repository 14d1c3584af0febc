"""The OpenVINO side of `serving_throughput.py --formats=openvino`: our classifier in OpenVINO.

Run with the Python of an environment that has `openvino` (`--openvino_python`, or this package's
own with its `[openvino]` extra); it imports neither TensorFlow nor this package. It reads a job
(JSON) from stdin and writes one JSON object to stdout. From the package's two OpenVINO exports
of the classifier on token ids that `format_serving.openvino_job` writes
(`official_bert.export.openvino`):

* `classifier OpenVINO`, `float32`: the float32 folder in OpenVINO's CPU plugin,
  `INFERENCE_PRECISION_HINT=f32`;
* `bfloat16`: the same folder at the plugin's bfloat16 inference precision (its default on CPUs
  with AMX);
* `int8`: the int8 folder (NNCF's static int8, calibrated by the export on the job's batches);
  the rest in the plugin's default precision.

Each model is reshaped to each cell's static shape `[batch, seq]` and compiled with the `LATENCY`
performance hint, as OpenVINO's documentation advises for a server that answers one request at a
time; each cell is timed by `serving_common.time_calls` like every other row, and its logits are
compared with the job's float32 reference on the same ids.
"""

import json
import os
import sys

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
  core = openvino.Core()
  folders = {precision: core.read_model(os.path.join(folder, "model.xml"))
             for precision, folder in job["folders"].items()}
  check = {name: np.asarray(value, np.int32) for name, value in job["check"].items()}
  reference = np.asarray(job["reference"], np.float32)
  cells = []
  for precision, model, hint in (("float32", folders["float32"], "f32"),
                                 ("bfloat16", folders["float32"], "bf16"),
                                 ("int8", folders["int8"], None)):
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
  json.dump({"versions": {"openvino": openvino.__version__}, "threads": os.cpu_count(),
             "cells": cells}, sys.stdout)


if __name__ == "__main__":
  main()
