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

Training FLOPs per step (forward + backward = 3 x forward, a matmul of m x k by k x n = 2mkn):

    6 * 12 * L * H^2 * B * S        transformer matmuls: 12 H^2 weights per layer, B * S tokens
  + 12 * L * B * S^2 * H            attention scores and their weighted sum (2 * 2 S^2 H forward)
  + 6 * (H * V + H^2) * B * P       MLM transform and vocabulary projection, masked positions only

(embedding lookups, the pooler, layer norms, softmax and the optimizer are left out). The peak is
the best float32 `tf.matmul` of two 4096 x 4096 matrices.

    python benchmarks/pretraining_throughput.py [--configs=tiny,mini,base] [--repeats=2]

The machine must be otherwise idle for the figures to mean anything; each row is the best of
`--repeats` timed windows, measured alternately for each implementation.
"""

import functools
import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import tempfile
import time

from absl import app, flags, logging
import keras
import numpy as np
import tensorflow as tf

from official_bert import BertConfig, BertPretrainer
from official_bert.models.losses import pretraining_losses
from official_bert.pretraining.task import pretraining_metrics
from official_bert.training import EngineConfig, Trainer, create_optimizer

flags.DEFINE_list("configs", ["tiny", "mini", "base"], "Configurations to time.")
flags.DEFINE_list("variants", ["ours_xla", "ours_graph", "kerashub"],
                  "Implementations to time: ours_xla, ours_graph, kerashub, and ours_bf16 (XLA, "
                  "mixed bfloat16: not comparable with the float32 peak).")
flags.DEFINE_integer("repeats", 2, "Timed windows per implementation; the best counts.")
FLAGS = flags.FLAGS

SEQ, PREDICTIONS, VOCAB = 128, 20, 30522
# name: (layers, hidden, batch, steps per timed window)
CONFIGS = {"tiny": (2, 128, 32, 20), "mini": (4, 256, 32, 8), "base": (12, 768, 8, 4)}


def training_flops(layers, hidden, batch):
  dense = 6 * 12 * layers * hidden**2 * batch * SEQ
  attention = 12 * layers * batch * SEQ**2 * hidden
  masked_lm = 6 * (hidden * VOCAB + hidden**2) * batch * PREDICTIONS
  return dense + attention + masked_lm


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


def random_batch(batch, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (batch, SEQ)).astype("int32")
  positions = np.sort(rng.random((batch, SEQ - 1)).argsort(-1)[:, :PREDICTIONS] + 1, -1)
  features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": (np.arange(SEQ) >= SEQ // 2).astype("int32")[None].repeat(batch, 0),
              "masked_lm_positions": positions.astype("int32")}
  labels = {"masked_lm_ids": np.take_along_axis(ids, positions, 1),
            "masked_lm_weights": np.ones((batch, PREDICTIONS), "float32"),
            "next_sentence_labels": rng.integers(0, 2, batch).astype("int32")}
  return features, labels


class Ours:
  """The package's `Trainer`; each window is one `train` call of `steps` steps."""

  def __init__(self, layers, hidden, batch, steps, xla, dtype="float32"):
    self.steps, self.step = steps, steps
    engine = EngineConfig(enable_xla=xla, steps_per_loop=steps, log_steps=steps,
                          save_checkpoints_steps=10**9, dtype=dtype)
    strategy = engine.setup()
    config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
    with strategy.scope():
      model = BertPretrainer(config)
      optimizer = create_optimizer("adamw", 1e-4, 10**6, 10, dtype=dtype)
    self.model_dir = tempfile.TemporaryDirectory(prefix="throughput-")  # removed with self
    self.trainer = Trainer(model, pretraining_losses, optimizer, strategy=strategy,
                           model_dir=self.model_dir.name, config=engine,
                           metrics_fn=pretraining_metrics)
    batch_data = random_batch(batch)
    self.dataset_fn = lambda _: tf.data.Dataset.from_tensors(batch_data).repeat()
    self.trainer.train(self.dataset_fn, self.step)  # compiles

  def sequences_per_second(self):
    self.step += self.steps
    return self.trainer.train(self.dataset_fn, self.step)["examples_per_second"]


class KerasHub:
  """KerasHub's BERT backbone and MLM head under `Model.fit`."""

  def __init__(self, layers, hidden, batch, steps):
    import keras_hub  # pylint: disable=import-outside-toplevel
    keras.mixed_precision.set_global_policy("float32")
    self.steps = steps
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=hidden // 64, hidden_dim=hidden,
        intermediate_dim=4 * hidden, max_sequence_length=512)
    inputs = dict(backbone.input, mask_positions=keras.Input((None,), dtype="int32"))
    encoded = backbone(backbone.input)
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=VOCAB, token_embedding=backbone.token_embedding,
        intermediate_activation="gelu", name="mlm")(encoded["sequence_output"],
                                                    inputs["mask_positions"])
    nsp = keras.layers.Dense(2, name="nsp")(encoded["pooled_output"])
    self.model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    self.model.compile(
        optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                         global_clipnorm=1.0),
        loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
        jit_compile=True, steps_per_execution=steps)
    features, labels = random_batch(batch)
    x = {"token_ids": features["input_word_ids"], "padding_mask": features["input_mask"],
         "segment_ids": features["input_type_ids"],
         "mask_positions": features["masked_lm_positions"]}
    y = {"mlm": labels["masked_lm_ids"], "nsp": labels["next_sentence_labels"]}
    weights = {"mlm": labels["masked_lm_weights"], "nsp": np.ones(batch, "float32")}
    self.dataset = tf.data.Dataset.from_tensors((x, y, weights)).repeat()
    self.batch = batch
    self._fit(executions=1)  # compiles

  def _fit(self, executions):
    """Runs `executions` x `steps` steps; returns the seconds of each execution but the first."""
    ends = []
    callback = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: ends.append(time.perf_counter()))
    self.model.fit(self.dataset, steps_per_epoch=executions * self.steps, epochs=1, verbose=0,
                   callbacks=[callback])
    return np.diff(ends)

  def sequences_per_second(self):
    # Timed between the ends of two `steps_per_execution` calls, like the Trainer's log interval:
    # `fit`'s own set-up is left out.
    return self.steps * self.batch / self._fit(executions=2).min()


def main(_):
  logging.set_verbosity(logging.WARNING)
  import keras_hub  # pylint: disable=import-outside-toplevel
  peak = matmul_peak()
  print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, KerasHub "
        f"{keras_hub.__version__}, {os.cpu_count()} CPUs, oneDNN "
        f"{os.environ['TF_ENABLE_ONEDNN_OPTS']}; float32 matmul peak {peak / 1e9:.0f} GFLOP/s")
  rows = []
  for name in FLAGS.configs:
    layers, hidden, batch, steps = CONFIGS[name]
    shape = (layers, hidden, batch, steps)
    builders = {"ours_xla": functools.partial(Ours, *shape, xla=True),
                "ours_graph": functools.partial(Ours, *shape, xla=False),
                "ours_bf16": functools.partial(Ours, *shape, xla=True, dtype="bfloat16"),
                "kerashub": functools.partial(KerasHub, *shape)}
    runners = {variant: builders[variant]() for variant in FLAGS.variants}
    best = {variant: 0.0 for variant in runners}
    for _ in range(FLAGS.repeats):
      for variant, runner in runners.items():
        best[variant] = max(best[variant], runner.sequences_per_second())
    flops = training_flops(layers, hidden, batch) / batch
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
