"""The Hugging Face side of `serving_throughput.py --formats`: `BertModel` through ONNX Runtime.

Run with the Python of an environment that has `torch`, `transformers`, `onnx` and `onnxruntime`
(`--torch_python`); it imports neither TensorFlow nor this package. It reads a job (JSON) from
stdin, as `torch_serving.py` does (`{"names": true, ...}` answers the parameter names), and
writes one JSON object to stdout: the weights are loaded strictly, the model is exported by
`torch.onnx.export` and run by ONNX Runtime as its users run it:

* `HF ORT`, `float32`: the exported file;
* `HF ORT fused`: after ONNX Runtime's BERT fusions (`onnxruntime.transformers.optimizer`);
* `int8 dyn` of each: after `quantize_dynamic` (int8 weights), the recipe ONNX Runtime documents
  for BERT on CPUs.

Each is checked on fixed ids (`check`, float32: the caller compares it with its own encoder) and
timed per cell: batch 1 latency (p50, p99) and sequences per second at the larger batches.
"""

import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime
from serving_common import onnx_runtime_variants, time_calls
import torch
from torch_serving import job_model


class _ByName(torch.nn.Module):
  """`BertModel` called with its inputs by name (their positions differ between versions)."""

  def __init__(self, model):
    super().__init__()
    self.model = model

  def forward(self, input_ids, attention_mask, token_type_ids):
    outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids)
    return outputs.last_hidden_state, outputs.pooler_output


def export(model, path, seq):
  ids = torch.ones((1, seq), dtype=torch.int64)
  axes = {0: "batch", 1: "seq"}
  torch.onnx.export(_ByName(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                    input_names=["input_ids", "attention_mask", "token_type_ids"],
                    output_names=["last_hidden_state", "pooler_output"],
                    dynamic_axes={name: axes for name in ("input_ids", "attention_mask",
                                                          "token_type_ids")},
                    opset_version=17, dynamo=False)


def files(model, config, seq, workdir):
  float32 = os.path.join(workdir, "hf.onnx")
  export(model, float32, seq)
  variants = onnx_runtime_variants(float32, "bert", config["num_attention_heads"],
                                   config["hidden_size"])
  return {(f"HF ORT{variant}", precision): path
          for (variant, precision), path in variants.items()}


def inputs_of(ids):
  ids = np.asarray(ids, np.int64)
  return {"input_ids": ids, "attention_mask": np.ones_like(ids),
          "token_type_ids": np.zeros_like(ids)}


def timed_cell(session, cell, vocab_size, calls, seconds):
  ids = np.random.default_rng(0).integers(5, vocab_size, (cell["batch"], cell["seq"]))
  feed = inputs_of(ids)
  return dict(cell, **time_calls(lambda: session.run(["pooler_output"], feed), cell["batch"],
                                 seconds, calls))


def main():
  job, model = job_model()
  if model is None:
    return
  seq = max(cell["seq"] for cell in job["cells"])
  results = {"versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
             "cells": [], "check": {}}
  with tempfile.TemporaryDirectory() as workdir:
    for (model_name, precision), path in files(model, job["config"], seq, workdir).items():
      session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
      hidden, pooled = session.run(["last_hidden_state", "pooler_output"],
                                   inputs_of(job["check_ids"]))
      results["check"][f"{model_name} {precision}"] = {"sequence_output": hidden[0].tolist(),
                                     "pooled_output": pooled[0].tolist()}
      results["cells"] += [dict(timed_cell(session, cell, job["config"]["vocab_size"],
                                           job["calls"], job["seconds"]),
                                model=model_name, dtype=precision)
                           for cell in job["cells"]]
  json.dump(results, sys.stdout)


if __name__ == "__main__":
  main()
