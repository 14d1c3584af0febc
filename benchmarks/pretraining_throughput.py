"""Pre-training throughput of this package's engine next to KerasHub, and as a share of the CPU's
float32 matrix-product peak.

Each configuration trains on one fixed batch of random ids (sequence 128, 20 masked positions,
the uncased vocabulary of 30,522), so that only the training step is timed:

* `ours`: `BertPretrainer` + `Trainer` (AdamW, global-norm clipping, the pre-training losses and
  the MLM / NSP accuracy metrics of `run_pretraining.py`), XLA on or off;
* `kerashub`: KerasHub's `BertBackbone` with its `MaskedLMHead` (tied to the token embedding) and
  a 2-way next-sentence `Dense` on the pooled output, trained by `Model.fit` with
  `jit_compile=True`, `steps_per_execution` and AdamW with `global_clipnorm=1.0` (no metrics).

Both are timed over a window of steps run inside one compiled loop, leaving out set-up: ours
between two progress reports of `Trainer.train`, KerasHub's between two `steps_per_execution`
batches of `fit`.

FLOPs are counted as in `throughput.py` (the encoder's and the MLM head's matrix products). The
peak is the best float32 `tf.matmul` of two 4096 x 4096 matrices.

    python benchmarks/pretraining_throughput.py [--configs=tiny,mini,base] [--repeats=2] \
        [--variants=ours_xla,ours_xla_stock,ours_graph,kerashub]

The machine must be otherwise idle for the figures to mean anything; each row is the best of
`--repeats` timed windows, measured alternately for each implementation.
"""

import functools
import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import time

from absl import app, flags, logging
import keras
import tensorflow as tf
from throughput import KerasHub, Ours, training_flops

flags.DEFINE_list("configs", ["tiny", "mini", "base"], "Configurations to time.")
flags.DEFINE_list("variants", ["ours_xla", "ours_graph", "kerashub"],
                  "Implementations to time: ours_xla (the cpu_xla kernels), ours_xla_stock (XLA, "
                  "the stock kernels), ours_graph, kerashub, and ours_bf16 (XLA, mixed bfloat16: "
                  "not comparable with the float32 peak).")
flags.DEFINE_integer("repeats", 2, "Timed windows per implementation; the best counts.")
FLAGS = flags.FLAGS

SEQ, PREDICTIONS = 128, 20
# name: (layers, hidden, batch, steps per timed window)
CONFIGS = {"tiny": (2, 128, 32, 20), "mini": (4, 256, 32, 8), "base": (12, 768, 8, 4)}


def matmul_peak(size=4096, repeats=5):
  a, b = tf.random.normal((size, size)), tf.random.normal((size, size))
  matmul = tf.function(tf.matmul)
  matmul(a, b).numpy()
  best = min(_timed(lambda: matmul(a, b).numpy()) for _ in range(repeats))
  return 2 * size**3 / best


def _timed(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _kerashub_version():
  try:
    import keras_hub  # pylint: disable=import-outside-toplevel
  except ImportError:
    return "not installed (pip install -e .[benchmark])"
  return keras_hub.__version__


def main(_):
  logging.set_verbosity(logging.WARNING)
  peak = matmul_peak()
  print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, KerasHub "
        f"{_kerashub_version()}, {os.cpu_count()} CPUs, oneDNN "
        f"{os.environ['TF_ENABLE_ONEDNN_OPTS']}; float32 matmul peak {peak / 1e9:.0f} GFLOP/s")
  rows = []
  for name in FLAGS.configs:
    layers, hidden, batch, steps = CONFIGS[name]
    shape = (layers, hidden, batch, steps)
    builders = {"ours_xla": functools.partial(Ours, *shape, xla=True, kernels="cpu_xla"),
                "ours_xla_stock": functools.partial(Ours, *shape, xla=True, kernels="stock"),
                "ours_graph": functools.partial(Ours, *shape, xla=False, kernels="cpu_xla"),
                "ours_bf16": functools.partial(Ours, *shape, xla=True, dtype="bfloat16"),
                "kerashub": functools.partial(KerasHub, *shape)}
    runners = {variant: builders[variant]() for variant in FLAGS.variants}
    best = {variant: 0.0 for variant in runners}
    for _ in range(FLAGS.repeats):
      for variant, runner in runners.items():
        best[variant] = max(best[variant], runner.sequences_per_second())
    flops = training_flops(layers, hidden, batch, SEQ, PREDICTIONS) / batch
    for variant, speed in best.items():
      rows.append((f"{name} L{layers}/H{hidden} b{batch}", variant, speed, speed * flops,
                   speed / best["kerashub"] if best.get("kerashub") else float("nan")))
    del runners
  # The peak again, in case the machine was busier at the start.
  peak = max(peak, matmul_peak())
  print(f"float32 matmul peak (best of the start and the end): {peak / 1e9:.0f} GFLOP/s")
  print(f"\n{'config':<22}{'implementation':<15}{'seq/s':>9}{'GFLOP/s':>10}{'% peak':>8}"
        f"{'vs KerasHub':>13}")
  for config, variant, speed, achieved, ratio in rows:
    print(f"{config:<22}{variant:<15}{speed:9.2f}{achieved / 1e9:10.1f}"
          f"{100 * achieved / peak:7.1f}%{ratio:12.2f}x")


if __name__ == "__main__":
  app.run(main)
