"""Pre-training throughput of this package's engine next to KerasHub, in float32 and bfloat16, as
a share of the CPU's matrix-product peak for each dtype.

Each configuration trains on one fixed batch of random ids (sequence 128, 20 masked positions,
the uncased vocabulary of 30,522), so that only the training step is timed:

* `ours`: `BertPretrainer` + `Trainer` (AdamW, global-norm clipping, the pre-training losses and
  the MLM / NSP accuracy metrics of `run_pretraining.py`) as the engine chooses for the dtype
  (`official_bert.training.accelerators`: XLA and the `cpu_xla` kernels for float32, no XLA and
  the `cpu_onednn` kernels for bfloat16); `ours_xla` (XLA, `cpu_xla`), `ours_xla_stock` (XLA,
  `stock`), `ours_xla_erf` (XLA, `cpu_xla`, the exact GELU instead of the original's tanh form)
  and `ours_graph` (no XLA, `cpu_onednn`) force one path; `ours_compiled_update` is `ours` with
  the compiled XLA update instead of the fused AdamW kernel (`official_bert.ops.adam_update`) in
  bfloat16, and `ours_compiled_elementwise` with the compiled XLA programs instead of the fused
  element-wise kernels (`official_bert.ops.bfloat16_elementwise`);
* `kerashub`: KerasHub's `BertBackbone` with its `MaskedLMHead` (tied to the token embedding) and
  a 2-way next-sentence `Dense` on the pooled output, trained by `Model.fit` with
  `jit_compile=True`, `steps_per_execution` and AdamW with `global_clipnorm=1.0` (no metrics);
  `kerashub_graph` the same without XLA. Both under the same Keras dtype policy as ours;
* `hf_eager`, `hf_compile`: Hugging Face `transformers.BertForPreTraining` under PyTorch, eager
  and with `torch.compile`, float32 or `torch.autocast("cpu", dtype=torch.bfloat16)`, on the
  weights of a `BertPretrainer` of the same configuration, in a process of `--torch_python` (an
  environment with `torch` and `transformers`, which are no dependencies of this package):
  `torch_pretraining.py` says what its step does. Without such a Python these rows are left out,
  and the run says so.

Each is timed over a window of steps, leaving out set-up: ours between two progress reports of
`Trainer.train`, KerasHub's between two `steps_per_execution` batches of `fit`, PyTorch's around
a loop of steps.

FLOPs are counted as in `throughput.py` (the encoder's and the MLM head's matrix products). The
peak of each dtype is the best `tf.matmul` of two 4096 x 4096 matrices of that dtype through
TensorFlow's oneDNN kernels (faster than XLA's on CPUs in both dtypes; only oneDNN uses AMX), the
best of the start and the end of the run.

    python benchmarks/pretraining_throughput.py [--configs=tiny,mini,base] [--repeats=2] \
        [--dtypes=float32,bfloat16] [--variants=ours,ours_xla,ours_graph,kerashub,hf_compile] \
        [--torch_python=/path/to/venv/bin/python]

The machine must be otherwise idle for the figures to mean anything; each row is the best of
`--repeats` timed windows, measured alternately for each implementation.
"""

import functools
import os
import pathlib
import tempfile

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position

from absl import app, flags, logging
import hf_bridge
import keras
import numpy as np
from results import recording
import tensorflow as tf
from throughput import (
  KerasHub,
  Ours,
  bert_config,
  best_speeds,
  bf16_flags,
  matmul_peak,
  ratio_cell,
  training_flops,
)

from official_bert import BertPretrainer

flags.DEFINE_list("configs", ["tiny", "mini", "base"], "Configurations to time.")
flags.DEFINE_list("variants", ["ours", "ours_xla", "ours_graph", "kerashub", "hf_eager",
                                "hf_compile"],
                  "Implementations to time (see the module docstring): ours, ours_xla, "
                  "ours_xla_stock, ours_xla_erf, ours_graph, ours_compiled_update, "
                  "ours_compiled_elementwise, kerashub, "
                  "kerashub_graph, hf_eager, hf_compile.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Dtypes to time: float32, bfloat16.")
flags.DEFINE_integer("repeats", 2, "Timed windows per implementation; the best counts.")
flags.DEFINE_string("torch_python", None,
                    "Python of an environment with torch and transformers for the Hugging Face "
                    "rows; default: this Python if it has them.")
FLAGS = flags.FLAGS

SEQ, PREDICTIONS = 128, 20
# name: (layers, hidden, batch, steps per timed window)
CONFIGS = {"tiny": (2, 128, 32, 20), "mini": (4, 256, 32, 8), "base": (12, 768, 8, 4),
           "smoke": (1, 64, 4, 2)}  # checks that the benchmark runs


def _kerashub_version():
  try:
    import keras_hub  # pylint: disable=import-outside-toplevel
  except ImportError:
    return "not installed (pip install -e .[benchmark])"
  return keras_hub.__version__


TORCH_SCRIPT = pathlib.Path(__file__).resolve().parent / "torch_pretraining.py"


class HuggingFace:
  """`BertForPreTraining` steps in a PyTorch process on the weights of a `BertPretrainer`.

  Args:
    layers, hidden, batch, steps: the model, the batch and the steps per timed window.
    dtype: `float32`, or `bfloat16` for `torch.autocast`.
    compiled: run the forward pass and the losses under `torch.compile`.
    python: the Python with torch and transformers.
    weights_dir: where the weights are handed over (one file per model shape).
  """

  def __init__(self, layers, hidden, batch, steps, dtype, compiled, python, weights_dir):
    config = bert_config(layers, hidden)
    self.process = hf_bridge.TorchProcess(python, TORCH_SCRIPT)
    shapes = self.process.ask({"config": config.to_dict()})
    path = os.path.join(weights_dir, f"L{layers}-H{hidden}.npz")
    if not os.path.exists(path):
      np.savez(path, **hf_bridge.hf_weights(BertPretrainer(config), shapes))
    self.versions = self.process.ask({"weights": path, "dtype": dtype, "compile": compiled,
                                      "batch": batch, "seq": SEQ, "predictions": PREDICTIONS,
                                      "steps": steps})

  def sequences_per_second(self):
    return self.process.ask({"time": True})["rate"]


def _builders(name, dtype, weights_dir):
  layers, hidden, batch, steps = CONFIGS[name]
  shape = (layers, hidden, batch, steps)
  ours = functools.partial(Ours, *shape, dtype=dtype)
  return {"ours": functools.partial(ours, xla=None),
          "ours_xla": functools.partial(ours, xla=True, kernels="cpu_xla"),
          "ours_xla_stock": functools.partial(ours, xla=True, kernels="stock"),
          "ours_xla_erf": functools.partial(ours, xla=True, kernels="cpu_xla",
                                            hidden_act="gelu_erf"),
          "ours_graph": functools.partial(ours, xla=False, kernels="cpu_onednn"),
          "ours_compiled_update": functools.partial(ours, xla=None, fused_update=False),
          "ours_compiled_elementwise": functools.partial(ours, xla=None, fused_elementwise=False),
          "kerashub": functools.partial(KerasHub, *shape, dtype=dtype),
          "kerashub_graph": functools.partial(KerasHub, *shape, dtype=dtype, jit_compile=False),
          **{f"hf_{mode}": functools.partial(HuggingFace, *shape, dtype=dtype,
                                              compiled=mode == "compile",
                                              python=hf_bridge.find_torch_python(
                                                  FLAGS.torch_python),
                                              weights_dir=weights_dir)
             for mode in ("eager", "compile")}}


def _peaks():
  # A smoke run checks that the peak is measured, not its value: small products.
  size = 512 if "smoke" in FLAGS.configs else 4096
  return {dtype: matmul_peak(dtype, size=size, chain=2, jit_compile=False)
          for dtype in FLAGS.dtypes}


def main(_):
  logging.set_verbosity(logging.WARNING)
  variants = list(FLAGS.variants)
  if not hf_bridge.find_torch_python(FLAGS.torch_python):
    variants = [v for v in variants if not v.startswith("hf_")]
    print("Hugging Face rows left out: no Python with torch and transformers (--torch_python).")
  if not variants:
    return
  peaks = _peaks()
  print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, KerasHub "
        f"{_kerashub_version()}, {os.cpu_count()} CPUs, oneDNN "
        f"{os.environ['TF_ENABLE_ONEDNN_OPTS']}; CPU flags: {' '.join(bf16_flags())}")
  weights_dir = tempfile.TemporaryDirectory(prefix="pretraining_throughput-")
  rows, torch_versions = [], None
  for name in FLAGS.configs:
    layers, hidden, batch, _ = CONFIGS[name]
    flops = training_flops(layers, hidden, batch, SEQ, PREDICTIONS) / batch
    for dtype in FLAGS.dtypes:
      builders = _builders(name, dtype, weights_dir.name)
      runners = {variant: builders[variant]() for variant in variants}
      best = best_speeds(runners, FLAGS.repeats)
      for runner in runners.values():
        if isinstance(runner, HuggingFace):
          torch_versions = runner.versions
          runner.process.close()
      for variant, speed in best.items():
        rows.append((f"{name} L{layers}/H{hidden} b{batch}", dtype, variant, speed, speed * flops,
                     speed / best["kerashub"] if best.get("kerashub") else None))
      del runners
  # The peaks again, in case the machine was busier at the start.
  peaks = {dtype: max(peak, again) for (dtype, peak), again in zip(peaks.items(),
                                                                     _peaks().values())}
  print("matmul peak (oneDNN, best of the start and the end): " + ", ".join(
      f"{dtype} {peak / 1e9:.0f} GFLOP/s" for dtype, peak in peaks.items()))
  if torch_versions:
    print(f"Hugging Face rows: PyTorch {torch_versions['torch']} ({torch_versions['threads']} "
          f"threads), transformers {torch_versions['transformers']}")
  float32 = {(config, variant): speed for config, dtype, variant, speed, *_ in rows
             if dtype == "float32"}
  print(f"\n{'config':<22}{'dtype':<10}{'implementation':<27}{'seq/s':>8}{'GFLOP/s':>9}"
        f"{'% peak':>8}{'vs KerasHub':>13}{'vs float32':>12}")
  for config, dtype, variant, speed, achieved, ratio in rows:
    versus = speed / float32[config, variant] if (config, variant) in float32 else None
    print(f"{config:<22}{dtype:<10}{variant:<27}{speed:8.2f}{achieved / 1e9:9.1f}"
          f"{100 * achieved / peaks[dtype]:7.1f}%{ratio_cell(ratio):>13}{ratio_cell(versus):>12}")


if __name__ == "__main__":
  app.run(recording("pretraining_throughput", main, smoke=lambda: "smoke" in FLAGS.configs))
