"""The Keras model on JAX and PyTorch on one GPU, without TensorFlow: float32 agreement with
TensorFlow's outputs, `Model.fit`, and BERT-Base pre-training steps beside Hugging Face's
`BertForPreTraining` in PyTorch on the same GPU.

It runs in two halves, because a GPU machine for JAX or PyTorch need not have TensorFlow:

    python benchmarks/backends_gpu.py --write_job=JOB    # with TensorFlow (on any machine): a
                                                         # small encoder's weights, inputs and
                                                         # TensorFlow's float32 outputs
    python benchmarks/backends_gpu.py --job=JOB          # on the GPU machine, with keras and
                                                         # jax / torch (+ transformers)
    python benchmarks/backends_gpu.py --write_job=JOB --smoke && \
    python benchmarks/backends_gpu.py --job=JOB --smoke  # tiny shapes, any device, a minute

The second prints one table and writes it to `benchmarks/results/backends_gpu.md`. Each backend
runs in a process of its own (Keras reads `KERAS_BACKEND` once), with `tensorflow` made
unimportable there, so every row also shows that the model needs no TensorFlow:

* `agreement`: the job's encoder (4 layers, hidden 256; 1 and 32 in a smoke job), its
  `.weights.h5` loaded through Keras, run on the GPU in float32; the largest absolute difference
  from TensorFlow's outputs on a CPU, at the framework's default matmul precision (JAX lets XLA
  use TF32 on NVIDIA GPUs; PyTorch does not by default) and at full float32;
* `fit`: `BertClassifier` on that encoder, 30 `Model.fit` steps on one batch; the loss's fall;
* `pretrain`: `BertPretrainer` at BERT-Base, `mixed_bfloat16`, AdamW with clipping, the masked-LM
  and next-sentence cross-entropies, `Model.fit` (compiled by XLA on JAX, eager on PyTorch);
  sequences per second, the best of `--windows` epochs of `--steps` steps after a first one that
  compiles (its seconds are the last column);
* `hf_pretrain`: the peer, `transformers.BertForPreTraining` in PyTorch, the step of
  `torch_pretraining.py` (`torch.autocast` bfloat16, fused AdamW, the masked-LM head on the masked
  positions only) on the GPU, eager and `torch.compile`d.

MFU divides the model FLOPs (`flops.py`) by the best of chained bfloat16 8192 x 8192 products on
the same GPU, through JAX.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

from absl import app, flags
from flops import training_flops
import numpy as np
from results import recording

flags.DEFINE_string("write_job", None, "Write the job (weights, inputs, TensorFlow's outputs) to "
                    "this folder, with TensorFlow, and stop.")
flags.DEFINE_string("job", None, "A folder written by --write_job: run the GPU checks on it.")
flags.DEFINE_integer("batch", 64, "Pre-training batch size.")
flags.DEFINE_integer("steps", 20, "Pre-training steps per timed window.")
flags.DEFINE_integer("windows", 3, "Timed windows per row; the best counts.")
flags.DEFINE_integer("layers", 12, "Pre-training model depth (12: BERT-Base).")
flags.DEFINE_integer("hidden", 768, "Pre-training model width (768: BERT-Base).")
flags.DEFINE_boolean("smoke", False, "One layer of width 64, tiny batches, one window, a small "
                     "matmul peak and no torch.compile: checks that the script runs, on any "
                     "device, and writes no results file.")
flags.DEFINE_integer("worker_timeout", 190, "Seconds each backend's process may take.")
flags.DEFINE_string("worker", None, "Internal: run one backend's part (jax, torch or hf).")
FLAGS = flags.FLAGS

SEQ, PREDICTIONS, VOCAB = 128, 20, 30522
SMOKE = {"layers": 1, "hidden": 64, "batch": 4, "steps": 1, "windows": 1}
# The agreement model: small enough to travel (its weights are about 21 MB); a smoke job's is
# tinier still.
SMALL = dict(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
             intermediate_size=1024, max_position_embeddings=SEQ)
SMOKE_SMALL = dict(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=SEQ)
_TENSORFLOW = ("tensorflow", "tensorflow_text", "tensorflow_datasets")


def _agreement_inputs(vocab_size):
  rng = np.random.default_rng(0)
  lengths = np.array([128, 100, 64, 17, 128, 90, 33, 128])
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
  ids = rng.integers(5, vocab_size, (len(lengths), SEQ)).astype("int32") * mask
  types = ((np.arange(SEQ)[None] >= lengths[:, None] // 2) * mask).astype("int32")
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def write_job(folder):
  """Writes the small encoder's config, weights, inputs and TensorFlow's float32 outputs."""
  import keras  # pylint: disable=import-outside-toplevel

  from official_bert import BertConfig, BertEncoder  # pylint: disable=import-outside-toplevel
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  keras.utils.set_random_seed(0)
  config = BertConfig(**(SMOKE_SMALL if FLAGS.smoke else SMALL))
  encoder = BertEncoder(config)
  inputs = _agreement_inputs(config.vocab_size)
  outputs = encoder(inputs)
  encoder.save_weights(str(folder / "encoder.weights.h5"))
  np.savez(folder / "inputs.npz", **inputs)
  np.savez(folder / "expected.npz", **{key: np.asarray(outputs[key])
                                       for key in ("sequence_output", "pooled_output")})
  (folder / "job.json").write_text(json.dumps({"config": config.to_dict(),
                                               "keras": keras.__version__}))
  print(f"Wrote the job to {folder}.")


def _pretraining_batch(batch, seed=0):
  rng = np.random.default_rng(seed)
  x = {"input_word_ids": rng.integers(5, VOCAB, (batch, SEQ)).astype("int32"),
       "input_mask": np.ones((batch, SEQ), "int32"),
       "input_type_ids": (np.arange(SEQ)[None] >= SEQ // 2).repeat(batch, 0).astype("int32"),
       "masked_lm_positions": np.sort(rng.choice(np.arange(1, SEQ), (batch, PREDICTIONS)),
                                      axis=1).astype("int32")}
  y = {"mlm_logits": rng.integers(5, VOCAB, (batch, PREDICTIONS)).astype("int32"),
       "next_sentence_logits": rng.integers(0, 2, (batch,)).astype("int32")}
  return x, y


def _keras_worker(job):
  """One Keras backend's rows, as a dict."""
  import keras  # pylint: disable=import-outside-toplevel

  from official_bert import (  # pylint: disable=import-outside-toplevel
      BertClassifier,
      BertConfig,
      BertEncoder,
      BertPretrainer,
  )
  backend = keras.backend.backend()
  out = {"backend": backend, "keras": keras.__version__}
  if backend == "jax":
    import jax  # pylint: disable=import-outside-toplevel
    out["device"] = jax.devices()[0].device_kind
    out["version"] = f"jax {jax.__version__}"
    full_precision = lambda: jax.default_matmul_precision("highest")  # noqa: E731
  else:
    import contextlib  # pylint: disable=import-outside-toplevel

    import torch  # pylint: disable=import-outside-toplevel
    out["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    out["version"] = f"torch {torch.__version__}"

    @contextlib.contextmanager
    def full_precision():
      before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
      torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
      try:
        yield
      finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before

  # Agreement with TensorFlow's float32 outputs.
  job = pathlib.Path(job)
  config = BertConfig.from_dict(json.loads((job / "job.json").read_text())["config"])
  with np.load(job / "inputs.npz") as f:
    inputs = {key: f[key] for key in f.files}
  with np.load(job / "expected.npz") as f:
    expected = {key: f[key] for key in f.files}
  encoder = BertEncoder(config)
  encoder(inputs)
  encoder.load_weights(str(job / "encoder.weights.h5"))

  def error():
    outputs = encoder(inputs)
    return max(float(np.abs(keras.ops.convert_to_numpy(outputs[key]) - value).max())
               for key, value in expected.items())

  out["error_default"] = error()
  with full_precision():
    out["error_float32"] = error()

  # Model.fit on the GPU: the loss falls.
  keras.utils.set_random_seed(0)
  classifier = BertClassifier(config, num_classes=2, encoder=encoder)
  classifier.compile(optimizer=keras.optimizers.AdamW(1e-3),
                     loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
  labels = {"logits": np.arange(len(inputs["input_mask"])) % 2}
  losses = classifier.fit(inputs, labels, epochs=30, batch_size=len(labels["logits"]),
                          verbose=0).history["loss"]
  out["fit_first_loss"], out["fit_last_loss"] = float(losses[0]), float(losses[-1])

  # BERT-Base pre-training steps under mixed_bfloat16.
  keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
  pretrainer = BertPretrainer(_pretraining_config())
  cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  pretrainer.compile(
      optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
      loss={"mlm_logits": cross_entropy, "next_sentence_logits": cross_entropy},
      jit_compile=backend == "jax")
  x, y = _pretraining_batch(FLAGS.batch * FLAGS.steps)
  ends = []

  class Clock(keras.callbacks.Callback):

    def on_epoch_end(self, epoch, logs=None):
      ends.append(time.perf_counter())

  start = time.perf_counter()
  pretrainer.fit(x, y, batch_size=FLAGS.batch, epochs=1 + FLAGS.windows, verbose=0,
                           shuffle=False, callbacks=[Clock()])
  out["pretrain_compile_s"] = ends[0] - start
  out["pretrain_seq_per_s"] = max(FLAGS.batch * FLAGS.steps / (b - a)
                                  for a, b in zip(ends, ends[1:]))
  if backend == "jax":
    out["peak_flops"] = _jax_bf16_peak(size=512 if FLAGS.smoke else 8192)
  return out


def _jax_bf16_peak(size=8192, chain=8, repeats=5):
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
  b = (a.T / size).astype(jnp.bfloat16)
  a = a.astype(jnp.bfloat16)

  @jax.jit
  def products(x):
    for _ in range(chain):
      x = x @ b
    return x

  products(a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    products(a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return chain * 2 * size**3 / best


def _pretraining_config():
  """The pre-training rows' model: BERT-Base by default (`--layers`, `--hidden`)."""
  from official_bert import BertConfig  # pylint: disable=import-outside-toplevel
  return BertConfig(vocab_size=VOCAB, hidden_size=FLAGS.hidden, num_hidden_layers=FLAGS.layers,
                    num_attention_heads=FLAGS.hidden // 64, intermediate_size=4 * FLAGS.hidden,
                    max_position_embeddings=512)


def _hf_worker():
  """The peer's rows: `torch_pretraining.py`'s Hugging Face step, eager and compiled."""
  import torch  # pylint: disable=import-outside-toplevel
  import torch_pretraining  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  device = "cuda" if torch.cuda.is_available() else "cpu"
  model = torch_pretraining.pretraining_model(_pretraining_config().to_dict()).to(device)
  out = {"version": f"torch {torch.__version__}, transformers {transformers.__version__}",
         "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
  # torch.compile on a CPU builds C++ for minutes: a smoke run leaves it out.
  for name, compiled in (("eager", False), ("compiled", True))[:1 if FLAGS.smoke else 2]:
    stepper = torch_pretraining.Stepper(model, dict(
        compile=compiled, dtype="bfloat16", batch=FLAGS.batch, seq=SEQ, predictions=PREDICTIONS,
        steps=FLAGS.steps), device)
    start = time.perf_counter()
    stepper.window()  # the first: compiles, warms the allocator
    out[f"{name}_compile_s"] = time.perf_counter() - start
    out[f"{name}_seq_per_s"] = max(stepper.window() for _ in range(FLAGS.windows))
  return out


def _run_worker(name, job, timeout):
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  # The peer's process reads the model's shape from the package's BertConfig, which imports
  # Keras: on PyTorch's backend, which needs no TensorFlow either.
  env["KERAS_BACKEND"] = "jax" if name == "jax" else "torch"
  if name == "jax":
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
  command = [sys.executable, os.path.abspath(__file__), f"--worker={name}", f"--job={job}",
             *(f"--{flag}={FLAGS[flag].value}" for flag in ("batch", "steps", "windows",
                                                            "layers", "hidden", "smoke"))]
  try:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)
  except subprocess.TimeoutExpired:
    return {"failed": f"timed out after {timeout} s"}
  if done.returncode:
    sys.stderr.write(done.stderr[-3000:])
    return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "?"}
  return json.loads(done.stdout.strip().splitlines()[-1])


def _table(rows, hf):
  flops = training_flops(FLAGS.layers, FLAGS.hidden, 1, SEQ, PREDICTIONS)
  peak = rows.get("jax", {}).get("peak_flops")
  device = next((r["device"] for r in (*rows.values(), hf) if "device" in r), "?")
  lines = [f"GPU: {device}; bfloat16 matmul peak (JAX, 8192^3 chained): "
           + (f"{peak / 1e12:.0f} TFLOP/s" if peak else "not measured"),
           f"pre-training: L{FLAGS.layers}/H{FLAGS.hidden}, batch {FLAGS.batch}, sequence {SEQ},"
           f" {PREDICTIONS} masked positions, bfloat16; best of {FLAGS.windows} windows of "
           f"{FLAGS.steps} steps", "",
           "| backend | versions | float32 max error vs TF, default / full "
           "| fit loss first -> last | pre-train seq/s | MFU | first window s (compiles) |",
           "|---|---|---|---|---:|---:|---:|"]
  for name, row in rows.items():
    if "failed" in row:
      lines.append(f"| ours, Keras on {name} | failed: {row['failed']} | | | | | |")
      continue
    speed = row["pretrain_seq_per_s"]
    mfu = f"{speed * flops / peak:.0%}" if peak else "?"
    lines.append(
        f"| ours, Keras on {name} | keras {row['keras']}, {row['version']} | "
        f"{row['error_default']:.1e} / {row['error_float32']:.1e} | "
        f"{row['fit_first_loss']:.3f} -> {row['fit_last_loss']:.3f} | {speed:.0f} | {mfu} | "
        f"{row['pretrain_compile_s']:.0f} |")
  if "failed" in hf:
    lines.append(f"| Hugging Face BertForPreTraining | failed: {hf['failed']} | | | | | |")
  else:
    for name in ("eager", "compiled"):
      if f"{name}_seq_per_s" not in hf:
        continue
      speed = hf[f"{name}_seq_per_s"]
      mfu = f"{speed * flops / peak:.0%}" if peak else "?"
      lines.append(f"| Hugging Face BertForPreTraining, PyTorch {name} | {hf['version']} | "
                   f"| | {speed:.0f} | {mfu} | {hf[f'{name}_compile_s']:.0f} |")
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.write_job:
    write_job(FLAGS.write_job)
    return 0
  if not FLAGS.job:
    raise app.UsageError("Give --write_job=FOLDER (with TensorFlow) or --job=FOLDER (on the GPU).")
  if not pathlib.Path(FLAGS.job, "job.json").exists():
    raise app.UsageError(f"--job={FLAGS.job}: no job.json there; write it with --write_job.")
  if FLAGS.smoke:
    for name, value in SMOKE.items():
      FLAGS[name].value = value
  rows = {name: _run_worker(name, FLAGS.job, FLAGS.worker_timeout) for name in ("jax", "torch")}
  hf = _run_worker("hf", FLAGS.job, FLAGS.worker_timeout)
  print(_table(rows, hf))
  return 0


def _worker_main(argv):
  del argv
  if FLAGS.worker != "hf":
    for name in _TENSORFLOW:  # the model must not need it
      sys.modules[name] = None
  print(json.dumps(_hf_worker() if FLAGS.worker == "hf" else _keras_worker(FLAGS.job)))


if __name__ == "__main__":
  if any(arg.startswith("--worker=") for arg in sys.argv):
    app.run(_worker_main)
  elif any(arg.startswith("--write_job") for arg in sys.argv):  # a job is no result
    app.run(main)
  else:
    app.run(recording("backends_gpu", main, markdown=True, smoke=lambda: FLAGS.smoke))
