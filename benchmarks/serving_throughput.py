"""What a server gets from the exported SavedModels: latency and throughput on the CPU.

For each BERT size (random weights of a `BertConfig` preset) and sequence length, the classifier
and the encoder are exported twice (`jit_compile` off and on) and loaded in a fresh process that
imports only TensorFlow and tensorflow-text, with `tf.saved_model.load`, as TF Serving loads them.
Each signature is timed there:

* latency: one request of one text (batch 1), p50 and p99 over `--latency_calls` calls;
* throughput: sequences per second at each of `--batch_sizes`, over `--seconds` per cell;

for the raw-text signatures (`serving_default`: in-graph tokenization and packing) and the token-id
ones (`serve_token_ids`); the difference is the tokenizer's share of the time. The texts pack to
exactly the sequence length, so every batch runs in the largest bucket. Next to them the same
classifier in this process (a `tf.function` of the Keras model on token ids).

The FLOP rate counts the encoder's matrix products (forward: 2 FLOPs per multiply-add of the
dense layers, plus the attention's two S x S products) and is given as a share of the float32
matrix-product peak (one 4096 x 4096 `tf.matmul`, the best at the start and at the end) measured
in the serving process; on a shared machine both move with the load. Hugging Face
`BertModel` under `torch.compile` is timed on the same token ids when `torch` and `transformers`
are importable.

    python benchmarks/serving_throughput.py                   # the README table (long)
    python benchmarks/serving_throughput.py --configs=bert_L2_H128,bert_L4_H256 --seq_lengths=128
    python benchmarks/serving_throughput.py --smoke           # a tiny model, a few calls
"""

import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import importlib.util
import json
import subprocess
import sys
import tempfile
import time

from absl import app, flags, logging
import numpy as np
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, configs
from official_bert.export import export_classifier, export_encoder

flags.DEFINE_bool("smoke", False, "A tiny model, one sequence length, a few calls: checks that "
                  "the benchmark runs.")
flags.DEFINE_list("configs", ["bert_L2_H128", "bert_L4_H256", "bert_base"],
                  "BertConfig presets to time.")
flags.DEFINE_list("seq_lengths", ["128", "384"], "Sequence lengths (max_seq_length of the export).")
flags.DEFINE_list("batch_sizes", ["8", "32", "128"], "Batch sizes of the throughput cells.")
flags.DEFINE_integer("latency_calls", 50, "Calls at batch 1 for p50 and p99.")
flags.DEFINE_float("seconds", 3.0, "Timed seconds per throughput cell (at least two calls).")
flags.DEFINE_string("vocab_file", "../shared/data/vocab/bert-base-uncased-vocab.txt",
                    "A WordPiece vocabulary for the in-graph tokenizer; a made-up one if absent.")
FLAGS = flags.FLAGS

SMOKE = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64)
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# The serving process: only TensorFlow and tensorflow-text, as under TF Serving. It reads the job
# (exports, texts, cells) from stdin and writes one JSON result per cell to stdout.
_SERVER = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer ops)

def timed(call, inputs):
  start = time.perf_counter()
  for value in call(**inputs).values():
    value.numpy()
  return time.perf_counter() - start

def peak(size=4096, repeats=3):
  a, b = tf.random.normal((size, size)), tf.random.normal((size, size))
  matmul = tf.function(tf.matmul)
  matmul(a, b).numpy()
  best = min(timed(lambda x, y: {"c": matmul(x, y)}, {"x": a, "y": b}) for _ in range(repeats))
  return 2 * size ** 3 / best

job = json.load(sys.stdin)
results = {"peak": peak(), "cells": []}
rng = np.random.default_rng(0)
for cell in job["cells"]:
  model = tf.saved_model.load(cell["dir"])
  call = model.signatures[cell["signature"]]
  batch, seq = cell["batch"], cell["seq"]
  if cell["signature"] == "serving_default":
    inputs = {"text": tf.constant((job["texts"] * batch)[:batch])}
  else:
    ids = rng.integers(len(job["special"]), job["vocab_size"], (batch, seq)).astype("int32")
    inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
              "input_type_ids": tf.zeros_like(ids)}
  cell["first"] = timed(call, inputs)  # traces, and compiles with XLA
  if batch == 1:
    times = [timed(call, inputs) for _ in range(job["latency_calls"])]
    cell.update(p50=float(np.percentile(times, 50)), p99=float(np.percentile(times, 99)),
                rate=1 / float(np.median(times)))
  else:
    calls, elapsed = 0, 0.0
    while calls < 2 or elapsed < job["seconds"]:
      elapsed += timed(call, inputs)
      calls += 1
    cell.update(rate=batch * calls / elapsed)
  results["cells"].append(cell)
  del model, call
# The best of the start and the end, as the machine may have been busier at one of them.
results["peak"] = max(results["peak"], peak())
json.dump(results, sys.stdout)
"""


def load_average():
  """The 1-minute load average and the CPU count: the machine may be shared."""
  return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def forward_flops(config, seq):
  """FLOPs of the encoder's matrix products for one sequence of `seq` tokens."""
  hidden, inner = config.hidden_size, config.intermediate_size
  dense = 2 * seq * (4 * hidden * hidden + 2 * hidden * inner)
  attention = 2 * 2 * seq * seq * hidden
  return config.num_hidden_layers * (dense + attention)


def vocabulary(path, workdir, smoke):
  """The vocabulary file and the whole words the texts are made of."""
  if not smoke and tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      tokens = [line.strip() for line in f]
    return path, [t for t in tokens[1000:] if t.isalpha() and t.isascii()]
  words = [f"w{i}" for i in range(SMOKE.vocab_size - len(SPECIAL))]
  path = os.path.join(workdir, "vocab.txt")
  with tf.io.gfile.GFile(path, "w") as f:
    f.write("\n".join(SPECIAL + words) + "\n")
  return path, words


def texts_of(words, seq, count=16):
  """`count` texts of `seq - 2` whole-word tokens: each packs to exactly `seq`."""
  rng = np.random.default_rng(seq)
  return [" ".join(rng.choice(words, seq - 2)) for _ in range(count)]


def keras_rate(model, batch, seq, calls, seconds):
  """The in-process classifier on token ids: (p50, p99) seconds at batch 1, else sequences/s."""
  call = tf.function(lambda inputs: model(inputs, training=False))
  ids = np.random.default_rng(0).integers(len(SPECIAL), model.config.vocab_size, (batch, seq))
  inputs = {"input_word_ids": tf.constant(ids, tf.int32),
            "input_mask": tf.ones((batch, seq), tf.int32),
            "input_type_ids": tf.zeros((batch, seq), tf.int32)}

  def timed():
    start = time.perf_counter()
    call(inputs)["logits"].numpy()
    return time.perf_counter() - start

  first = timed()
  if batch == 1:
    times = [timed() for _ in range(calls)]
    return {"p50": float(np.percentile(times, 50)), "p99": float(np.percentile(times, 99)),
            "rate": 1 / float(np.median(times)), "first": first}
  elapsed, done = 0.0, 0
  while done < 2 or elapsed < seconds:
    elapsed += timed()
    done += 1
  return {"rate": batch * done / elapsed, "first": first}


def torch_rate(config, batch, seq, seconds):
  """Hugging Face `BertModel` under `torch.compile` on random ids: `first` call seconds and
  `rate` (sequences/s), or None without torch and transformers."""
  if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
    return None
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  model = transformers.BertModel(transformers.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size)).eval()
  compiled = torch.compile(model)
  ids = torch.randint(len(SPECIAL), config.vocab_size, (batch, seq))
  with torch.inference_mode():
    start = time.perf_counter()
    compiled(input_ids=ids)
    first = time.perf_counter() - start
    elapsed, done = 0.0, 0
    while done < 2 or elapsed < seconds:
      start = time.perf_counter()
      compiled(input_ids=ids)
      elapsed += time.perf_counter() - start
      done += 1
  return {"first": first, "rate": batch * done / elapsed}


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  if FLAGS.smoke:
    sizes, seq_lengths, batch_sizes = {"smoke": SMOKE}, [32], [4]
    latency_calls, seconds = 3, 0.1
  else:
    sizes = {name: configs.get_preset(name) for name in FLAGS.configs}
    seq_lengths = [int(s) for s in FLAGS.seq_lengths]
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    latency_calls, seconds = FLAGS.latency_calls, FLAGS.seconds
  print(f"start: {load_average()}; TF {tf.__version__}, TF_ENABLE_ONEDNN_OPTS="
        f"{os.environ['TF_ENABLE_ONEDNN_OPTS']}", flush=True)
  workdir = tempfile.mkdtemp(prefix="serving_throughput_")
  vocab_file, words = vocabulary(FLAGS.vocab_file, workdir, FLAGS.smoke)
  rows = []
  for name, config in sizes.items():
    model = BertClassifier(config, num_classes=2)
    for seq in seq_lengths:
      cells = []
      for jit in (False, True):
        options = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=seq,
                       jit_compile=jit, overwrite=True)
        for kind, export in (("classifier", export_classifier), ("encoder", export_encoder)):
          directory = os.path.join(workdir, f"{name}-{seq}-{kind}-{'xla' if jit else 'graph'}")
          export(model if kind == "classifier" else model.encoder, directory, **options)
          for signature in ("serving_default", "serve_token_ids"):
            cells += [{"dir": directory, "kind": kind, "xla": jit, "signature": signature,
                       "batch": batch, "seq": seq} for batch in [1] + batch_sizes]
      job = {"cells": cells, "texts": texts_of(words, seq), "special": SPECIAL,
             "vocab_size": len(SPECIAL) + len(words), "latency_calls": latency_calls,
             "seconds": seconds}
      served = subprocess.run([sys.executable, "-c", _SERVER], input=json.dumps(job),
                              capture_output=True, text=True, check=False)
      if served.returncode:
        raise RuntimeError(f"The serving process failed:\n{served.stderr[-3000:]}")
      result = json.loads(served.stdout)
      for cell in result["cells"]:
        rows.append(dict(cell, config=name, model=f"{cell['kind']} SavedModel",
                         peak=result["peak"], flops=forward_flops(config, seq)))
      for batch in [1] + batch_sizes:
        rows.append(dict(keras_rate(model, batch, seq, latency_calls, seconds), config=name,
                         seq=seq, batch=batch, model="classifier Keras", xla=False,
                         signature="in-process", peak=result["peak"],
                         flops=forward_flops(config, seq)))
        rows.append(dict(torch_rate(config, batch, seq, seconds) or {"rate": None}, config=name,
                         seq=seq, batch=batch, model="HF torch.compile", xla=None,
                         signature="token ids", peak=result["peak"],
                         flops=forward_flops(config, seq)))
      print(f"{name} seq {seq} done: {load_average()}, matmul peak "
            f"{result['peak'] / 1e9:.0f} GFLOP/s", flush=True)
  tf.io.gfile.rmtree(workdir)
  print_table(rows)
  print(f"end: {load_average()}")


def print_table(rows):
  """One line per cell; the tokenizer's share compares a raw-text cell with its token-id twin."""
  by_key = {(r["config"], r["seq"], r["batch"], r["model"], r["xla"], r["signature"]): r
            for r in rows}
  print("\nconfig        seq  batch  model                 XLA  signature       1st ms  "
        "p50 ms  p99 ms    seq/s  GFLOP/s  % peak  tokenizer")
  for r in rows:
    if r["rate"] is None:
      print(f"{r['config']:<12} {r['seq']:>4} {r['batch']:>6}  {r['model']:<21} {'-':>3}  "
            f"{r['signature']:<15} {'not installed':>48}")
      continue
    gflops = r["rate"] * r["flops"] / 1e9
    latency = (f"{r['p50'] * 1e3:7.2f} {r['p99'] * 1e3:7.2f}" if r["batch"] == 1
               else f"{'':>7} {'':>7}")
    share = ""
    if r["signature"] == "serving_default":
      ids = by_key[(r["config"], r["seq"], r["batch"], r["model"], r["xla"], "serve_token_ids")]
      share = f"{max(0.0, 1 - r['rate'] / ids['rate']):7.0%}"
    xla = "-" if r["xla"] is None else "on" if r["xla"] else "off"
    print(f"{r['config']:<12} {r['seq']:>4} {r['batch']:>6}  {r['model']:<21} "
          f"{xla:>3}  {r['signature']:<15} {r['first'] * 1e3:7.1f} {latency} "
          f"{r['rate']:8.1f} {gflops:8.1f} {gflops * 1e9 / r['peak']:7.1%}  {share}")
  peaks = sorted({r["peak"] for r in rows})
  print(f"float32 matmul peak in the serving processes: {peaks[0] / 1e9:.0f} to "
        f"{peaks[-1] / 1e9:.0f} GFLOP/s (each row's share is of its own process's peak)")


if __name__ == "__main__":
  app.run(main)
