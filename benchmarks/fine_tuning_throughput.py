"""The fine-tuning step in float32 and bfloat16: BERT-Base sentence-pair classification.

Each row trains a 2-class `BertClassifier` (the model, loss, metrics and optimizer of
`run_classifier.py`) with the package's `Trainer` on one fixed batch of random ids of sequence
length 128, so that only the training step is timed, between two progress reports:

* `ours`: as the engine chooses for the dtype (`official_bert.training.accelerators`: XLA and
  the `cpu_xla` kernels for float32, no XLA and the `cpu_onednn` kernels for bfloat16);
* `ours_xla` (XLA, `cpu_xla`), `ours_xla_stock` (XLA, `stock`) and `ours_graph` (no XLA,
  `cpu_onednn`) force one path; `ours_compiled_update` is `ours` with the compiled XLA update
  instead of the fused AdamW kernel (`official_bert.ops.adam_update`) in bfloat16, and
  `ours_compiled_elementwise` with the compiled XLA programs instead of the fused element-wise
  kernels (`official_bert.ops.bfloat16_elementwise`).

FLOPs are the encoder's matrix products, three times the forward pass's (`throughput.py`); the
peak of each dtype is the best oneDNN `tf.matmul` of two 4096 x 4096 matrices of that dtype,
at the start and the end of the run.

    python benchmarks/fine_tuning_throughput.py [--config=base] [--batch_size=16] \\
        [--dtypes=float32,bfloat16] [--variants=ours,ours_xla,ours_graph] [--repeats=2]

The machine must be otherwise idle for the figures to mean anything; each row is the best of
`--repeats` timed windows.
"""

import functools
import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
from absl import app, flags, logging
from results import recording
import tensorflow as tf
from throughput import Ours, best_speeds, bf16_flags, encoder_flops, matmul_peak, ratio_cell

flags.DEFINE_enum("config", "base", ["tiny", "mini", "base"], "Model size.")
flags.DEFINE_integer("batch_size", 16, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("steps", 4, "Steps per timed window.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Dtypes to time: float32, bfloat16.")
flags.DEFINE_list("variants", ["ours"],
                  "ours, ours_xla, ours_xla_stock, ours_graph, ours_compiled_update, "
                  "ours_compiled_elementwise (see the "
                  "module docstring).")
flags.DEFINE_integer("repeats", 2, "Timed windows per row; the best counts.")
FLAGS = flags.FLAGS

# name: (layers, hidden)
CONFIGS = {"tiny": (2, 128), "mini": (4, 256), "base": (12, 768)}


def main(_):
  logging.set_verbosity(logging.WARNING)
  peaks = {dtype: matmul_peak(dtype, chain=2, jit_compile=False) for dtype in FLAGS.dtypes}
  layers, hidden = CONFIGS[FLAGS.config]
  batch, seq = FLAGS.batch_size, FLAGS.seq_length
  flops = 3 * encoder_flops(layers, hidden, batch * seq, seq) / batch
  print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs; CPU flags: {' '.join(bf16_flags())}")
  rows = []
  for dtype in FLAGS.dtypes:
    ours = functools.partial(Ours, layers, hidden, batch, FLAGS.steps, seq=seq, dtype=dtype,
                             task="classification")
    builders = {"ours": functools.partial(ours, xla=None),
                "ours_xla": functools.partial(ours, xla=True, kernels="cpu_xla"),
                "ours_xla_stock": functools.partial(ours, xla=True, kernels="stock"),
                "ours_graph": functools.partial(ours, xla=False, kernels="cpu_onednn"),
                "ours_compiled_update": functools.partial(ours, xla=None, fused_update=False),
                "ours_compiled_elementwise": functools.partial(ours, xla=None,
                                                               fused_elementwise=False)}
    runners = {variant: builders[variant]() for variant in FLAGS.variants}
    best = best_speeds(runners, FLAGS.repeats)
    for variant, speed in best.items():
      choice = runners[variant].choice
      rows.append((dtype, variant, f"XLA {'on' if choice.enable_xla else 'off'}, "
                   f"{choice.kernels}", speed))
    del runners
  # The peaks again, in case the machine was busier at the start.
  peaks = {dtype: max(peak, matmul_peak(dtype, chain=2, jit_compile=False))
           for dtype, peak in peaks.items()}
  print("matmul peak (oneDNN, best of the start and the end): " + ", ".join(
      f"{dtype} {peak / 1e9:.0f} GFLOP/s" for dtype, peak in peaks.items()))
  float32 = {variant: speed for dtype, variant, _, speed in rows if dtype == "float32"}
  print(f"\n{FLAGS.config} L{layers}/H{hidden}, batch {batch}, sequence {seq}")
  print(f"{'dtype':<10}{'implementation':<27}{'path':<24}{'seq/s':>8}{'GFLOP/s':>9}"
        f"{'% peak':>8}{'vs float32':>12}")
  for dtype, variant, path, speed in rows:
    versus = speed / float32[variant] if variant in float32 else None
    print(f"{dtype:<10}{variant:<27}{path:<24}{speed:8.2f}{speed * flops / 1e9:9.1f}"
          f"{100 * speed * flops / peaks[dtype]:7.1f}%{ratio_cell(versus):>12}")


if __name__ == "__main__":
  app.run(recording("fine_tuning_throughput", main))
