"""Each class of damaged input, run through the real tools: one line, exit status 2, inputs
unchanged and nothing half-written.

The tools run as their scripts do (`run_tools`: absl parses each command line, `launch` turns a
user's error into one line), all in one process, so that the whole file costs two TensorFlow
start-ups. The modules that find each fault test its message in detail; these tests check what a
user of the tools sees.
"""

import hashlib
import json
import os
import pathlib

import pytest
from safetensors.numpy import save_file

from checkpoints.test_checkpoints_huggingface import CONFIG as HF_CONFIG
from checkpoints.test_checkpoints_huggingface import hf_tensors, write_hf_folder
from checkpoints.test_checkpoints_tf1 import write_original_checkpoint
from testing import (
  assert_one_line_error,
  original_variables,
  run_tools,
  tiny_bert_config,
  tiny_pretraining_config,
  write_full_records,
  write_vocab,
)

# Shapes of the records that `write_full_records` writes.
SEQ_FLAGS = ["--max_seq_length=32", "--max_predictions_per_seq=5"]
PRETRAINING = ["--train_batch_size=8", "--eval_batch_size=8", "--num_warmup_steps=0",
               "--enable_xla=false", "--steps_per_loop=2", *SEQ_FLAGS]


def _digests(folder):
  """The SHA-256 of every file under `folder`, by relative path."""
  return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
          for path in sorted(pathlib.Path(folder).rglob("*")) if path.is_file()}


def _checkpoint_digests(folder):
  return {path: digest for path, digest in _digests(folder).items()
          if path.startswith("ckpt-") or path == "checkpoint"}


def _truncate(path):
  """Cuts a file short inside a record's data, as a copy stopped half-way does."""
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2 + 40])


def _half_written(folder):
  """What a tool left in `folder` that is neither finished nor its own marker of a run."""
  return [str(path) for path in pathlib.Path(folder).rglob("*")
          if "_temp" in path.name or ".tmp" in path.name or path.name.endswith(".partial")]


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
  """Every tool on its damaged input; returns {case: (exit status, stderr, whether the inputs
  are unchanged, output folder, fragments of the expected line)}."""
  root = tmp_path_factory.mktemp("faults")
  inputs = root / "inputs"
  inputs.mkdir()
  config = inputs / "bert_config.json"
  # One layer: the faults do not depend on depth, and each layer adds to the tracing time.
  config.write_text(json.dumps(dict(tiny_pretraining_config(50).to_dict(), num_hidden_layers=1)))
  good = write_full_records(str(inputs / "good.tfrecord"), 16, vocab_size=50)
  damaged = inputs / "damaged.tfrecord"
  write_full_records(str(damaged), 64, vocab_size=50, seed=1)
  _truncate(damaged)
  records = f"{good},{damaged}"

  # An original checkpoint whose data shard is gone, beside its index.
  tf1 = inputs / "tf1"
  tf1.mkdir()
  tf1_config = tiny_bert_config(30, hidden_size=8, max_position_embeddings=16)
  write_original_checkpoint(tf1 / "bert_model.ckpt", original_variables(tf1_config))
  (tf1 / "bert_config.json").write_text(json.dumps(tf1_config.to_dict()))
  (shard,) = tf1.glob("bert_model.ckpt.data-*")
  shard.unlink()

  # A Hugging Face index that sends the reader out of the model folder, to a real file.
  hf = write_hf_folder(inputs / "a" / "b" / "hf", {})
  (hf / "model.safetensors").unlink()
  tensors = hf_tensors(HF_CONFIG, heads=False)
  save_file(tensors, str(inputs / "outside.safetensors"))
  (hf / "model.safetensors.index.json").write_text(json.dumps(
      {"weight_map": {name: "../../outside.safetensors" for name in tensors}}))

  # A SWAG training file of four choices (label 3) without the column `ending3`.
  swag = inputs / "swag"
  swag.mkdir()
  (swag / "train.csv").write_text("sent1,sent2,ending0,ending1,ending2,label\n" + "".join(
      f"A man sits.,He,stands.,waves.,runs.,{label}\n" for label in (0, 3, 1, 2)))
  vocab = write_vocab(inputs / "vocab.txt")

  # A run folder whose every checkpoint is cut short: made by the tool itself, then damaged.
  run = root / "run"
  train = ["run_pretraining.py", f"--bert_config_file={config}", f"--input_file={good}",
           "--do_train", "--num_train_steps=4", "--save_checkpoints_steps=2", *PRETRAINING]
  (root / "first").mkdir()
  (status, stderr), = run_tools([train + [f"--output_dir={run}"]], root / "first")
  assert status == 0, stderr[-3000:]
  checkpoints = sorted(run.glob("ckpt-*.data-*"))
  assert checkpoints
  for path in checkpoints:
    _truncate(path)

  before = _digests(inputs)
  checkpoints_before = _checkpoint_digests(run)
  out = root / "out"
  cases = {
      "records_in_training": (
          ["run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
           "--do_train", "--num_train_steps=8", *PRETRAINING], [str(damaged), "damaged"]),
      "records_in_evaluation": (
          ["run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
           "--do_eval", "--max_eval_steps=10", *PRETRAINING], [str(damaged), "damaged"]),
      "unreadable_checkpoints": (
          train[:4] + ["--num_train_steps=6", *PRETRAINING], [str(checkpoints[-1])]),
      "tf1_data_shard_missing": (
          ["official_bert.cli.convert_checkpoint", "--input_format=tf1",
           f"--input={tf1 / 'bert_model.ckpt'}", f"--bert_config_file={tf1 / 'bert_config.json'}"],
          ["bert_model.ckpt.index has no data shard beside it"]),
      "hf_shard_outside_the_folder": (
          ["official_bert.cli.convert_checkpoint", "--input_format=hf", f"--input={hf}"],
          ["lies outside the model folder"]),
      "swag_column_missing": (
          ["run_swag.py", f"--data_dir={swag}", f"--vocab_file={vocab}",
           f"--bert_config_file={config}", "--do_train", "--max_seq_length=16",
           "--train_batch_size=2",
           "--enable_xla=false"], ["train.csv", "ending3"]),
  }
  commands = []
  for case, (command, _) in cases.items():
    output_dir = run if case == "unreadable_checkpoints" else out / case
    commands.append(command + [f"--output_dir={output_dir}"])
  results = run_tools(commands, root)
  assert _checkpoint_digests(run) == checkpoints_before  # the damaged run is left as it was
  return {case: (*result, _digests(inputs) == before, output_dir, cases[case][1])
          for case, result, output_dir in zip(cases, results, [c[-1][len("--output_dir="):]
                                                               for c in commands])}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["records_in_training", "records_in_evaluation",
                                  "unreadable_checkpoints", "tf1_data_shard_missing",
                                  "hf_shard_outside_the_folder", "swag_column_missing"])
def test_a_damaged_input_is_one_line_with_exit_status_2_and_loses_nothing(faults, case):
  status, stderr, inputs_unchanged, output_dir, fragments = faults[case]
  assert_one_line_error((status, stderr), *fragments)
  assert inputs_unchanged
  assert not _half_written(output_dir)
  if case != "unreadable_checkpoints":  # that run's folder holds the model of its first run
    assert not os.path.exists(os.path.join(output_dir, "model.json"))
