"""How fast XLA's CPU backend runs BERT-Base's matrix products, next to TensorFlow's oneDNN kernel.

`pretraining_throughput.py` states the base step as a share of the oneDNN float32 peak (one
4096 x 4096 product). The step itself is compiled with XLA, whose CPU backend runs its products
with its own kernels; this script measures how close those come to the peak on the very products
of a BERT-Base step at batch 8, sequence 128 (1,024 tokens):

* each transformer weight (`qkv` 768 x 2304, attention output 768 x 768, intermediate 768 x 3072,
  output 3072 x 768) in its three forms: forward `x @ w`, input gradient `dy @ w^T` and weight
  gradient `x^T @ dy`;
* the 4096 x 4096 product that sets the peak.

Each product is timed alone, as a `tf.function` compiled with XLA and as one without (TensorFlow's
oneDNN kernel). The last row weights the step's products by their FLOPs: the share of the peak an
XLA-compiled step would reach if everything but its products took no time and each product ran
alone. Inside a step XLA runs a weight's two gradient products side by side, which a profile of
the BERT-Base step put at about 440 GFLOP/s, so the step's own ceiling is somewhat higher.

    python benchmarks/matmul_ceiling.py [--repeats=5]
"""

import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import time

from absl import app, flags
from results import recording
import tensorflow as tf

flags.DEFINE_integer("repeats", 5, "Timed windows per product; the best counts.")
FLAGS = flags.FLAGS

TOKENS = 8 * 128
# name: (input width, output width) of each weight of a BERT-Base layer.
WEIGHTS = {"qkv": (768, 2304), "attention output": (768, 768), "intermediate": (768, 3072),
           "output": (3072, 768)}
# form: (left shape, right shape, transpose_a, transpose_b) as functions of (tokens, in, out).
FORMS = {
    "forward": lambda t, i, o: ((t, i), (i, o), False, False),
    "input gradient": lambda t, i, o: ((t, o), (i, o), False, True),
    "weight gradient": lambda t, i, o: ((t, i), (t, o), True, False),
}


def gflops_per_second(left, right, transpose_a, transpose_b, jit_compile):
  a, b = tf.random.normal(left), tf.random.normal(right)
  product = tf.function(lambda a, b: tf.matmul(a, b, transpose_a=transpose_a,
                                               transpose_b=transpose_b),
                        jit_compile=jit_compile)
  flops = 2 * product(a, b).shape.num_elements() * (left[0] if transpose_a else left[1])
  calls = max(3, int(2e10 // flops))  # windows of at least about 0.05 s
  best = float("inf")
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    for _ in range(calls):
      result = product(a, b)
    result.numpy()
    best = min(best, (time.perf_counter() - start) / calls)
  return flops, flops / best / 1e9


def main(_):
  _, peak = gflops_per_second((4096, 4096), (4096, 4096), False, False, False)
  _, peak_xla = gflops_per_second((4096, 4096), (4096, 4096), False, False, True)
  print(f"{'product':<36}{'XLA GFLOP/s':>12}{'oneDNN':>9}{'XLA/peak':>10}")
  print(f"{'4096 x 4096 x 4096 (the peak)':<36}{peak_xla:12.0f}{peak:9.0f}"
        f"{100 * peak_xla / peak:9.0f}%")
  total_flops = total_seconds = 0.0
  for weight, (inputs, outputs) in WEIGHTS.items():
    for form, shapes in FORMS.items():
      flops, xla = gflops_per_second(*shapes(TOKENS, inputs, outputs), jit_compile=True)
      _, onednn = gflops_per_second(*shapes(TOKENS, inputs, outputs), jit_compile=False)
      total_flops += flops
      total_seconds += flops / (xla * 1e9)
      print(f"{weight + ', ' + form:<36}{xla:12.0f}{onednn:9.0f}{100 * xla / peak:9.0f}%")
  aggregate = total_flops / total_seconds / 1e9
  print(f"{'the layer products, FLOP-weighted':<36}{aggregate:12.0f}{'':>9}"
        f"{100 * aggregate / peak:9.0f}%")


if __name__ == "__main__":
  app.run(recording("matmul_ceiling", main))
