"""What the throughput benchmarks share: random pre-training batches, FLOP counts, a matmul peak,
and the two trainers timed side by side (this package's `Trainer` and KerasHub's `Model.fit`).

FLOPs are counted by `flops.py`.
"""

import contextlib
import functools
import os
import tempfile
import time

from flops import VOCAB, encoder_flops, training_flops  # noqa: F401  (shared here)
import keras
import numpy as np
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, BertPretrainer
from official_bert.models.losses import pretraining_losses
from official_bert.ops import adam_update, bfloat16_elementwise
from official_bert.tasks.classification import classification_loss, classification_metrics
from official_bert.tasks.pretraining import pretraining_metrics
from official_bert.training import (
  RuntimeConfig,
  Trainer,
  TrainerConfig,
  accelerators,
  create_optimizer,
)


def matmul_peak(dtype="float32", size=4096, repeats=5, chain=8, jit_compile=True):
  """The best FLOP/s of `chain` products of two `size` x `size` matrices of `dtype`.

  Chained in one program so that a GPU's launch latency does not count. With `jit_compile`
  False the products are TensorFlow's oneDNN kernels, the fastest on CPUs (the only ones that
  use the CPU's bfloat16 units).
  """
  a = tf.random.normal((size, size), dtype=tf.float32)
  a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a) / size, dtype)

  @tf.function(jit_compile=jit_compile)
  def products(x):
    for _ in range(chain):
      x = tf.matmul(x, b)
    return x

  products(a).numpy()
  best = min(timed(lambda: products(a).numpy()) for _ in range(repeats))
  return chain * 2 * size**3 / best


def bf16_flags():
  """The CPU's flags that matter for bfloat16 and float32 products (AMX, AVX-512 and AVX2), so
  that a machine with AVX2 alone is named too, not left blank."""
  return sorted(flag for flag in accelerators.cpu_flags()
                if flag.startswith(("amx", "avx512f", "avx512_bf16", "avx512_fp16",
                                    "avx512_vp2intersect", "avx2")))


def timed(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def random_batch(batch, seq, predictions, seed=0):
  """One pre-training batch of random ids: `(features, labels)` as the reader gives them."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (batch, seq)).astype("int32")
  positions = np.sort(rng.random((batch, seq - 1)).argsort(-1)[:, :predictions] + 1, -1)
  features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
              "masked_lm_positions": positions.astype("int32")}
  labels = {"masked_lm_ids": np.take_along_axis(ids, positions, 1),
            "masked_lm_weights": np.ones((batch, predictions), "float32"),
            "next_sentence_labels": rng.integers(0, 2, batch).astype("int32")}
  return features, labels


def classification_batch(batch, seq, seed=0):
  """One sentence-pair classification batch of random ids: `(features, labels)`."""
  features, _ = random_batch(batch, seq, 1, seed)
  del features["masked_lm_positions"]
  labels = {"labels": np.random.default_rng(seed).integers(0, 2, batch).astype("int32"),
            "weights": np.ones(batch, "float32")}
  return features, labels


def bert_config(layers, hidden, hidden_act="gelu"):
  return BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
                    max_position_embeddings=512, hidden_act=hidden_act)


@contextlib.contextmanager
def _environment(variables):
  """Sets the environment `variables` inside a `with` block, then restores them."""
  previous = {name: os.environ.get(name) for name in variables}
  os.environ.update(variables)
  try:
    yield
  finally:
    for name, value in previous.items():
      if value is None:
        del os.environ[name]
      else:
        os.environ[name] = value


class Ours:
  """The package's `Trainer` on one fixed batch; each timed window is one `train` call.

  Args:
    layers, hidden, batch, steps: the model, the batch and the steps per timed window.
    seq, predictions: sequence length and masked positions per sequence.
    xla, dtype, kernels: `RuntimeConfig` settings (`xla=None`: the engine's choice).
    num_gpus: 0 for the CPU, 1 for the first GPU.
    task: `pretraining` (`BertPretrainer`) or `classification` (a 2-class `BertClassifier`,
      the fine-tuning step of `run_classifier.py`).
    hidden_act: the feed-forward activation.
    fused_update: whether a bfloat16 step may update with the fused AdamW kernel
      (`official_bert.ops.adam_update`); False forces the compiled update.
    fused_elementwise: whether a bfloat16 step on `cpu_onednn` may run its element-wise work in
      the fused kernels (`official_bert.ops.bfloat16_elementwise`); False forces the compiled
      XLA programs.
  """

  def __init__(self, layers, hidden, batch, steps, seq=128, predictions=20, xla=True,
               dtype="float32", kernels="auto", num_gpus=0, task="pretraining",
               hidden_act="gelu", fused_update=True, fused_elementwise=True):
    self.steps, self.step = steps, steps
    engine = RuntimeConfig(enable_xla=xla, kernels=kernels, dtype=dtype, num_gpus=num_gpus)
    strategy = engine.setup()
    self.choice = engine.accelerator_choice(strategy)
    config = bert_config(layers, hidden, hidden_act)
    kernels = self.choice.kernels
    with strategy.scope():
      if task == "pretraining":
        model = BertPretrainer(config, kernels=kernels)
        loss_fn = functools.partial(pretraining_losses, kernels=kernels)
        metrics_fn = functools.partial(pretraining_metrics, kernels=kernels)
        batch_data = random_batch(batch, seq, predictions)
      else:
        model = BertClassifier(config, num_classes=2, kernels=kernels)
        loss_fn, metrics_fn = classification_loss(False), classification_metrics
        batch_data = classification_batch(batch, seq)
      optimizer = create_optimizer("adamw", 1e-4, 10**6, 10, dtype=dtype)
    self.model_dir = tempfile.TemporaryDirectory(prefix="throughput-")  # removed with self
    self.trainer = Trainer(model, loss_fn, optimizer, strategy=strategy,
                           model_dir=self.model_dir.name, runtime=engine, metrics_fn=metrics_fn,
                           config=TrainerConfig(steps_per_loop=steps, log_steps=steps,
                                                save_checkpoints_steps=10**9))
    self.dataset_fn = lambda _: tf.data.Dataset.from_tensors(batch_data).repeat()
    # The trainer chooses its update, and the layers their element-wise kernels, when the first
    # `train` traces the step.
    with _environment({adam_update.ENABLE_VARIABLE: "1" if fused_update else "0",
                       bfloat16_elementwise.ENABLE_VARIABLE: "1" if fused_elementwise else "0"}):
      self.trainer.train(self.dataset_fn, self.step)  # compiles

  def sequences_per_second(self):
    self.step += self.steps
    return self.trainer.train(self.dataset_fn, self.step)["examples_per_second"]


class KerasHub:
  """KerasHub's BERT backbone and MLM head under `Model.fit` (by default `jit_compile=True`)."""

  def __init__(self, layers, hidden, batch, steps, seq=128, predictions=20, dtype="float32",
               jit_compile=True):
    import keras_hub  # pylint: disable=import-outside-toplevel
    keras.mixed_precision.set_global_policy(
        {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[dtype])
    self.steps = steps
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=max(1, hidden // 64),
        hidden_dim=hidden, intermediate_dim=4 * hidden, max_sequence_length=512)
    inputs = dict(backbone.input, mask_positions=keras.Input((None,), dtype="int32"))
    encoded = backbone(backbone.input)
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=VOCAB, token_embedding=backbone.token_embedding,
        intermediate_activation="gelu", name="mlm")(encoded["sequence_output"],
                                                    inputs["mask_positions"])
    nsp = keras.layers.Dense(2, name="nsp")(encoded["pooled_output"])
    self.model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    if dtype == "float16":
      optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    self.model.compile(
        optimizer=optimizer,
        loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
        jit_compile=jit_compile, steps_per_execution=steps)
    features, labels = random_batch(batch, seq, predictions)
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


def best_speeds(runners, repeats):
  """The best sequences per second of each runner over `repeats` rounds, the runners taking turns
  in each round, so that a change in the machine's load falls on all of them alike.

  Args:
    runners: dict of names to objects with `sequences_per_second()`.
    repeats: the rounds.
  """
  best = {name: 0.0 for name in runners}
  for _ in range(repeats):
    for name, runner in runners.items():
      best[name] = max(best[name], runner.sequences_per_second())
  return best


def ratio_cell(ratio):
  """A ratio column's cell: `1.23x`, or `-` where the run timed nothing to compare with."""
  return "-" if ratio is None else f"{ratio:.2f}x"
