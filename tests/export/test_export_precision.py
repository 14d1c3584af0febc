"""Tests of the bfloat16 SavedModel: weights stored in bfloat16, same signatures, float32 outputs
within 1e-2 of the float32 export, served by a process that imports only TensorFlow and
tensorflow-text."""

import json
import subprocess
import sys
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from official_bert import BertClassifier, BertEncoder, ops
from official_bert.checkpoints import save_model_dir
from official_bert.export import (
  export_classifier,
  export_encoder,
  export_model_dir,
  precision,
  saved_model,
)
from official_bert.tasks import base
from official_bert.tasks.experiment import TaskConfig
from official_bert.training import accelerators

from testing import tiny_bert_config

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a",
         "dog", "ran", "in", "park", "did", "it", "not", ".", ",", "?", "!"]
TEXTS = ["The cat sat on the mat.", "A dog ran in the park, did it?", "the cat did not!",
         "mat " * 30]
# Larger initial weights than BERT's 0.02, so that the logits are far from 0 and the bfloat16
# rounding shows in the probabilities.
CONFIG = tiny_bert_config(len(VOCAB), hidden_size=32, initializer_range=0.3)
# CPUs by their vendor and /proc/cpuinfo flags: TensorFlow turns oneDNN on by default on the first
# three (neural-network instructions), not on the last two.
INTEL_AMX = ("GenuineIntel", frozenset({"avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16"}))
INTEL_CASCADE_LAKE = ("GenuineIntel", frozenset({"avx512f", "avx512_vnni"}))
AMD_ZEN4 = ("AuthenticAMD", frozenset({"avx512f", "avx512_vnni", "avx512_bf16"}))
INTEL_SKYLAKE = ("GenuineIntel", frozenset({"avx2", "avx512f"}))
AMD_ZEN3 = ("AuthenticAMD", frozenset({"avx2"}))
IDS = {"input_word_ids": np.array([[2, 5, 6, 7, 3, 0], [2, 11, 12, 13, 14, 3]], "int32"),
       "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1] * 6], "int32"),
       "input_type_ids": np.zeros((2, 6), "int32")}

# The serving process: official_bert cannot be imported there.
_SERVER = r"""
import json, sys
sys.modules["official_bert"] = None
import tensorflow as tf
import tensorflow_text  # noqa: F401
job = json.load(sys.stdin)
results = {}
for name, directory in job["dirs"].items():
  loaded = tf.saved_model.load(directory)
  text = loaded.signatures["serving_default"](text=tf.constant(job["texts"]))
  ids = loaded.signatures["serve_token_ids"](
      **{key: tf.constant(value, tf.int32) for key, value in job["ids"].items()})
  results[name] = {
      "signatures": sorted(loaded.signatures),
      "dtypes": {key: value.dtype.name for key, value in {**text, **ids}.items()},
      "variable_dtypes": sorted({dtype.name for dtype in tf.train.load_checkpoint(
          directory + "/variables/variables").get_variable_to_dtype_map().values()
          if dtype.is_floating}),
      "text": text["probabilities"].numpy().tolist(),
      "ids": ids["probabilities"].numpy().tolist(),
      "label": [label.decode() for label in text["label"].numpy()],
  }
json.dump(results, sys.stdout)
"""


def _on_cpu(cpu):
  """Makes the export's choice as it would be made on `cpu`, a (vendor, flags) pair."""
  vendor, flags = cpu
  return mock.patch.multiple(accelerators, cpu_vendor=mock.Mock(return_value=vendor),
                             cpu_flags=mock.Mock(return_value=flags))


def _classifier():
  keras.utils.set_random_seed(0)
  model = BertClassifier(CONFIG, num_classes=3)
  model(IDS)
  return model


def test_with_dtype_casts_the_weights_and_keeps_layer_norms_in_float32():
  model = _classifier()
  copy = precision.with_dtype(model, "bfloat16")
  assert copy is not model and copy.dtype_policy.name == "bfloat16"
  dtypes = {v.path: v.dtype for v in copy.weights}
  assert dtypes["transformer_layer_0/intermediate/kernel"] == "bfloat16"
  assert dtypes["embeddings/word_embeddings/embeddings"] == "bfloat16"
  assert dtypes["transformer_layer_0/output_layer_norm/gamma"] == "float32"
  for original, cast in zip(model.weights, copy.weights):
    np.testing.assert_allclose(np.asarray(cast.numpy(), np.float32), original.numpy(),
                               rtol=1e-2, atol=1e-6)
  expected = tf.nn.softmax(model(IDS)["logits"])
  served = tf.nn.softmax(tf.cast(copy(IDS)["logits"], tf.float32))
  assert np.abs(expected - served).max() > 0  # bfloat16 changes the result, a little
  np.testing.assert_allclose(served, expected, atol=1e-2)
  assert precision.with_dtype(model, None) is model
  assert precision.with_dtype(model, "float32") is model


def test_with_dtype_rejects_other_dtypes():
  with pytest.raises(ValueError, match="float32, bfloat16"):
    precision.with_dtype(BertEncoder(CONFIG), "float16")


def test_dtype_choices():
  assert precision.serving_dtype("bfloat16") == "bfloat16"
  assert precision.serving_dtype("float32") == "float32"
  assert precision.serving_dtype("float16") is None
  assert precision.compute_dtype(BertEncoder(CONFIG, dtype="mixed_bfloat16")) == "bfloat16"
  assert not precision.default_jit_compile("bfloat16")


@pytest.mark.parametrize("cpu, jit_compile, kernels", [
    (INTEL_AMX, False, "cpu_onednn"), (INTEL_CASCADE_LAKE, False, "cpu_onednn"),
    (AMD_ZEN4, True, "cpu_xla"), (INTEL_SKYLAKE, True, "cpu_xla"), (AMD_ZEN3, True, "cpu_xla")])
def test_float32_serves_without_xla_on_intel_cpus_where_tensorflow_runs_onednn_by_default(
    cpu, jit_compile, kernels):
  with _on_cpu(cpu):
    choice = precision.serving_choice("float32")
  assert (choice.enable_xla, choice.kernels, choice.compile_update) == (
      jit_compile, kernels, False)
  assert ("oneDNN" in choice.reason) is not jit_compile
  # Training keeps XLA for float32 on any CPU.
  assert accelerators.choose("CPU", "float32", cpu[1], cpu_vendor=cpu[0]).enable_xla


@pytest.mark.parametrize("cpu", [INTEL_AMX, INTEL_CASCADE_LAKE, AMD_ZEN4, INTEL_SKYLAKE, AMD_ZEN3])
def test_bfloat16_serves_without_xla_on_onednn_kernels_on_every_cpu(cpu):
  with _on_cpu(cpu):
    choice = precision.serving_choice("bfloat16")
  assert (choice.enable_xla, choice.kernels) == (False, "cpu_onednn")


@pytest.mark.slow
def test_bfloat16_export_serves_within_1e_2_of_float32(tmp_path):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  model = _classifier()
  options = dict(vocab_file=str(vocab_file), do_lower_case=True, max_seq_length=16,
                 labels=["a", "b", "c"])
  # The float32 export as an AMX Xeon writes it (no XLA, the `cpu_onednn` inference forms),
  # whatever CPU runs this test.
  with _on_cpu(INTEL_AMX):
    export_classifier(model, tmp_path / "float32", dtype="float32", **options)
  assert not _xla_functions(tmp_path / "float32")
  # The bfloat16 one from a model folder, as export_saved_model.py --dtype=bfloat16 writes it.
  save_model_dir(model, tmp_path / "folder", vocab_file=str(vocab_file), do_lower_case=True,
                 max_seq_length=16, labels=["a", "b", "c"])
  export_model_dir(tmp_path / "folder", tmp_path / "bfloat16", dtype="bfloat16")
  job = {"dirs": {name: str(tmp_path / name) for name in ("float32", "bfloat16")},
         "texts": TEXTS, "ids": {key: value.tolist() for key, value in IDS.items()}}
  run = subprocess.run([sys.executable, "-c", _SERVER], input=json.dumps(job), text=True,
                       capture_output=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  results = json.loads(run.stdout)
  f32, bf16 = results["float32"], results["bfloat16"]
  assert bf16["signatures"] == f32["signatures"] == [
      "serve_examples", "serve_token_ids", "serving_default"]
  assert bf16["dtypes"] == f32["dtypes"]
  assert bf16["dtypes"]["probabilities"] == bf16["dtypes"]["logits"] == "float32"
  assert f32["variable_dtypes"] == ["float32"]
  assert bf16["variable_dtypes"] == ["bfloat16", "float32"]
  for signature in ("text", "ids"):
    difference = np.abs(np.array(bf16[signature]) - np.array(f32[signature]))
    assert 0 < difference.max() <= 1e-2, (signature, difference.max())
  np.testing.assert_allclose(f32["ids"], tf.nn.softmax(model(IDS)["logits"]), atol=1e-5)


def _xla_functions(export_dir):
  saved = saved_model_pb2.SavedModel()
  saved.ParseFromString((export_dir / "saved_model.pb").read_bytes())
  return [f.signature.name for f in saved.meta_graphs[0].graph_def.library.function
          if f.attr["_XlaMustCompile"].b]


def test_bfloat16_export_is_not_compiled_with_xla_by_default(tmp_path):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  options = dict(vocab_file=str(vocab_file), do_lower_case=True, max_seq_length=8)
  keras.utils.set_random_seed(0)
  model = BertEncoder(CONFIG)
  export_encoder(model, tmp_path / "bfloat16", dtype="bfloat16", **options)
  export_encoder(model, tmp_path / "float32", dtype="float32", **options)
  assert not _xla_functions(tmp_path / "bfloat16")
  assert bool(_xla_functions(tmp_path / "float32")) is precision.default_jit_compile("float32")
  loaded = tf.saved_model.load(str(tmp_path / "bfloat16"))
  outputs = loaded.signatures["serve_token_ids"](
      **{key: tf.constant(value) for key, value in IDS.items()})
  assert outputs["sequence_output"].dtype == tf.float32
  # tanh outputs of weights 15 times BERT's scale: bfloat16 moves them by a few hundredths.
  np.testing.assert_allclose(outputs["pooled_output"], model(IDS)["pooled_output"], atol=0.1)


class _Task(base.Task):
  """A classifier task whose `save` writes the model folder and the SavedModel."""

  name = "toy"

  def build_model(self):
    return BertClassifier(CONFIG, 3)

  def loss(self, outputs, labels):
    raise NotImplementedError


@pytest.mark.parametrize("policy, stored", [("mixed_bfloat16", ["bfloat16", "float32"]),
                                            ("float32", ["float32"])])
def test_a_task_exports_in_the_dtype_it_trained_in(tmp_path, policy, stored):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  task = _Task(TaskConfig(vocab_file=str(vocab_file), max_seq_length=8), CONFIG)
  # What a run with --dtype=bfloat16 (or float32) trains: a model under that policy.
  model = BertClassifier(CONFIG, 3, dtype=policy)
  assert precision.trained_dtype(model) == policy.removeprefix("mixed_")
  task.save(model, str(tmp_path / "out"), str(tmp_path / "export"))
  dtypes = tf.train.load_checkpoint(str(tmp_path / "export" / "variables" / "variables")
                                    ).get_variable_to_dtype_map().values()
  assert sorted({dtype.name for dtype in dtypes if dtype.is_floating}) == stored
  assert bool(_xla_functions(tmp_path / "export")) is (
      policy == "float32" and precision.default_jit_compile("float32"))


@pytest.mark.parametrize("dtype, cpu, jit_compile, kernels", [
    ("bfloat16", INTEL_AMX, False, "cpu_onednn"),
    ("bfloat16", AMD_ZEN4, False, "cpu_onednn"),
    ("float32", INTEL_AMX, False, "cpu_onednn"),
    ("float32", AMD_ZEN4, True, "cpu_xla")])
def test_the_served_model_is_built_on_the_chosen_kernels(dtype, cpu, jit_compile, kernels):
  model = BertClassifier(CONFIG, num_classes=2, kernels="cpu_xla")
  expected = tf.nn.softmax(model(IDS)["logits"])
  with _on_cpu(cpu):
    served, served_jit_compile = saved_model._serving_model(model, dtype, None)
  assert served_jit_compile is jit_compile
  assert ops.backends_of(served) == {kernels}
  # A model already on the chosen kernels and in the dtype is served as it is.
  assert (served is model) is (dtype == "float32" and kernels == "cpu_xla")
  probabilities = tf.nn.softmax(tf.cast(served(IDS)["logits"], tf.float32))
  np.testing.assert_allclose(probabilities, expected, atol=1e-2 if dtype == "bfloat16" else 1e-6)
