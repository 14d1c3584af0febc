"""The BERT-Base encoder's forward pass on CPU, per dtype, XLA and kernel backend, side by side.

Random weights, a fixed batch of random ids; each row is a `tf.function` of the Keras
`BertEncoder` (`sequence_output`), timed as the best of `--repeats` windows of `--calls` calls:

* `float32, XLA, cpu_xla`: the engine's choice for float32 on CPUs;
* `float32, graph, cpu_onednn`;
* `bfloat16, graph, stock`: Keras' own layers under `mixed_bfloat16`, no XLA;
* `bfloat16, graph, cpu_onednn`: the engine's choice for bfloat16 on CPUs;
* `bfloat16, XLA, cpu_xla`.

FLOPs are the encoder's matrix products (`throughput.encoder_flops`); the peak of each dtype is
the best oneDNN `tf.matmul` of two 4096 x 4096 matrices of that dtype.

    python benchmarks/encoder_forward_throughput.py [--batch_size=8] [--seq_length=128]
"""

import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import time

from absl import app, flags
import keras
import numpy as np
from results import recording
import tensorflow as tf
from throughput import VOCAB, bert_config, bf16_flags, encoder_flops, matmul_peak

from official_bert import BertEncoder

flags.DEFINE_integer("batch_size", 8, "Sequences per call.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("calls", 5, "Calls per timed window.")
flags.DEFINE_integer("repeats", 3, "Timed windows per row; the best counts.")
FLAGS = flags.FLAGS

# (dtype, XLA, kernel backend)
ROWS = (("float32", True, "cpu_xla"), ("float32", False, "cpu_onednn"),
        ("bfloat16", False, "stock"), ("bfloat16", False, "cpu_onednn"),
        ("bfloat16", True, "cpu_xla"))
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


def main(_):
  batch, seq = FLAGS.batch_size, FLAGS.seq_length
  peaks = {dtype: matmul_peak(dtype, chain=2, jit_compile=False) for dtype in POLICIES}
  ids = np.random.default_rng(0).integers(1000, VOCAB, (batch, seq)).astype("int32")
  inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
  calls = {}
  for dtype, xla, backend in ROWS:
    encoder = BertEncoder(bert_config(12, 768), dtype=POLICIES[dtype], kernels=backend)
    forward = tf.function(lambda x, encoder=encoder: encoder(x)["sequence_output"],
                          jit_compile=xla)
    forward(inputs).numpy()
    calls[dtype, xla, backend] = forward
  best = {row: float("inf") for row in ROWS}
  for _ in range(FLAGS.repeats):
    for row, forward in calls.items():
      start = time.perf_counter()
      for _ in range(FLAGS.calls):
        outputs = forward(inputs)
      outputs.numpy()
      best[row] = min(best[row], (time.perf_counter() - start) / FLAGS.calls)
  peaks = {dtype: max(peak, matmul_peak(dtype, chain=2, jit_compile=False))
           for dtype, peak in peaks.items()}
  flops = encoder_flops(12, 768, batch * seq, seq)
  print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs; CPU "
        f"flags: {' '.join(bf16_flags())}; matmul peak (oneDNN): " + ", ".join(
            f"{dtype} {peak / 1e9:.0f} GFLOP/s" for dtype, peak in peaks.items()))
  print(f"\nBERT-Base encoder forward, batch {batch}, sequence {seq}")
  print(f"{'dtype':<10}{'XLA':<6}{'kernels':<12}{'seq/s':>8}{'GFLOP/s':>9}{'% peak':>8}")
  for (dtype, xla, backend), seconds in best.items():
    print(f"{dtype:<10}{'on' if xla else 'off':<6}{backend:<12}{batch / seconds:8.1f}"
          f"{flops / seconds / 1e9:9.0f}{100 * flops / seconds / peaks[dtype]:7.1f}%")


if __name__ == "__main__":
  app.run(recording("encoder_forward_throughput", main))
