"""What the serving benchmarks' processes share: how a request is timed, and ONNX Runtime's
variants of an ONNX file.

`serving_throughput.py` and its serving process, `format_serving.py` (ours as LiteRT and ONNX
files), `torch_serving.py` and `hf_onnx_serving.py` (Hugging Face under PyTorch and ONNX Runtime)
time their requests with `time_calls`, so that every row of the table means the same. NumPy
only (and onnxruntime where its variants are asked for): the PyTorch side imports no TensorFlow.
"""

import time

import numpy as np


def token_id_inputs(batch, seq, vocab_size, seed=0):
  """Random int32 token ids `[batch, seq]` (above the special tokens) with a full mask, by the
  names of the package's `serve_token_ids` inputs."""
  ids = np.random.default_rng(seed).integers(5, vocab_size, (batch, seq)).astype(np.int32)
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
          "input_type_ids": np.zeros_like(ids)}


def time_calls(call, batch, seconds, calls=None):
  """Times `call()`, one request of `batch` sequences that waits for its answer.

  The first call is timed apart (it traces, and compiles where the model does). Then, at batch 1,
  the latency: `calls` timed calls, or with `calls` None as many as fill `seconds` (at least
  two); at larger batches, the throughput over calls that fill `seconds` (at least two).

  Args:
    call: runs one request.
    batch: the sequences of a request.
    seconds: the least time of the timed calls.
    calls: the timed calls at batch 1, or None.

  Returns:
    `{"first": s, "rate": sequences/s}`, and at batch 1 `"p50"` and `"p99"` in seconds (the rate
    then is 1 / p50).
  """
  def once():
    start = time.perf_counter()
    call()
    return time.perf_counter() - start

  first = once()
  times = []
  if batch == 1 and calls is not None:
    times = [once() for _ in range(calls)]
  else:
    while len(times) < 2 or sum(times) < seconds:
      times.append(once())
  if batch == 1:
    return {"first": first, "p50": float(np.percentile(times, 50)),
            "p99": float(np.percentile(times, 99)), "rate": 1 / float(np.median(times))}
  return {"first": first, "rate": batch * len(times) / sum(times)}


def onnx_runtime_variants(float32, model_type, num_heads, hidden_size):
  """ONNX Runtime's variants of the float32 file `float32` (a path ending in `.onnx`), beside it.

  The variants are the file after ONNX Runtime's BERT graph fusions (`..._fused.onnx`,
  `onnxruntime.transformers.optimizer` for `model_type`: `bert` for PyTorch's export, `bert_tf`
  for TensorFlow's), and each of the two quantized by `quantize_dynamic` (int8 weights,
  activations quantized per call: the recipe ONNX Runtime documents for BERT on CPUs).

  Returns:
    `{(variant, precision): path}`, `variant` "" or " fused", `precision` "float32" or
    "int8 dyn", in that order: both float32 files, then both int8 ones.
  """
  # pylint: disable=import-outside-toplevel
  from onnx import TensorProto
  from onnxruntime import quantization
  from onnxruntime.transformers import optimizer

  fused = float32.replace(".onnx", "_fused.onnx")
  optimizer.optimize_model(float32, model_type=model_type, num_heads=num_heads,
                           hidden_size=hidden_size).save_model_to_file(fused)
  files = {("", "float32"): float32, (" fused", "float32"): fused}
  for variant, source in (("", float32), (" fused", fused)):
    files[variant, "int8 dyn"] = source.replace(".onnx", "_int8_dynamic.onnx")
    quantization.quantize_dynamic(source, files[variant, "int8 dyn"],
                                  weight_type=quantization.QuantType.QInt8,
                                  # The fused operators' outputs have no inferred type.
                                  extra_options={"DefaultTensorType": TensorProto.FLOAT})
  return files
