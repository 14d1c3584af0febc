"""BERT-Base and BERT-Large on one GPU: pre-training, SQuAD fine-tuning and inference throughput,
as model FLOP/s and as a share (MFU) of the GPU's dense matmul peak measured in the same run.

Rows, each the best of `--repeats` timed windows of steps compiled by XLA:

* `pretrain`: `BertPretrainer` + `Trainer` (AdamW, clipping, the pre-training losses and metrics)
  at sequence 128 (20 masked positions) and 512 (76), `--dtype` mixed precision, next to
  KerasHub's `BertBackbone` under `Model.fit` when it is installed (`pip install -e .[benchmark]`);
* `squad`: `BertSpanLabeler` + `Trainer` at sequence 384, the SQuAD loss;
* `inference`: the encoder's forward pass at sequence 128, compiled.

Model FLOPs count the matrix products (see `throughput.py`); MFU divides them by the best of eight
chained `--dtype` products of two 8192 x 8192 matrices on the same GPU.

    pip install -e ".[gpu,benchmark]"
    python benchmarks/gpu_pretraining_throughput.py [--configs=base,large] [--dtype=bfloat16]
    python benchmarks/gpu_pretraining_throughput.py --smoke    # tiny shapes, any device, seconds
"""

import functools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import tempfile

from absl import app, flags, logging
import keras
import numpy as np
from results import recording
import tensorflow as tf
from throughput import (
    KerasHub,
    Ours,
    bert_config,
    encoder_flops,
    matmul_peak,
    random_batch,
    timed,
    training_flops,
)

from official_bert.models import BertSpanLabeler
from official_bert.networks import BertEncoder
from official_bert.tasks.question_answering import span_loss
from official_bert.training import RuntimeConfig, Trainer, TrainerConfig, create_optimizer

flags.DEFINE_list("configs", ["base", "large"], "Models to time: tiny, base, large.")
flags.DEFINE_enum("dtype", "bfloat16", ["bfloat16", "float16", "float32"], "Compute dtype.")
flags.DEFINE_enum("kernels", "auto", ["auto", "stock", "cpu_xla"], "Kernel backend.")
flags.DEFINE_boolean("kerashub", True, "Time KerasHub's BERT beside ours when it is installed.")
flags.DEFINE_integer("repeats", 3, "Timed windows per row; the best counts.")
flags.DEFINE_boolean("smoke", False, "A one-layer model, tiny shapes, one window and one "
                     "pre-training length: checks that the script runs.")
FLAGS = flags.FLAGS

# name: (layers, hidden)
MODELS = {"tiny": (2, 64), "base": (12, 768), "large": (24, 1024), "smoke": (1, 64)}
# Per-GPU batches of 80 GB GPUs: (pre-training at 128, at 512, SQuAD at 384, inference at 128).
BATCHES = {"tiny": (4, 2, 2, 8), "smoke": (4, 2, 2, 8), "base": (256, 64, 48, 512),
           "large": (128, 32, 24, 256)}
SMOKE_SEQ = {128: 16, 512: 32, 384: 24}
PREDICTIONS = {128: 20, 512: 76}


class SquadFineTuning:
  """`BertSpanLabeler` trained by the `Trainer` on one fixed batch of random windows."""

  def __init__(self, layers, hidden, batch, steps, seq, dtype, kernels, num_gpus):
    self.steps, self.step = steps, steps
    engine = RuntimeConfig(kernels=kernels, dtype=dtype, num_gpus=num_gpus)
    strategy = engine.setup()
    with strategy.scope():
      model = BertSpanLabeler(bert_config(layers, hidden),
                              kernels=engine.accelerator_choice(strategy).kernels)
      optimizer = create_optimizer("adamw", 3e-5, 10**6, 10, dtype=dtype)
    self.model_dir = tempfile.TemporaryDirectory(prefix="squad-throughput-")
    self.trainer = Trainer(model, span_loss, optimizer, strategy=strategy,
                           model_dir=self.model_dir.name, runtime=engine,
                           config=TrainerConfig(steps_per_loop=steps, log_steps=steps,
                                                save_checkpoints_steps=10**9))
    features, _ = random_batch(batch, seq, 1)
    features = {name: features[name] for name in ("input_word_ids", "input_mask",
                                                  "input_type_ids")}
    rng = np.random.default_rng(1)
    labels = {"start_positions": rng.integers(0, seq, batch).astype("int32"),
              "end_positions": rng.integers(0, seq, batch).astype("int32")}
    self.dataset_fn = lambda _: tf.data.Dataset.from_tensors((features, labels)).repeat()
    self.trainer.train(self.dataset_fn, self.step)  # compiles

  def sequences_per_second(self):
    self.step += self.steps
    return self.trainer.train(self.dataset_fn, self.step)["examples_per_second"]


class Inference:
  """The encoder's forward pass, compiled by XLA, `steps` batches per timed window."""

  def __init__(self, layers, hidden, batch, steps, seq, dtype, kernels, num_gpus):
    engine = RuntimeConfig(kernels=kernels, dtype=dtype, num_gpus=num_gpus)
    self.encoder = BertEncoder(bert_config(layers, hidden),
                               kernels=engine.accelerator_choice(engine.setup()).kernels)
    features, _ = random_batch(batch, seq, 1)
    device = "/gpu:0" if num_gpus else "/cpu:0"
    with tf.device(device):
      self.inputs = {name: tf.constant(features[name]) for name in ("input_word_ids",
                                                                    "input_mask",
                                                                    "input_type_ids")}
    self.batch, self.steps = batch, steps

    @tf.function(jit_compile=True)
    def forward(inputs):
      return self.encoder(inputs, training=False)["pooled_output"]

    self.forward = forward
    self._window()  # compiles

  def _window(self):
    for _ in range(self.steps):
      outputs = self.forward(self.inputs)
    outputs.numpy()

  def sequences_per_second(self):
    return self.steps * self.batch / timed(self._window)


def _kerashub_available():
  try:
    import keras_hub  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    return False
  return True


def rows(configs, dtype, kernels, repeats, smoke, with_kerashub):
  """Yields `(model, workload, implementation, seq/s, model FLOPs per sequence)`."""
  num_gpus = 1 if tf.config.list_physical_devices("GPU") else 0
  steps = 2 if smoke else 10
  for name in configs:
    layers, hidden = MODELS[name]
    pretrain_128, pretrain_512, squad_batch, inference_batch = BATCHES[name]
    runs = []
    # A smoke run times pre-training at one length: the second row runs the same code.
    pretraining = ((128, pretrain_128),) if smoke else ((128, pretrain_128), (512, pretrain_512))
    for seq, batch in pretraining:
      length = SMOKE_SEQ[seq] if smoke else seq
      predictions = min(PREDICTIONS[seq], length // 4)
      flops = training_flops(layers, hidden, batch, length, predictions) / batch
      shape = dict(layers=layers, hidden=hidden, batch=batch, steps=steps, seq=length,
                   predictions=predictions, dtype=dtype)
      runs.append((f"pretrain seq {length}", "ours", flops, functools.partial(
          Ours, **shape, xla=True, kernels=kernels, num_gpus=num_gpus)))
      if with_kerashub:
        runs.append((f"pretrain seq {length}", "kerashub", flops,
                     functools.partial(KerasHub, **shape)))
    length = SMOKE_SEQ[384] if smoke else 384
    runs.append((f"squad seq {length}", "ours",
                 3 * encoder_flops(layers, hidden, length, length),
                 functools.partial(SquadFineTuning, layers, hidden, squad_batch, steps, length,
                                   dtype, kernels, num_gpus)))
    length = SMOKE_SEQ[128] if smoke else 128
    runs.append((f"inference seq {length}", "ours", encoder_flops(layers, hidden, length, length),
                 functools.partial(Inference, layers, hidden, inference_batch, steps, length,
                                   dtype, kernels, num_gpus)))
    for workload, implementation, flops, build in runs:
      runner = build()
      speed = max(runner.sequences_per_second() for _ in range(repeats))
      yield f"{name} L{layers}/H{hidden}", workload, implementation, speed, flops
      del runner
      keras.backend.clear_session()


def main(_):
  logging.set_verbosity(logging.WARNING)
  smoke = FLAGS.smoke
  configs = ["smoke"] if smoke else FLAGS.configs
  repeats = 1 if smoke else FLAGS.repeats
  gpus = tf.config.list_physical_devices("GPU")
  device = (tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
            if gpus else "CPU (no GPU visible)")
  peak = matmul_peak(FLAGS.dtype, size=512 if smoke else 8192, repeats=2 if smoke else 5)
  print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; {device}; {FLAGS.dtype}, XLA, "
        f"kernels {FLAGS.kernels}; dense {FLAGS.dtype} matmul peak {peak / 1e12:.1f} TFLOP/s")
  with_kerashub = FLAGS.kerashub and _kerashub_available()
  if FLAGS.kerashub and not with_kerashub:
    print("KerasHub is not installed (pip install -e .[benchmark]); its rows are left out.")
  print(f"\n{'model':<18}{'workload':<20}{'implementation':<16}{'seq/s':>10}{'TFLOP/s':>10}"
        f"{'MFU':>8}")
  for model, workload, implementation, speed, flops in rows(
      configs, FLAGS.dtype, FLAGS.kernels, repeats, smoke, with_kerashub):
    achieved = speed * flops
    print(f"{model:<18}{workload:<20}{implementation:<16}{speed:10.1f}{achieved / 1e12:10.2f}"
          f"{100 * achieved / peak:7.1f}%", flush=True)


if __name__ == "__main__":
  app.run(recording("gpu_pretraining_throughput", main, smoke=lambda: FLAGS.smoke))
