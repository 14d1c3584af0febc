"""The PyTorch side of `serving_throughput.py`: Hugging Face `BertModel` on the same weights.

Run by `serving_throughput.py` with the Python of an environment that has `torch` and
`transformers` (`--torch_python`); it imports neither TensorFlow nor this package. It reads a job
(JSON) from stdin and writes one JSON object to stdout:

* `{"names": true, "config": {...}}`: the `BertModel`'s parameter names and shapes, so that the
  caller can map its weights onto them;
* `{"weights": "<file.npz>", "config": {...}, "cells": [...], ...}`: loads the weights (strictly:
  every name, every shape), checks them on fixed ids (`check`: the last layer and pooled output of
  the first row, which the caller compares with its own model), and times each cell, float32 or
  `torch.autocast("cpu", dtype=torch.bfloat16)`, eager or `torch.compile`, in sequences/s; plus
  the float32 and bfloat16 peaks of one 4096 x 4096 `torch.matmul`.

`job_model` (the job and its weights) serves `hf_onnx_serving.py` too; the cells are timed by
`serving_common.time_calls`, as every serving row is.
"""

import json
import sys
import time

import numpy as np
from serving_common import time_calls
import torch
import transformers


def hf_bert_config(config):
  """The `transformers.BertConfig` of this package's `BertConfig` (as a dict)."""
  return transformers.BertConfig(
      vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
      num_hidden_layers=config["num_hidden_layers"],
      num_attention_heads=config["num_attention_heads"],
      intermediate_size=config["intermediate_size"],
      # The original's (and this package's) `gelu` is the tanh form, `gelu_new` in transformers.
      hidden_act="gelu_new", max_position_embeddings=config["max_position_embeddings"],
      type_vocab_size=config["type_vocab_size"], layer_norm_eps=1e-12,
      hidden_dropout_prob=config["hidden_dropout_prob"],
      attention_probs_dropout_prob=config["attention_probs_dropout_prob"])


def bert_model(config):
  return transformers.BertModel(hf_bert_config(config), add_pooling_layer=True).eval()


def job_model():
  """Reads the job from stdin; returns `(job, BertModel)` with the job's weights loaded strictly,
  or `(job, None)` after answering a names job (`{"names": true}`: the parameter names and
  shapes, on stdout)."""
  job = json.load(sys.stdin)
  torch.manual_seed(0)
  model = bert_model(job["config"])
  state = model.state_dict()
  if job.get("names"):
    json.dump({name: list(value.shape) for name, value in state.items()}, sys.stdout)
    return job, None
  with np.load(job["weights"]) as weights:
    loaded = {name: torch.from_numpy(weights[name].copy()) for name in weights.files}
  # Buffers such as `position_ids` are the model's own; every parameter must come from the file.
  missing = [name for name in dict(model.named_parameters()) if name not in loaded]
  if missing:
    raise ValueError(f"No weights for {', '.join(missing)}.")
  model.load_state_dict({**state, **loaded}, strict=True)
  return job, model


def peak(dtype, size=4096, repeats=3):
  a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
  torch.matmul(a, b)
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    torch.matmul(a, b)
    best = min(best, time.perf_counter() - start)
  return 2 * size ** 3 / best


def timed_cell(model, cell, vocab_size, seconds):
  call = torch.compile(model) if cell["compile"] else model
  generator = torch.Generator().manual_seed(0)
  ids = torch.randint(5, vocab_size, (cell["batch"], cell["seq"]), generator=generator)
  inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "token_type_ids": torch.zeros_like(ids)}
  autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=cell["dtype"] == "bfloat16")

  def once():
    with torch.inference_mode(), autocast:
      call(**inputs).last_hidden_state.float().sum().item()

  # The first call compiles under torch.compile.
  return dict(cell, **time_calls(once, cell["batch"], seconds))


def main():
  job, model = job_model()
  if model is None:
    return
  ids = torch.tensor(job["check_ids"])
  with torch.inference_mode():
    outputs = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                    token_type_ids=torch.zeros_like(ids))
  results = {
      "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
      "threads": torch.get_num_threads(),
      "check": {"sequence_output": outputs.last_hidden_state[0].tolist(),
                "pooled_output": outputs.pooler_output[0].tolist()},
      "peak": {"float32": peak(torch.float32), "bfloat16": peak(torch.bfloat16)},
      "cells": [timed_cell(model, cell, job["config"]["vocab_size"], job["seconds"])
                for cell in job["cells"]],
  }
  json.dump(results, sys.stdout)


if __name__ == "__main__":
  main()
