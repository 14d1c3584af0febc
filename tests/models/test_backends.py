"""The model on Keras' JAX and PyTorch backends: the encoder, every head and the pre-trainer build,
run, train with `Model.fit` and round-trip through `model.json` + `.weights.h5` without TensorFlow
installed, load model folders written under TensorFlow with the same outputs, and refuse
TensorFlow's kernels.

Keras reads `KERAS_BACKEND` once per process, so each backend runs its checks in one subprocess
(`_CHECKS`); this process, on TensorFlow, writes the folders and the outputs they must give.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from official_bert import BertClassifier, BertConfig, load_encoder
from official_bert.checkpoints import save_model_dir

from testing import SHARED_DATA

CONFIG = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1)
TINY_CHECKPOINT = SHARED_DATA / "checkpoints" / "tf1_tiny_random"

# Run in a fresh process on the backend named by KERAS_BACKEND; the argument is a JSON job with
# the folders written on TensorFlow; prints one JSON line of results.
_CHECKS = r'''
import json
import logging
import sys

import keras
import numpy as np

job = json.loads(sys.argv[1])
# The model needs no TensorFlow: until the model folders below, it is as if not installed (an
# import of it fails, and `importlib.util.find_spec` finds none).
_TENSORFLOW = ("tensorflow", "tensorflow_text", "tensorflow_datasets")
for name in _TENSORFLOW:
  sys.modules[name] = None
from official_bert import (BertClassifier, BertConfig, BertEncoder, BertMultipleChoice,
                           BertPretrainer, BertSpanLabeler, BertTokenClassifier, ops)
from official_bert.common.errors import UserError

results = {"backend": keras.backend.backend()}
config = BertConfig.from_dict(job["config"])
inputs = {name: np.array(value, "int32") for name, value in job["inputs"].items()}


def numpy(tree):
  return keras.tree.map_structure(keras.ops.convert_to_numpy, tree)


# Build and forward: each model's output shapes, and the kernels it chose.
# Two examples of two choices: the encoder sees the same 4 rows as the other models, so JAX
# compiles its operations for one shape, not two.
choices = {name: np.stack([inputs[name][:2]] * 2, axis=1) for name in inputs}
models = {
    "encoder": (BertEncoder(config), inputs),
    "classifier": (BertClassifier(config, num_classes=3), inputs),
    "span_labeler": (BertSpanLabeler(config), inputs),
    "multiple_choice": (BertMultipleChoice(config, num_choices=2), choices),
    "token_classifier": (BertTokenClassifier(config, num_classes=5), inputs),
    "pretrainer": (BertPretrainer(config), dict(
        inputs, masked_lm_positions=np.array([[1, 2]] * len(inputs["input_mask"]), "int32"))),
}
results["shapes"] = {
    name: {key: list(np.shape(value)) for key, value in numpy(model(x)).items()
           if key != "encoder_outputs"} for name, (model, x) in models.items()}
results["kernels"] = sorted(set().union(*(ops.backends_of(m) for m, _ in models.values())))

# A few steps of Model.fit on one batch: the loss goes down.
keras.utils.set_random_seed(0)
classifier = BertClassifier(config, num_classes=3)
classifier.compile(optimizer=keras.optimizers.Adam(1e-2),
                   loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
labels = {"logits": np.arange(len(inputs["input_mask"])) % 3}
history = classifier.fit(inputs, labels, epochs=10, batch_size=len(labels["logits"]), verbose=0)
results["fit_losses"] = [float(v) for v in history.history["loss"]]

# model.json + .weights.h5 round trip.
json_file, weights_file = job["tmp"] + "/model.json", job["tmp"] + "/model.weights.h5"
with open(json_file, "w") as f:
  f.write(classifier.to_json())
classifier.save_weights(weights_file)
with open(json_file) as f:
  restored = keras.models.model_from_json(f.read())
restored.load_weights(weights_file)
expected = numpy(classifier(inputs))["logits"]
results["round_trip_error"] = float(np.abs(numpy(restored(inputs))["logits"] - expected).max())
results["round_trip_class"] = type(restored).__name__

# Reading a file asks for TensorFlow's file systems in one line.
try:
  BertConfig.from_json_file(job["tmp"] + "/bert_config.json")
except UserError as error:
  results["config_file_error"] = str(error)
for name in _TENSORFLOW:
  del sys.modules[name]
from official_bert.checkpoints import load_model_dir
from official_bert.training import RuntimeConfig

# Model folders written under TensorFlow: their float32 outputs agree with TensorFlow's. The
# random classifier's was saved with the cpu_onednn kernels, which this backend lacks.
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("absl").addHandler(handler)
results["folders"] = {}
for name, folder in job["folders"].items():
  model, _ = load_model_dir(folder)
  outputs = numpy(model({key: np.array(value, "int32")
                         for key, value in job["folder_inputs"][name].items()}))
  errors = {key: float(np.abs(np.asarray(outputs[key]) - np.asarray(value)).max())
            for key, value in job["expected"][name].items()}
  results["folders"][name] = {"errors": errors, "kernels": sorted(ops.backends_of(model))}
results["kernel_lines"] = [r for r in records if "TensorFlow's" in r]

# TensorFlow's kernels asked for: one line naming the argument, before any work.
refusals = {}
for what, make in [("argument", lambda: BertEncoder(config, kernels="cpu_onednn")),
                   ("flag", lambda: RuntimeConfig(kernels="cpu_xla"))]:
  try:
    make()
    refusals[what] = None
  except UserError as error:
    refusals[what] = str(error)
results["refusals"] = refusals
print(json.dumps(results))
'''


def _inputs():
  rng = np.random.default_rng(0)
  ids = rng.integers(5, CONFIG.vocab_size, (4, 9)).astype("int32")
  mask = (np.arange(9) < np.array([[9], [7], [5], [9]])).astype("int32")
  return {"input_word_ids": ids * mask, "input_mask": mask,
          "input_type_ids": (np.arange(9) >= 4).astype("int32")[None].repeat(4, 0)}


def _outputs(model, inputs):
  return {key: np.asarray(value).tolist() for key, value in model(inputs).items()
          if key != "encoder_outputs"}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  """What the TensorFlow side wrote: model folders and the outputs they give here."""
  directory = tmp_path_factory.mktemp("backends")
  inputs = _inputs()
  folders, expected, folder_inputs = {}, {}, {}
  classifier = BertClassifier(CONFIG, num_classes=3, kernels="cpu_onednn")
  folders["random_classifier"] = str(save_model_dir(classifier, directory / "random"))
  expected["random_classifier"] = _outputs(classifier, inputs)
  folder_inputs["random_classifier"] = inputs
  if TINY_CHECKPOINT.exists():  # a real TF1 checkpoint, converted to a model folder
    encoder = load_encoder(str(TINY_CHECKPOINT / "bert_model.ckpt"))
    folders["converted_checkpoint"] = str(save_model_dir(encoder, directory / "converted"))
    vocab = encoder.config.vocab_size
    checkpoint_inputs = dict(inputs, input_word_ids=inputs["input_word_ids"] % vocab)
    expected["converted_checkpoint"] = _outputs(encoder, checkpoint_inputs)
    folder_inputs["converted_checkpoint"] = checkpoint_inputs
  return {"config": CONFIG.to_dict(), "folders": folders, "expected": expected,
          "inputs": {name: value.tolist() for name, value in inputs.items()},
          "folder_inputs": {folder: {name: value.tolist() for name, value in values.items()}
                            for folder, values in folder_inputs.items()}}


# The whole suite's (CI's, issue #40): a process of its own a backend, with a Model.fit each.
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_model_runs_trains_saves_and_loads_on_another_backend(backend, job, tmp_path):
  if not TINY_CHECKPOINT.exists():
    print(f"{TINY_CHECKPOINT} is absent: only the folder of random weights is compared.")
  job = dict(job, tmp=str(tmp_path))
  env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=os.pathsep.join(sys.path))
  done = subprocess.run([sys.executable, "-c", _CHECKS, json.dumps(job)], capture_output=True,
                        text=True, env=env, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-4000:]
  results = json.loads(done.stdout.strip().splitlines()[-1])
  assert results["backend"] == backend
  assert results["shapes"] == {
      "encoder": {"sequence_output": [4, 9, 16], "pooled_output": [4, 16]},
      "classifier": {"logits": [4, 3]},
      "span_labeler": {"start_logits": [4, 9], "end_logits": [4, 9]},
      "multiple_choice": {"logits": [2, 2]},
      "token_classifier": {"logits": [4, 9, 5]},
      "pretrainer": {"mlm_logits": [4, 2, 60], "next_sentence_logits": [4, 2]}}
  assert results["kernels"] == ["stock"]  # `auto` off TensorFlow
  losses = results["fit_losses"]
  assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0], losses
  assert results["round_trip_class"] == "BertClassifier"
  assert results["round_trip_error"] == 0.0
  # All of the above ran without TensorFlow (an import of it would have ended the job); a file
  # needs it, and says so.
  assert results["config_file_error"].startswith(
      f"{tmp_path}/bert_config.json: files are read and written through TensorFlow's file "
      "systems (tf.io.gfile), and TensorFlow is not installed"), results["config_file_error"]
  for name, folder in results["folders"].items():
    assert folder["kernels"] == ["stock"], name
    assert max(folder["errors"].values()) < 1e-5, (name, folder["errors"])
  if TINY_CHECKPOINT.exists():
    assert "converted_checkpoint" in results["folders"]
  # The folder saved with cpu_onednn says once that it loads with the stock kernels.
  assert len(results["kernel_lines"]) == 1, results["kernel_lines"]
  assert "BertClassifier was saved with the cpu_onednn kernels" in results["kernel_lines"][0]
  refusals = results["refusals"]
  assert refusals["argument"].startswith("kernels=cpu_onednn: these kernels are TensorFlow's")
  assert refusals["flag"].startswith("--kernels=cpu_xla: these kernels are TensorFlow's")
  assert all("\n" not in line for line in refusals.values())
