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
import time

import numpy as np
from onnx import TensorProto
import onnxruntime
from onnxruntime import quantization
from onnxruntime.transformers import optimizer
import torch
from torch_serving import bert_model


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
  fused = os.path.join(workdir, "hf_fused.onnx")
  optimizer.optimize_model(float32, model_type="bert", num_heads=config["num_attention_heads"],
                           hidden_size=config["hidden_size"]).save_model_to_file(fused)
  result = {("HF ORT", "float32"): float32, ("HF ORT fused", "float32"): fused}
  for model_name, source in (("HF ORT", float32), ("HF ORT fused", fused)):
    result[model_name, "int8 dyn"] = source.replace(".onnx", "_int8_dynamic.onnx")
    quantization.quantize_dynamic(source, result[model_name, "int8 dyn"],
                                  weight_type=quantization.QuantType.QInt8,
                                  # The fused operators' outputs have no inferred type.
                                  extra_options={"DefaultTensorType": TensorProto.FLOAT})
  return result


def inputs_of(ids):
  ids = np.asarray(ids, np.int64)
  return {"input_ids": ids, "attention_mask": np.ones_like(ids),
          "token_type_ids": np.zeros_like(ids)}


def timed_cell(session, cell, vocab_size, calls, seconds):
  ids = np.random.default_rng(0).integers(5, vocab_size, (cell["batch"], cell["seq"]))
  feed = inputs_of(ids)

  def once():
    start = time.perf_counter()
    session.run(["pooler_output"], feed)
    return time.perf_counter() - start

  first = once()
  if cell["batch"] == 1:
    times = [once() for _ in range(calls)]
    return dict(cell, first=first, p50=float(np.percentile(times, 50)),
                p99=float(np.percentile(times, 99)), rate=1 / float(np.median(times)))
  elapsed, done = 0.0, 0
  while done < 2 or elapsed < seconds:
    elapsed += once()
    done += 1
  return dict(cell, first=first, rate=cell["batch"] * done / elapsed)


def main():
  job = json.load(sys.stdin)
  torch.manual_seed(0)
  model = bert_model(job["config"])
  state = model.state_dict()
  if job.get("names"):
    json.dump({name: list(value.shape) for name, value in state.items()}, sys.stdout)
    return
  with np.load(job["weights"]) as weights:
    loaded = {name: torch.from_numpy(weights[name].copy()) for name in weights.files}
  missing = [name for name in dict(model.named_parameters()) if name not in loaded]
  if missing:
    raise ValueError(f"No weights for {', '.join(missing)}.")
  model.load_state_dict({**state, **loaded}, strict=True)
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
