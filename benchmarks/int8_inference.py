"""Keras 3's int8 quantization against bfloat16 and float32, on one BERT classifier in-process.

The classifier (random weights of a `BertConfig` preset) runs as a `tf.function` without XLA in
float32, as the bfloat16 copy that `--dtype=bfloat16` exports (`export.precision.with_dtype`), and
after `model.quantize("int8")` (Keras quantizes its `Dense` and `Embedding` layers); each row gives
sequences per second at one batch size and sequence length, and how far its probabilities are
from float32's on the same ids.

    python benchmarks/int8_inference.py --config=bert_base
"""

import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import time

from absl import app, flags
import numpy as np
from results import recording
import tensorflow as tf

from official_bert import BertClassifier, configs
from official_bert.export import precision

flags.DEFINE_string("config", "bert_base", "BertConfig preset.")
flags.DEFINE_integer("batch_size", 8, "Batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_float("seconds", 5.0, "Timed seconds per model (at least two calls).")
FLAGS = flags.FLAGS


def rate(model, inputs):
  """Sequences per second of `model` on `inputs`, and its float32 logits."""
  call = tf.function(lambda x: tf.cast(model(x, training=False)["logits"], tf.float32))
  logits = call(inputs).numpy()
  start, calls = time.perf_counter(), 0
  while calls < 2 or time.perf_counter() - start < FLAGS.seconds:
    call(inputs).numpy()
    calls += 1
  return FLAGS.batch_size * calls / (time.perf_counter() - start), logits


def main(_):
  config = configs.get_preset(FLAGS.config)
  model = BertClassifier(config, num_classes=2)
  shape = (FLAGS.batch_size, FLAGS.seq_length)
  ids = np.random.default_rng(0).integers(5, config.vocab_size, shape).astype("int32")
  inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.ones(shape, tf.int32),
            "input_type_ids": tf.zeros(shape, tf.int32)}
  quantized = BertClassifier(config, num_classes=2)
  quantized.set_weights(model.get_weights())
  quantized.quantize("int8")
  reference = None
  print(f"{FLAGS.config}, batch {FLAGS.batch_size}, sequence {FLAGS.seq_length}")
  print(f"{'model':<10}{'seq/s':>8}  max |p - p_float32|")
  for name, variant in (("float32", model), ("bfloat16", precision.with_dtype(model, "bfloat16")),
                        ("int8", quantized)):
    sequences, logits = rate(variant, inputs)
    probabilities = tf.nn.softmax(logits).numpy()
    reference = probabilities if reference is None else reference
    print(f"{name:<10}{sequences:8.1f}  {np.abs(probabilities - reference).max():.1e}")


if __name__ == "__main__":
  app.run(recording("int8_inference", main))
