"""Time to quality of pre-training: how soon each implementation reaches a held-out masked-LM
accuracy, trained from the same weights on the same batches with the same recipe.

The other benchmarks time steps; this one trains from scratch and scores the model on held-out
records every `--eval_every` steps. The rows (`--rows`, `<implementation>_<dtype>`):

* `ours_float32`, `ours_bfloat16`: this package's pre-training path, the one `run_pretraining.py`
  runs (`PretrainingTask` through the driver's `Runner`: the engine as `RuntimeConfig` sets it up,
  `create_optimizer`, `Trainer`), in float32 and in its bfloat16 mode (`--dtype=bfloat16`);
* `hf_float32`, `hf_bfloat16`: Hugging Face `transformers.BertForPreTraining` under PyTorch
  (float32, or `torch.autocast` bfloat16), in a process of `--torch_python`, an environment with
  `torch` and `transformers` (no dependencies of this package): `torch_convergence.py` says what
  its step does. Without such a Python these rows are left out, and the run says so;
* `kerashub_float32`, `kerashub_bfloat16`: KerasHub's `BertBackbone` and `MaskedLMHead` (tied to
  the token embedding) with a 2-way next-sentence `Dense` on the pooled output, in KerasHub's own
  initialisation (truncated normal 0.02, seeded), trained by this package's `Trainer` with the same
  recipe, losses and metrics: the model differs, not the loop. Left out, with the reason, when
  `keras_hub` is not installed (`pip install -e .[benchmark]`).

What the rows share:

* the data: `create_pretraining_data` (the library call, as `create_pretraining_data.py`) writes
  the training records from `--train_input` and the held-out ones from `--eval_input` (by default
  Gutenberg and WikiText-2 valid for training, WikiText-2 test held out), cached in `--work_dir`
  under a name that covers the inputs, the options and the source of `official_bert.pretraining`,
  so that a rerun skips the creation and a changed writer writes anew (`--train_records` and
  `--eval_records` take existing files instead). The training batches are those of the package's
  reader as `run_pretraining.py` reads the records (`PretrainingTask.build_inputs`, seeded with
  `--seed`: its file and record shuffles, nothing more), decoded once into arrays that every row
  replays in the same order; the held-out batches are the first `--eval_batches` batches of the
  held-out records, read in order;
* the initial weights: one `BertPretrainer` made with `--seed` (truncated normal 0.02), copied
  into ours in both dtypes and, under the Hugging Face names (`hf_bridge.hf_weights`), into
  `BertForPreTraining` (KerasHub starts from its own);
* the recipe: bias-corrected AdamW (the package's `--optimizer_type=adamw_bias_corrected`, Keras'
  AdamW; the original's `adamw` has no bias correction, which PyTorch's AdamW has), beta 0.9 /
  0.999, epsilon 1e-6, decoupled weight decay `--weight_decay` except on biases and layer norms,
  the package's schedule (linear warmup over `--warmup_proportion` of the steps from 0, then linear
  decay to 0 at the last step), global-norm clipping `--clip_norm`, dropout `--dropout`. Keras'
  Adam adds epsilon to the uncorrected second moment's root, PyTorch to the corrected one's, so
  the epsilon is effectively `1e-6 / sqrt(1 - 0.999^t)` here (3.2e-5 at the first step, 1.6e-6 at
  the 500th): the one difference of the update;
* the scores: masked-LM accuracy (the label's logit is the largest) and loss weighted by
  `masked_lm_weights`, next-sentence accuracy and loss per example, summed over all held-out
  batches (the package's `pretraining_metrics` and `Trainer.evaluate`; `torch_convergence.py`
  computes the same sums).

The training time of a row counts its steps only, evaluation left out: ours the `Trainer`'s own
clock over each segment of steps (`examples_per_second`, from the start of its loop to its last
step: the XLA compilation of the first segment included, the checkpoint that each segment's end
writes and the next one restores left out), PyTorch the loop of steps. The table gives the final
held-out scores, the training time, the steady time per step (the segments after the first), and
the step and time at which a row's held-out masked-LM accuracy first reached the target:
`--target_accuracy`, or by default 90% of the lowest final masked-LM accuracy among the rows, so
that every row reaches it. The target is checked at the evaluations only, so a step is a multiple
of `--eval_every`.

    python benchmarks/pretraining_convergence.py [--rows=ours_float32,ours_bfloat16,hf_float32] \
        [--train_steps=500] [--eval_every=50] [--train_records=/path/to/records.tfrecord] \
        [--torch_python=/path/to/venv/bin/python] [--results_file=convergence.md]

The default run trains BERT-Mini (4 layers, hidden 256, 4 heads, intermediate 1024) for 500
steps of 64 sequences of 64 tokens (10 predictions each), learning rate 5e-4. Rows run one after
another; the machine must be otherwise idle for the times to mean anything.
"""

import datetime
import hashlib
import json
import os
import pathlib
import subprocess
import tempfile

import official_bert.cli  # noqa: F401  (turns oneDNN on before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position

from absl import app, flags, logging
import hf_bridge
import keras
import numpy as np
from results import recorded
import tensorflow as tf
from throughput import bf16_flags

from official_bert import BertConfig, BertPretrainer
from official_bert.common import file_io
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.tasks.driver import Runner
from official_bert.tasks.experiment import ExperimentConfig, PretrainingConfig
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import OptimizerConfig, RuntimeConfig, TrainerConfig

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
TORCH_SCRIPT = pathlib.Path(__file__).resolve().parent / "torch_convergence.py"
IMPLEMENTATIONS = {"ours": "ours", "hf": "Hugging Face", "kerashub": "KerasHub"}
DTYPES = ("float32", "bfloat16")
METRICS = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
           "next_sentence_loss")

flags.DEFINE_list("rows", ["ours_float32", "ours_bfloat16", "hf_float32", "kerashub_float32"],
                  "Rows to train, <implementation>_<dtype>: implementations ours, hf, kerashub; "
                  "dtypes float32, bfloat16.")
flags.DEFINE_list("train_input", [str(DATA / "corpus" / "gutenberg" / "*.txt"),
                                  str(DATA / "corpus" / "wikitext-2" / "valid.txt")],
                  "Text files or globs to pre-train on (one sentence a line, blank lines "
                  "between documents).")
flags.DEFINE_list("eval_input", [str(DATA / "corpus" / "wikitext-2" / "test.txt")],
                  "Held-out text files or globs to score on.")
flags.DEFINE_string("vocab_file", str(DATA / "vocab" / "bert-base-uncased-vocab.txt"),
                    "The WordPiece vocabulary (uncased); the model's vocabulary size is its "
                    "length.")
flags.DEFINE_string("train_records", None,
                    "Existing training records (comma-separated files or globs) instead of "
                    "creating them from --train_input, e.g. to compare a file in corpus order "
                    "with a shuffled one.")
flags.DEFINE_string("eval_records", None,
                    "Existing held-out records instead of creating them from --eval_input.")
flags.DEFINE_string("work_dir", os.path.join(tempfile.gettempdir(), "pretraining_convergence"),
                    "Where the records are cached and the runs write their checkpoints.")
flags.DEFINE_integer("dupe_factor", 10, "create_pretraining_data's dupe_factor for training.")
flags.DEFINE_integer("eval_dupe_factor", 1,
                     "create_pretraining_data's dupe_factor for the held-out records.")
flags.DEFINE_integer("data_seed", 12345, "create_pretraining_data's random_seed.")
flags.DEFINE_integer("num_layers", 4, "Transformer layers.")
flags.DEFINE_integer("hidden_size", 256, "Hidden size.")
flags.DEFINE_integer("num_heads", 4, "Attention heads.")
flags.DEFINE_integer("intermediate_size", 1024, "Feed-forward size.")
flags.DEFINE_integer("train_steps", 500, "Training steps of every row.")
flags.DEFINE_integer("batch_size", 64, "Sequences per training (and held-out) batch.")
flags.DEFINE_integer("max_seq_length", 64, "Tokens per sequence.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per sequence.")
flags.DEFINE_float("learning_rate", 5e-4, "Peak learning rate.")
flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with a rising learning rate.")
flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay (not on biases, layer norms).")
flags.DEFINE_float("clip_norm", 1.0, "Global gradient norm to clip to; 0 for none.")
flags.DEFINE_float("dropout", 0.1, "Hidden and attention dropout.")
flags.DEFINE_integer("eval_every", 50, "Steps between held-out evaluations.")
flags.DEFINE_integer("eval_batches", 20, "Held-out batches scored at each evaluation.")
flags.DEFINE_float("target_accuracy", None,
                   "Held-out masked-LM accuracy to time (a fraction); default: 90% of the lowest "
                   "final masked-LM accuracy among the rows.")
flags.DEFINE_enum("enable_xla", "auto", ["auto", "true", "false"],
                  "XLA for the Keras rows: the engine's choice for the dtype (auto: on CPUs XLA "
                  "for float32, none for bfloat16), or forced on or off.")
flags.DEFINE_integer("seed", 0, "Seeds the initial weights, the reader's shuffles and dropout.")
flags.DEFINE_string("torch_python", None,
                    "Python of an environment with torch and transformers for the Hugging Face "
                    "rows; default: this Python if it has them.")
flags.DEFINE_string("results_file", None, "Also write the tables (markdown) to this file.")
FLAGS = flags.FLAGS


# === The data ===


def _source_digest():
  """A digest of the record writer's source: cached records of another writer are not reused."""
  digest = hashlib.sha256()
  for path in sorted((REPO / "official_bert" / "pretraining").glob("*.py")):
    digest.update(path.read_bytes())
  return digest.hexdigest()


def make_records(name, inputs, dupe_factor):
  """The records of the text files `inputs`, created by `create_pretraining_data` or found in
  the cache of `--work_dir`; returns `(path, instances or None when cached without a count)`."""
  files = file_io.expand_globs(inputs, what=f"{name} text")
  key = json.dumps({"files": [(f, os.path.getsize(f), os.path.getmtime(f)) for f in files],
                    "vocab": FLAGS.vocab_file, "seq": FLAGS.max_seq_length,
                    "predictions": FLAGS.max_predictions_per_seq, "dupe_factor": dupe_factor,
                    "seed": FLAGS.data_seed, "writer": _source_digest()}, sort_keys=True)
  path = os.path.join(FLAGS.work_dir, f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
                      ".tfrecord")
  count_path = path + ".instances"
  if os.path.exists(path):
    print(f"{name} records: {path} (cached)", flush=True)
  else:
    print(f"{name} records: creating {path} from {len(files)} files", flush=True)
    stats = create_pretraining_data(
        files, path, FLAGS.vocab_file, random_seed=FLAGS.data_seed,
        options=InstanceOptions(max_seq_length=FLAGS.max_seq_length,
                                max_predictions_per_seq=FLAGS.max_predictions_per_seq,
                                dupe_factor=dupe_factor))
    file_io.write_text(count_path, f"{stats.instances}\n")
  if os.path.exists(count_path):
    return path, int(pathlib.Path(count_path).read_text(encoding="utf-8"))
  return path, None


def decode_batches(task, split, num_batches):
  """The first `num_batches` full batches of the task's input for `split` (`train`: the reader's
  training stream, shuffled and repeated as `run_pretraining.py` reads it), as arrays
  `[batches, batch, ...]` named as the reader names features and labels."""
  dataset = task.build_inputs(split, None, FLAGS.seed)(FLAGS.batch_size,
                                                       tf.distribute.InputContext())
  arrays = {}
  for features, labels in dataset.take(num_batches):
    if len(labels["next_sentence_labels"]) < FLAGS.batch_size:
      break  # a held-out set's last, partial batch
    for name, value in {**features, **labels}.items():
      arrays.setdefault(name, []).append(value.numpy())
  if not arrays:
    raise ValueError(f"{task.config.input_file} holds fewer than {FLAGS.batch_size} records.")
  return {name: np.stack(values) for name, values in arrays.items()}


def replay(arrays, repeat=False):
  """The `input_fn(batch_size, input_context)` of a `PretrainingTask` that yields `arrays`'
  batches in order (and again, with `repeat`: training datasets repeat)."""
  feature_names = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")

  def input_fn(batch_size, input_context):
    del input_context  # one replica
    if batch_size != arrays["input_word_ids"].shape[1]:
      raise ValueError(f"Batches of {arrays['input_word_ids'].shape[1]} were decoded, "
                       f"{batch_size} asked for.")
    features = {name: arrays[name] for name in feature_names}
    labels = {name: value for name, value in arrays.items() if name not in feature_names}
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return dataset.repeat() if repeat else dataset
  return input_fn


# === The rows ===


def bert_config(vocab_size):
  return BertConfig(vocab_size=vocab_size, hidden_size=FLAGS.hidden_size,
                    num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.num_heads,
                    intermediate_size=FLAGS.intermediate_size, hidden_act="gelu_tanh",
                    hidden_dropout_prob=FLAGS.dropout,
                    attention_probs_dropout_prob=FLAGS.dropout, max_position_embeddings=512)


def segments():
  """The step counts at which the rows are evaluated, after step 0."""
  ends = list(range(FLAGS.eval_every, FLAGS.train_steps, FLAGS.eval_every))
  return ends + [FLAGS.train_steps]


def num_warmup_steps():
  return int(FLAGS.train_steps * FLAGS.warmup_proportion)


class KerasHubTask(PretrainingTask):
  """The pre-training task on KerasHub's BERT, taking this package's inputs and giving its
  outputs, so that the same `Trainer`, losses and metrics train and score it."""

  def build_model(self):
    import keras_hub  # pylint: disable=import-outside-toplevel
    config = self.bert_config
    initializer = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in
              ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    encoded = backbone({"token_ids": inputs["input_word_ids"],
                        "padding_mask": inputs["input_mask"],
                        "segment_ids": inputs["input_type_ids"]})
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=config.vocab_size, token_embedding=backbone.token_embedding,
        intermediate_activation="gelu", kernel_initializer=initializer, name="mlm")(
            encoded["sequence_output"], mask_positions=inputs["masked_lm_positions"])
    nsp = keras.layers.Dense(2, kernel_initializer=initializer, name="nsp")(
        encoded["pooled_output"])
    # Float32 outputs, as `BertPretrainer` gives under a mixed policy.
    as_float32 = keras.layers.Activation("linear", dtype="float32")
    return keras.Model(inputs, {"mlm_logits": as_float32(mlm),
                                "next_sentence_logits": as_float32(nsp)})


def train_keras(implementation, dtype, vocab_size, train_records, initial, train, held_out,
                run_dir):
  """Trains a row on the package's path (`Runner`).

  Returns:
    The curve: `(step, training seconds, held-out metrics)` at step 0 and after each segment.
  """
  runtime = RuntimeConfig(
      dtype=dtype, enable_xla={"auto": None, "true": True, "false": False}[FLAGS.enable_xla],
      seed=FLAGS.seed)
  config = ExperimentConfig(
      output_dir=run_dir, runtime=runtime, trainer=TrainerConfig(
          train_batch_size=FLAGS.batch_size, eval_batch_size=FLAGS.batch_size,
          num_train_steps=FLAGS.train_steps, steps_per_loop=FLAGS.eval_every,
          log_steps=FLAGS.eval_every, save_checkpoints_steps=FLAGS.eval_every,
          keep_checkpoint_max=1,
          optimizer=OptimizerConfig(
              type="adamw_bias_corrected", learning_rate=FLAGS.learning_rate,
              num_warmup_steps=num_warmup_steps(), weight_decay=FLAGS.weight_decay,
              clip_norm=FLAGS.clip_norm or None)))
  task_class = KerasHubTask if implementation == "kerashub" else PretrainingTask
  task = task_class(PretrainingConfig(input_file=train_records,
                                      max_seq_length=FLAGS.max_seq_length,
                                      max_predictions_per_seq=FLAGS.max_predictions_per_seq),
                    bert_config(vocab_size))
  runner = Runner(task, config, train=True)
  if implementation == "ours":
    variables = runner.model.trainable_variables
    if [v.shape for v in variables] != [w.shape for w in initial]:
      raise ValueError("The initial weights do not fit the model.")
    for variable, value in zip(variables, initial):
      variable.assign(value)

  def evaluate():
    results = runner.average(replay(held_out))
    return {name: results[name] for name in METRICS}

  curve, seconds, step = [(0, 0.0, evaluate())], 0.0, 0
  report(implementation, dtype, curve[-1])
  for end in segments():
    values = runner.train(replay(train, repeat=True), num_steps=end)
    # The Trainer's clock over the segment's loop (see the module docstring).
    seconds += (end - step) * FLAGS.batch_size / values["examples_per_second"]
    step = end
    curve.append((step, seconds, evaluate()))
    report(implementation, dtype, curve[-1])
  return curve


def train_torch(python, dtype, vocab_size, initial_model, files):
  """Trains a Hugging Face row in a PyTorch process; returns its curve (as `train_keras`) and
  the versions of torch and transformers."""
  process = hf_bridge.TorchProcess(python, TORCH_SCRIPT)
  try:
    shapes = process.ask({"config": bert_config(vocab_size).to_dict()})
    weights = os.path.join(files, "hf_initial_weights.npz")
    if not os.path.exists(weights):
      np.savez(weights, **hf_bridge.hf_weights(initial_model, shapes))
    versions = process.ask({
        "weights": weights, "train": os.path.join(files, "train_batches.npz"),
        "eval": os.path.join(files, "eval_batches.npz"), "dtype": dtype,
        "learning_rate": FLAGS.learning_rate, "num_train_steps": FLAGS.train_steps,
        "num_warmup_steps": num_warmup_steps(), "weight_decay": FLAGS.weight_decay,
        "clip_norm": FLAGS.clip_norm, "seed": FLAGS.seed})
    curve, seconds, step = [(0, 0.0, process.ask({"evaluate": True}))], 0.0, 0
    report("hf", dtype, curve[-1])
    for end in segments():
      seconds += process.ask({"train": end - step})["seconds"]
      step = end
      curve.append((step, seconds, process.ask({"evaluate": True})))
      report("hf", dtype, curve[-1])
  finally:
    process.close()
  return curve, versions


def report(implementation, dtype, point):
  step, seconds, metrics = point
  print(f"  {implementation} {dtype}: step {step}/{FLAGS.train_steps}, {seconds:.1f} s training, "
        f"held-out masked-LM accuracy {metrics['masked_lm_accuracy']:.4f}, loss "
        f"{metrics['masked_lm_loss']:.4f}", flush=True)


def wanted_rows():
  """`[(implementation, dtype)]` of `--rows`, less those that cannot run here (said why)."""
  rows = []
  for name in FLAGS.rows:
    implementation, _, dtype = name.partition("_")
    if implementation not in IMPLEMENTATIONS or dtype not in DTYPES:
      raise app.UsageError(f"Unknown row {name!r}: <implementation>_<dtype> with implementation "
                           f"in {', '.join(IMPLEMENTATIONS)} and dtype in {', '.join(DTYPES)}.")
    if implementation == "hf" and not hf_bridge.find_torch_python(FLAGS.torch_python):
      print(f"Row {name} left out: no Python with torch and transformers (--torch_python).")
      continue
    if implementation == "kerashub" and not _kerashub_version():
      print(f"Row {name} left out: keras_hub is not installed (pip install -e .[benchmark]).")
      continue
    rows.append((implementation, dtype))
  return rows


def _kerashub_version():
  try:
    import keras_hub  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  return keras_hub.__version__


# === The tables ===


def reached(curve, target):
  """`(step, seconds)` of the first evaluation at or above the target accuracy, or None."""
  for step, seconds, metrics in curve:
    if metrics["masked_lm_accuracy"] >= target:
      return step, seconds
  return None


def steady_seconds_per_step(curve):
  """Seconds per step over the segments after the first (which holds the compilation)."""
  points = [(step, seconds) for step, seconds, _ in curve[1:]]
  if len(points) < 2:
    return points[-1][1] / points[-1][0]
  return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


def tables(results, target):
  """The markdown tables: one row per run, then the held-out masked-LM accuracy curves."""
  lines = ["| implementation | dtype | steps | train s | s/step | MLM acc | MLM loss | NSP acc "
           "| NSP loss | step to target | s to target |", "|" + "---|" * 11]
  for (implementation, dtype), curve in results.items():
    final = curve[-1][2]
    hit = reached(curve, target)
    lines.append(
        f"| {IMPLEMENTATIONS[implementation]} | {dtype} | {curve[-1][0]} | {curve[-1][1]:.1f} | "
        f"{steady_seconds_per_step(curve):.3f} | {final['masked_lm_accuracy']:.4f} | "
        f"{final['masked_lm_loss']:.4f} | {final['next_sentence_accuracy']:.4f} | "
        f"{final['next_sentence_loss']:.4f} | {hit[0] if hit else '-'} | "
        f"{f'{hit[1]:.1f}' if hit else '-'} |")
  names = [f"{IMPLEMENTATIONS[i]} {d}" for i, d in results]
  lines += ["", "Held-out masked-LM accuracy (training seconds) at each evaluation:", "",
            "| step | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
  for index, (step, _, _) in enumerate(next(iter(results.values()))):
    cells = [f"{curve[index][2]['masked_lm_accuracy']:.4f} ({curve[index][1]:.0f} s)"
             for curve in results.values()]
    lines.append(f"| {step} | " + " | ".join(cells) + " |")
  return lines


def _commit():
  try:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "?"


# === The run ===


def main(_):
  logging.set_verbosity(logging.WARNING)
  if FLAGS.eval_every < 1 or FLAGS.train_steps < 1:
    raise app.UsageError("--eval_every and --train_steps must be positive.")
  rows = wanted_rows()
  if not rows:
    print("No row to train.")
    return
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  with open(FLAGS.vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  if FLAGS.train_records:
    train_records, train_instances = FLAGS.train_records, None
  else:
    train_records, train_instances = make_records("train", FLAGS.train_input, FLAGS.dupe_factor)
  if FLAGS.eval_records:
    eval_records, eval_instances = FLAGS.eval_records, None
  else:
    eval_records, eval_instances = make_records("held_out", FLAGS.eval_input,
                                                FLAGS.eval_dupe_factor)

  # The batches, as the package's reader gives them under `run_pretraining.py --seed`.
  keras.utils.set_random_seed(FLAGS.seed)
  config = bert_config(vocab_size)
  reader = {split: PretrainingTask(PretrainingConfig(
                      input_file=records, max_seq_length=FLAGS.max_seq_length,
                      max_predictions_per_seq=FLAGS.max_predictions_per_seq), config)
            for split, records in (("train", train_records), ("eval", eval_records))}
  train = decode_batches(reader["train"], "train", FLAGS.train_steps)
  held_out = decode_batches(reader["eval"], "eval", FLAGS.eval_batches)

  # The initial weights every row but KerasHub's starts from.
  keras.mixed_precision.set_global_policy("float32")
  keras.utils.set_random_seed(FLAGS.seed)
  initial_model = BertPretrainer(config)
  initial = [v.numpy() for v in initial_model.trainable_variables]

  results, torch_versions = {}, None
  with tempfile.TemporaryDirectory(prefix="run-", dir=FLAGS.work_dir) as files:
    np.savez(os.path.join(files, "train_batches.npz"), **train)
    np.savez(os.path.join(files, "eval_batches.npz"), **held_out)
    for implementation, dtype in rows:
      print(f"Training {IMPLEMENTATIONS[implementation]} {dtype}", flush=True)
      if implementation == "hf":
        results[implementation, dtype], torch_versions = train_torch(
            hf_bridge.find_torch_python(FLAGS.torch_python), dtype, vocab_size, initial_model,
            files)
      else:
        results[implementation, dtype] = train_keras(
            implementation, dtype, vocab_size, train_records, initial, train, held_out,
            os.path.join(files, f"{implementation}_{dtype}"))

  finals = [curve[-1][2]["masked_lm_accuracy"] for curve in results.values()]
  target = (FLAGS.target_accuracy if FLAGS.target_accuracy is not None else 0.9 * min(finals))
  where = "--target_accuracy" if FLAGS.target_accuracy is not None else \
      "90% of the lowest final"
  header = [
      f"Pre-training convergence, {datetime.date.today().isoformat()}, commit {_commit()}: "
      f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
      + (f", PyTorch {torch_versions['torch']} ({torch_versions['threads']} threads), "
         f"transformers {torch_versions['transformers']}" if torch_versions else "")
      + (f", KerasHub {_kerashub_version()}" if any(i == "kerashub" for i, _ in results) else "")
      + f"; {os.cpu_count()} CPUs, flags: {' '.join(bf16_flags()) or 'none'}",
      f"Model: {FLAGS.num_layers} layers, hidden {FLAGS.hidden_size}, {FLAGS.num_heads} heads, "
      f"intermediate {FLAGS.intermediate_size}, vocabulary {vocab_size}, dropout {FLAGS.dropout:g}"
      f"; from scratch, the same initial weights (KerasHub: its own).",
      f"Recipe: {FLAGS.train_steps} steps of {FLAGS.batch_size} x {FLAGS.max_seq_length} tokens, "
      f"{FLAGS.max_predictions_per_seq} predictions; bias-corrected AdamW, learning rate "
      f"{FLAGS.learning_rate:g}, {num_warmup_steps()} warmup steps then linear decay to 0, weight "
      f"decay {FLAGS.weight_decay:g}, clipping {FLAGS.clip_norm:g}; seed {FLAGS.seed}.",
      f"Data: training records {train_records}"
      + (f" ({train_instances:,} instances)" if train_instances else "")
      + f", read by the package's reader (seed {FLAGS.seed}); held out: the first "
      f"{held_out['input_word_ids'].shape[0]} batches of {eval_records}"
      + (f" ({eval_instances:,} instances)" if eval_instances else "") + ".",
      f"Target: held-out masked-LM accuracy {target:.4f} ({where}); times are training "
      "seconds, evaluation left out.", ""]
  lines = header + tables(results, target)
  with recorded("pretraining_convergence", markdown=True):
    print("\n" + "\n".join(lines))
  if FLAGS.results_file:
    file_io.write_text(FLAGS.results_file, "\n".join(lines) + "\n")
  file_io.write_text(os.path.join(FLAGS.work_dir, "last_run.json"), json.dumps(
      {"header": header, "target": target,
       "curves": {f"{i}_{d}": curve for (i, d), curve in results.items()}}, indent=1) + "\n")


if __name__ == "__main__":
  app.run(main)
