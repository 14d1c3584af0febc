"""What a server gets from the exported SavedModels: latency and throughput on the CPU.

For each BERT size (random weights of a `BertConfig` preset), sequence length and serving dtype
(`--dtypes`: float32, and bfloat16 with its weights stored in bfloat16), the classifier and the
encoder are exported with XLA off and on (`--xla`) and loaded in a fresh process that imports only
TensorFlow and tensorflow-text, with `tf.saved_model.load`, as TF Serving loads them, and that runs
TensorFlow's oneDNN kernels as a server on this CPU would by default (`--server_onednn`). Each
signature is timed there:

* latency: one request of one text (batch 1), p50 and p99 over `--latency_calls` calls;
* throughput: sequences per second at each of `--batch_sizes`, over `--seconds` per cell;

for the raw-text signatures (`serving_default`: in-graph tokenization and packing) and the token-id
ones (`serve_token_ids`); the difference is the tokenizer's share of the time. The texts pack to
exactly the sequence length, so every batch runs in the largest bucket. Next to them the same
classifier in this process (a `tf.function` of the Keras model on token ids), in each dtype.

Hugging Face `transformers.BertModel` runs on the same weights (the encoder's, mapped by the
Hugging Face checkpoint names) and the same token ids, in float32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`, each eager and with `torch.compile`, in a process
of `--torch_python` (an environment with `torch` and `transformers`; they are no dependencies of
this package): `benchmarks/torch_serving.py`. Its outputs are checked against the encoder's.

The FLOP rate counts the encoder's matrix products (forward: 2 FLOPs per multiply-add of the
dense layers, plus the attention's two S x S products) and is given as a share of the matrix-product
peak of the row's dtype (one 4096 x 4096 `tf.matmul` in float32 or bfloat16 without XLA, as in
`matmul_ceiling.py`, the best at the start and at the end; 512 x 512 under `--smoke`) measured
in the serving process; on a shared machine both move with the load. PyTorch's own peaks are
printed below the table.

    python benchmarks/serving_throughput.py --torch_python=/path/to/venv/bin/python  # long
    python benchmarks/serving_throughput.py --configs=bert_base --seq_lengths=128 \
        --batch_sizes=8 --kinds=classifier --signatures=serve_token_ids --torch_python=...
    python benchmarks/serving_throughput.py --smoke           # a tiny model, a few calls

`--formats=litert,onnx` adds the rows of `format_serving.py`: the classifier on token ids as a
LiteRT file and as an ONNX file in ONNX Runtime, in float32 and int8 (dynamic, and calibrated
static), and, with `--torch_python` (whose environment also has onnx and onnxruntime), the
Hugging Face `BertModel` on the same weights exported to ONNX and run by ONNX Runtime in float32
and dynamic int8 (`hf_onnx_serving.py`). `--formats=openvino` adds the package's OpenVINO exports
of the classifier (`--format=openvino`, the `[openvino]` extra): float32, the same folder at the
CPU plugin's bfloat16 precision, and static int8 calibrated on random-id batches, served in a
process of their own (`openvino_serving.py`, run by `--openvino_python`, by default this one)
so that OpenVINO's threads share no process with TensorFlow's. Their GFLOP/s column counts the
same products; int8 rows give no share of a peak.

    python benchmarks/serving_throughput.py --configs=bert_base --seq_lengths=128 \
        --batch_sizes=8 --kinds=classifier --signatures=serve_token_ids --xla=off \
        --formats=litert,onnx,openvino --torch_python=/path/to/venv/bin/python
"""

import os

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import json
import pathlib
import subprocess
import sys
import tempfile

from absl import app, flags, logging
import format_serving
import hf_bridge
import numpy as np
from results import recording
from serving_common import time_calls
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, configs
from official_bert.checkpoints import model_info
from official_bert.common import cpuinfo
from official_bert.export import export_classifier, export_encoder, precision
from official_bert.training import accelerators

flags.DEFINE_bool("smoke", False, "A tiny model, one sequence length, a few calls: checks that "
                  "the benchmark runs.")
flags.DEFINE_list("configs", ["bert_L2_H128", "bert_L4_H256", "bert_base"],
                  "BertConfig presets to time.")
flags.DEFINE_list("seq_lengths", ["128", "384"], "Sequence lengths (max_seq_length of the export).")
flags.DEFINE_list("batch_sizes", ["8", "32", "128"], "Batch sizes of the throughput cells.")
flags.DEFINE_list("dtypes", list(precision.SERVING_DTYPES), "Serving dtypes of the exports.")
flags.DEFINE_list("xla", ["off", "on"], "Export with XLA off, on, or both.")
flags.DEFINE_list("kinds", ["classifier", "encoder"], "The exported models.")
flags.DEFINE_list("signatures", ["serving_default", "serve_token_ids"], "The signatures timed.")
flags.DEFINE_string("torch_python", None,
                    "Python of an environment with torch and transformers for the Hugging Face "
                    "rows; default: this Python if it has them.")
flags.DEFINE_enum("server_onednn", "default", ["default", "on", "off"],
                  "TensorFlow's oneDNN kernels in the serving process: 'default' leaves "
                  "TF_ENABLE_ONEDNN_OPTS unset there, as in a server started without it (on for "
                  "CPUs with VNNI, AVX512-BF16 or AMX); 'on' or 'off' sets it to 1 or 0.")
flags.DEFINE_list("formats", [], "Also time the classifier as LiteRT and ONNX files "
                  "(format_serving.py), and Hugging Face through ONNX Runtime; 'openvino' the "
                  "package's OpenVINO exports, float32 and int8 (openvino_serving.py).")
flags.DEFINE_string("openvino_python", None,
                    "Python of an environment with openvino that serves the OpenVINO exports "
                    "(--formats=openvino); default: this Python.")
flags.DEFINE_integer("latency_calls", 50, "Calls at batch 1 for p50 and p99.")
flags.DEFINE_float("seconds", 3.0, "Timed seconds per throughput cell (at least two calls).")
flags.DEFINE_string("vocab_file", "../shared/data/vocab/bert-base-uncased-vocab.txt",
                    "A WordPiece vocabulary for the in-graph tokenizer; a made-up one if absent.")
FLAGS = flags.FLAGS

SMOKE = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64)
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# The serving process: only TensorFlow and tensorflow-text, as under TF Serving (and the NumPy
# timing of serving_common.py, as every row is timed). It reads the job (exports, texts, cells)
# from stdin and writes one JSON result per cell to stdout.
_SERVER = r"""
import json, os, sys, time
job = json.load(sys.stdin)
sys.path.insert(0, job["benchmarks"])
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer ops)
from serving_common import time_calls

def answer(call, inputs):
  for value in call(**inputs).values():
    value.numpy()

def timed(call, inputs):
  start = time.perf_counter()
  answer(call, inputs)
  return time.perf_counter() - start

def peak(dtype, size=4096, repeats=3):
  a, b = (tf.cast(tf.random.normal((size, size)), dtype) for _ in range(2))
  matmul = tf.function(tf.matmul)
  matmul(a, b).numpy()
  best = min(timed(lambda x, y: {"c": matmul(x, y)}, {"x": a, "y": b}) for _ in range(repeats))
  return 2 * size ** 3 / best

results = {"peak": {dtype: peak(dtype, job["peak_size"]) for dtype in job["dtypes"]},
           "cells": [], "onednn_variable": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")}
rng = np.random.default_rng(0)
loaded = {}
for cell in job["cells"]:
  # Each cell loads its export afresh, but a smoke run loads each export once.
  model = loaded.get(cell["dir"]) or tf.saved_model.load(cell["dir"])
  if job["smoke"]:
    loaded[cell["dir"]] = model
  call = model.signatures[cell["signature"]]
  batch, seq = cell["batch"], cell["seq"]
  if cell["signature"] == "serving_default":
    inputs = {"text": tf.constant((job["texts"] * batch)[:batch])}
  else:
    ids = rng.integers(len(job["special"]), job["vocab_size"], (batch, seq)).astype("int32")
    inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
              "input_type_ids": tf.zeros_like(ids)}
  # The first call traces, and compiles with XLA.
  cell.update(time_calls(lambda: answer(call, inputs), batch, job["seconds"],
                         job["latency_calls"]))
  results["cells"].append(cell)
  del model, call
# The best of the start and the end, as the machine may have been busier at one of them.
results["peak"] = {dtype: max(value, peak(dtype, job["peak_size"]))
                   for dtype, value in results["peak"].items()}
json.dump(results, sys.stdout)
"""


def server_environment(setting, environ):
  """The serving process's environment: `environ` with `TF_ENABLE_ONEDNN_OPTS` as `setting` says
  (`default`: unset; `on`: 1; `off`: 0)."""
  environment = {key: value for key, value in environ.items()
                 if key != accelerators.ONEDNN_VARIABLE}
  if setting != "default":
    environment[accelerators.ONEDNN_VARIABLE] = "1" if setting == "on" else "0"
  return environment


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
  return time_calls(lambda: call(inputs)["logits"].numpy(), batch, seconds, calls)


TORCH_SCRIPT = pathlib.Path(__file__).resolve().parent / "torch_serving.py"
HF_ONNX_SCRIPT = pathlib.Path(__file__).resolve().parent / "hf_onnx_serving.py"
# Fixed ids on which the Hugging Face model's outputs must match the encoder's.
CHECK_IDS = [[2, 7, 9, 11, 13, 3]]


def torch_rows(encoder, batches, seq, seconds, workdir):
  """Hugging Face `BertModel` on the encoder's weights: one result per (dtype, compile, batch),
  with `check` (its outputs on `CHECK_IDS`); None without a Python that has torch."""
  python = hf_bridge.find_torch_python(FLAGS.torch_python)
  if python is None:
    return None
  config = encoder.config.to_dict()
  shapes = hf_bridge.run_torch(python, TORCH_SCRIPT, {"names": True, "config": config})
  path = os.path.join(workdir, "hf_weights.npz")
  np.savez(path, **hf_bridge.hf_weights(encoder, shapes))
  cells = [{"dtype": dtype, "compile": compiled, "batch": batch, "seq": seq}
           for dtype in FLAGS.dtypes for compiled in (False, True) for batch in batches]
  return hf_bridge.run_torch(python, TORCH_SCRIPT,
                             {"weights": path, "config": config, "cells": cells,
                              "check_ids": CHECK_IDS, "seconds": seconds})


OPENVINO_SCRIPT = pathlib.Path(__file__).resolve().parent / "openvino_serving.py"


def openvino_rows(model, batches, seq, calls, seconds, workdir, common, notes):
  """The package's OpenVINO exports of the classifier, served by `openvino_serving.py` in a
  process of `--openvino_python`; no rows, and a note, without the `[openvino]` extra."""
  from official_bert.export import formats  # pylint: disable=import-outside-toplevel

  try:
    formats.check_format("openvino")
  except formats.FormatError as error:
    notes.append(f"OpenVINO rows left out: {error}")
    return []
  job = dict(format_serving.openvino_job(model, model_info(model), seq, workdir), calls=calls,
             seconds=seconds, cells=[{"batch": batch, "seq": seq} for batch in batches])
  answer = hf_bridge.run_torch(FLAGS.openvino_python or sys.executable, OPENVINO_SCRIPT, job)
  notes.append(f"OpenVINO {answer['versions']['openvino']}; the exports took "
               f"{job['export_s']['float32']:.0f} s (float32) and {job['export_s']['int8']:.0f} s "
               "(int8, calibrated)")
  return [dict(cell, **common, xla=None, signature="token ids", peak=None)
          for cell in answer["cells"]]


def format_rows(model, batches, seq, calls, seconds, workdir, common, notes):
  """The rows of `--formats`: ours as LiteRT and ONNX files, Hugging Face through ONNX Runtime."""
  found = [dict(row, **common, xla=None, signature="token ids", peak=None)
           for row in format_serving.rows(model, model_info(model), seq, batches, calls, seconds,
                                          workdir, FLAGS.formats)]
  if "openvino" in FLAGS.formats:
    found += openvino_rows(model, batches, seq, calls, seconds, workdir, common, notes)
  python = hf_bridge.find_torch_python(FLAGS.torch_python)
  if python is None:
    return found
  config = model.encoder.config.to_dict()
  shapes = hf_bridge.run_torch(python, HF_ONNX_SCRIPT, {"names": True, "config": config})
  path = os.path.join(workdir, "hf_weights.npz")
  np.savez(path, **hf_bridge.hf_weights(model.encoder, shapes))
  answer = hf_bridge.run_torch(python, HF_ONNX_SCRIPT, {
      "weights": path, "config": config, "check_ids": CHECK_IDS, "calls": calls,
      "seconds": seconds, "cells": [{"batch": batch, "seq": seq} for batch in batches]})
  for cell in answer["cells"]:
    found.append(dict(cell, **common, xla=None, signature="token ids", peak=None))
  notes.append("HF through ONNX Runtime: " + ", ".join(
      f"{precision} max |HF - ours| {check_same_weights(model.encoder, {'check': check}):.1e}"
      for precision, check in answer["check"].items())
      + f"; onnxruntime {answer['versions']['onnxruntime']}")
  for row in found:
    if "error" in row and row["batch"] == batches[0]:
      notes.append(f"{row['model']} {row['dtype']}: max |logits - Keras float32| "
                   f"{row['error']:.1e}")
  return found


def check_same_weights(encoder, answer):
  """The largest difference between the PyTorch model's outputs and the encoder's."""
  ids = np.array(CHECK_IDS, np.int32)
  ours = encoder({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                  "input_type_ids": np.zeros_like(ids)})
  return max(float(np.abs(np.asarray(answer["check"][name]) - ours[name][0].numpy()).max())
             for name in ("sequence_output", "pooled_output"))


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
  for dtype in FLAGS.dtypes:
    precision.check_dtype(dtype)
  xla_modes = [{"off": False, "on": True}[mode] for mode in FLAGS.xla]
  environment = server_environment(FLAGS.server_onednn, os.environ)
  onednn = accelerators.onednn_enabled(cpuinfo.flags(), environment)
  print(f"start: {load_average()}; TF {tf.__version__}, TF_ENABLE_ONEDNN_OPTS="
        f"{os.environ['TF_ENABLE_ONEDNN_OPTS']}; serving processes: TF_ENABLE_ONEDNN_OPTS "
        f"{environment.get(accelerators.ONEDNN_VARIABLE, 'unset')}, oneDNN "
        f"{'on' if onednn else 'off'}; CPU flags: {cpu_flags()}", flush=True)
  workdir = tempfile.mkdtemp(prefix="serving_throughput_")
  vocab_file, words = vocabulary(FLAGS.vocab_file, workdir, FLAGS.smoke)
  rows, notes = [], []
  for name, config in sizes.items():
    model = BertClassifier(config, num_classes=2)
    models = {dtype: precision.with_dtype(model, dtype) for dtype in FLAGS.dtypes}
    for seq in seq_lengths:
      cells = []
      for dtype in FLAGS.dtypes:
        for jit in xla_modes:
          # A smoke run's texts all pack to `seq`: one bucket, not the default two.
          options = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=seq,
                         dtype=dtype, jit_compile=jit, overwrite=True,
                         buckets=[seq] if FLAGS.smoke else None)
          for kind in FLAGS.kinds:
            export = {"classifier": export_classifier, "encoder": export_encoder}[kind]
            directory = os.path.join(
                workdir, f"{name}-{seq}-{kind}-{dtype}-{'xla' if jit else 'graph'}")
            export(model if kind == "classifier" else model.encoder, directory, **options)
            cells += [{"dir": directory, "kind": kind, "dtype": dtype, "xla": jit,
                       "signature": signature, "batch": batch, "seq": seq}
                      for signature in FLAGS.signatures for batch in [1] + batch_sizes]
      job = {"cells": cells, "texts": texts_of(words, seq), "special": SPECIAL,
             "benchmarks": str(pathlib.Path(__file__).resolve().parent),
             "vocab_size": len(SPECIAL) + len(words), "latency_calls": latency_calls,
             "seconds": seconds, "dtypes": FLAGS.dtypes, "smoke": FLAGS.smoke,
             # A smoke run checks that the peak is measured, not its value: small products.
             "peak_size": 512 if FLAGS.smoke else 4096}
      served = subprocess.run([sys.executable, "-c", _SERVER], input=json.dumps(job),
                              capture_output=True, text=True, check=False, env=environment)
      if served.returncode:
        raise RuntimeError(f"The serving process failed:\n{served.stderr[-3000:]}")
      result = json.loads(served.stdout)
      peaks = result["peak"]
      common = dict(config=name, seq=seq, flops=forward_flops(config, seq))
      for cell in result["cells"]:
        rows.append(dict(cell, **common, model=f"{cell['kind']} SavedModel",
                         peak=peaks[cell["dtype"]]))
      for dtype, keras_model in models.items():
        for batch in [1] + batch_sizes:
          rows.append(dict(keras_rate(keras_model, batch, seq, latency_calls, seconds), **common,
                           batch=batch, model="classifier Keras", dtype=dtype, xla=False,
                           signature="in-process", peak=peaks[dtype]))
      if FLAGS.formats:
        rows += format_rows(model, [1] + batch_sizes, seq, latency_calls, seconds, workdir,
                            common, notes)
      answer = torch_rows(model.encoder, [1] + batch_sizes, seq, seconds, workdir)
      for dtype in FLAGS.dtypes:
        for compiled in (False, True):
          label = "HF torch.compile" if compiled else "HF eager"
          for batch in [1] + batch_sizes:
            found = [cell for cell in (answer or {"cells": []})["cells"]
                     if (cell["dtype"], cell["compile"], cell["batch"]) == (dtype, compiled, batch)]
            rows.append(dict(found[0] if found else {"rate": None}, **common, batch=batch,
                             model=label, dtype=dtype, xla=None, signature="token ids",
                             peak=peaks[dtype]))
      if answer:
        notes.append(f"{name} seq {seq}: PyTorch {answer['versions']['torch']} "
                     f"({answer['threads']} threads), transformers "
                     f"{answer['versions']['transformers']}; same weights, max |HF - ours| "
                     f"{check_same_weights(model.encoder, answer):.1e}; torch.matmul peak "
                     + ", ".join(f"{d} {p / 1e9:.0f}" for d, p in answer["peak"].items())
                     + " GFLOP/s")
      print(f"{name} seq {seq} done: {load_average()}, tf.matmul peak "
            + ", ".join(f"{d} {p / 1e9:.0f}" for d, p in peaks.items()) + " GFLOP/s; the serving "
            f"process saw TF_ENABLE_ONEDNN_OPTS {result['onednn_variable']}", flush=True)
  tf.io.gfile.rmtree(workdir)
  print_table(rows)
  for note in notes:
    print(note)
  print(f"end: {load_average()}")


def cpu_flags():
  """The CPU's AMX and AVX-512 flags (from /proc/cpuinfo), or '?' where it cannot be read."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      words = f.read().split()
  except OSError:
    return "?"
  return " ".join(sorted({w for w in words if w.startswith(("amx", "avx512"))})) or "none"


def print_table(rows):
  """One line per cell; the tokenizer's share compares a raw-text cell with its token-id twin."""
  by_key = {(r["config"], r["seq"], r["batch"], r["model"], r["dtype"], r["xla"],
             r["signature"]): r for r in rows}
  print("\nconfig        seq  batch  model                 dtype     XLA  signature       1st ms  "
        "p50 ms  p99 ms    seq/s  GFLOP/s  % peak  tokenizer")
  for r in rows:
    head = f"{r['config']:<12} {r['seq']:>4} {r['batch']:>6}  {r['model']:<21} {r['dtype']:<8}"
    if r["rate"] is None:
      print(f"{head} {'-':>4}  {r['signature']:<15} {'not installed (--torch_python)':>48}")
      continue
    gflops = r["rate"] * r["flops"] / 1e9
    latency = (f"{r['p50'] * 1e3:7.2f} {r['p99'] * 1e3:7.2f}" if "p50" in r
               else f"{'':>7} {'':>7}")
    share = ""
    if r["signature"] == "serving_default":
      ids = by_key.get((r["config"], r["seq"], r["batch"], r["model"], r["dtype"], r["xla"],
                        "serve_token_ids"))
      share = f"{max(0.0, 1 - r['rate'] / ids['rate']):7.0%}" if ids else ""
    xla = "-" if r["xla"] is None else "on" if r["xla"] else "off"
    peak_share = f"{gflops * 1e9 / r['peak']:7.1%}" if r["peak"] else f"{'':>7}"
    print(f"{head} {xla:>4}  {r['signature']:<15} {r['first'] * 1e3:7.1f} {latency} "
          f"{r['rate']:8.1f} {gflops:8.1f} {peak_share}  {share}")
  for dtype in sorted({r["dtype"] for r in rows if r["peak"]}):
    peaks = sorted({r["peak"] for r in rows if r["dtype"] == dtype and r["peak"]})
    print(f"{dtype} tf.matmul peak in the serving processes: {peaks[0] / 1e9:.0f} to "
          f"{peaks[-1] / 1e9:.0f} GFLOP/s (each row's share is of its dtype's peak in its run)")


if __name__ == "__main__":
  app.run(recording("serving_throughput", main, smoke=lambda: FLAGS.smoke))
