"""Hugging Face BERT weights (`model.safetensors` or `pytorch_model.bin` + `config.json`) in.

The Hugging Face names are translated to the original TF1 names (`encoder.layer.3.output.dense
.weight` -> `bert/encoder/layer_3/output/dense/kernel`, transposed because a PyTorch `Linear`
stores `[out, in]`), and `official_bert.checkpoints.tf1` assigns them, with the same checks.
"""

import io
import os
import posixpath

from absl import logging
import numpy as np
import safetensors.numpy
import tensorflow as tf

from official_bert.checkpoints import tf1
from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.configs import BertConfig
from official_bert.layers.activations import GELU_ERF, GELU_TANH

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
_WEIGHT_FILES = (SAFETENSORS_NAME, SAFETENSORS_INDEX_NAME, PYTORCH_NAME)
_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")
# Names with no counterpart in the model: a buffer of position indices, and the masked-LM decoder,
# which BERT ties to the word embeddings (checked to be equal before it is dropped).
_POSITION_IDS = "embeddings.position_ids"
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"
# Hugging Face's `hidden_act` names and this package's: its `gelu` (also its default) is the exact
# erf GELU, where the original's `bert_config.json` means the tanh approximation by `gelu`.
_HF_ACTIVATIONS = {
    "gelu": GELU_ERF,
    "gelu_python": GELU_ERF,
    "gelu_new": GELU_TANH,
    "gelu_pytorch_tanh": GELU_TANH,
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "tanh": "tanh",
    "linear": "linear",
}
_HEAD_NAMES = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
}


def find_hf_checkpoint(path):
  """Returns `(config_file, weights_file)` of a Hugging Face checkpoint, or None.

  Args:
    path: a folder with `config.json` and `model.safetensors` (or its sharded index, or
      `pytorch_model.bin`), or the weights file itself with `config.json` beside it.
  """
  path = os.fspath(path)
  is_folder = tf.io.gfile.isdir(path)
  folder = path if is_folder else os.path.dirname(path)
  config_file = os.path.join(folder, CONFIG_NAME)
  if not file_io.is_file(config_file):
    return None
  if not is_folder and os.path.basename(path) in _WEIGHT_FILES and file_io.is_file(path):
    return config_file, path
  for name in _WEIGHT_FILES:
    if file_io.is_file(os.path.join(folder, name)):
      return config_file, os.path.join(folder, name)
  return None


def require_hf_checkpoint(path):
  """Like `find_hf_checkpoint`, but raises `FileNotFoundError` when there is no checkpoint."""
  found = find_hf_checkpoint(path)
  if found is None:
    raise FileNotFoundError(f"No Hugging Face checkpoint at {path}: expected {CONFIG_NAME} and "
                            f"one of {', '.join(_WEIGHT_FILES)}.")
  return found


def read_hf_config(path):
  """Reads the `BertConfig` of a Hugging Face BERT from its `config.json`.

  Args:
    path: the checkpoint folder, its weights file or the `config.json` itself.

  Its `hidden_act` is read with Hugging Face's names: `gelu` is the exact GELU (`gelu_erf`),
  `gelu_new` and `gelu_pytorch_tanh` the tanh form (`gelu_tanh`).

  Raises:
    ValueError: the file describes a model this encoder cannot reproduce (another layer-norm
      epsilon, position embedding type or activation, or a model type other than BERT).
  """
  path = os.fspath(path)
  config_file = path if path.endswith(".json") else require_hf_checkpoint(path)[0]
  values = file_io.read_json_object(config_file)
  model_type = values.get("model_type", "bert")
  if model_type != "bert":
    raise ValueError(f"{config_file}: model_type is {model_type!r}; only 'bert' checkpoints load.")
  if values.get("position_embedding_type", "absolute") != "absolute":
    raise ValueError(f"{config_file}: position_embedding_type "
                     f"{values['position_embedding_type']!r} is not supported (only 'absolute').")
  epsilon = values.get("layer_norm_eps", 1e-12)
  if not np.isclose(epsilon, 1e-12, rtol=1e-3, atol=0):
    raise ValueError(f"{config_file}: layer_norm_eps is {epsilon}; BERT layers use 1e-12.")
  # A Hugging Face config.json also holds the library's own settings (architectures,
  # pad_token_id, torch_dtype, ...): only the BERT fields are read.
  activation = values.get("hidden_act", "gelu")
  if not isinstance(activation, str) or activation not in _HF_ACTIVATIONS:
    raise ValueError(f"{config_file}: hidden_act {activation!r} is not supported; choose one of "
                     f"{', '.join(_HF_ACTIVATIONS)}.")
  return BertConfig.from_dict(dict(values, hidden_act=_HF_ACTIVATIONS[activation]),
                              source=config_file,
                              allow_unknown_keys=True)


def _read_pytorch(weights_file):
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImportError(f"Reading {weights_file} needs PyTorch: `pip install torch`, or convert the "
                      f"file to {SAFETENSORS_NAME}, which this package reads without it.") from None
  with file_io.open_read(weights_file) as f:
    state = torch.load(io.BytesIO(f.read()), map_location="cpu", weights_only=True)
  return {name: tensor.float().numpy() if tensor.is_floating_point() else tensor.numpy()
          for name, tensor in state.items()}


def read_hf_weights(path):
  """Reads the tensors of a Hugging Face checkpoint under their own names.

  Args:
    path: see `find_hf_checkpoint`.

  Returns:
    `{Hugging Face name: numpy array}`.
  """
  weights_file = require_hf_checkpoint(path)[1]
  if weights_file.endswith(PYTORCH_NAME):
    return _read_pytorch(weights_file)
  if weights_file.endswith(SAFETENSORS_INDEX_NAME):
    weight_map = file_io.read_json_object(weights_file).get("weight_map")
    if not isinstance(weight_map, dict):
      raise UserError(f"{weights_file}: expected a 'weight_map' object (tensor name -> shard "
                      "file).")
    shards = sorted(set(weight_map.values()))
    for shard in shards:
      # A shard is a file of the model folder itself, never a path that leads out of it.
      if (not isinstance(shard, str) or not shard or "\\" in shard or ":" in shard
          or posixpath.isabs(shard) or ".." in shard.split("/")):
        raise UserError(f"{weights_file}: the shard {shard!r} lies outside the model folder; a "
                        "shard must be a file name relative to the folder of the index.")
    weights = {}
    for shard in shards:
      weights.update(_read_safetensors(os.path.join(os.path.dirname(weights_file), shard)))
    return weights
  return _read_safetensors(weights_file)


def _read_safetensors(path):
  """Reads a `.safetensors` file: mapped from a local disk, else read whole (`tf.io.gfile`)."""
  local = file_io.local_path(path)
  if local is not None:
    return safetensors.numpy.load_file(local)
  with file_io.open_read(path) as f:
    return safetensors.numpy.load(f.read())


def _original_name(name):
  """Returns `(original name, transposed)` of a Hugging Face name; `(name, False)` if unknown."""
  if name in _HEAD_NAMES:
    return _HEAD_NAMES[name], False
  parts = name.split(".")
  if parts[0] not in ("embeddings", "encoder", "pooler", "cls") or len(parts) < 3:
    return name, False
  path, leaf = [], parts[-1]
  for part in parts[:-1]:
    if part.isdigit() and path and path[-1] == "layer":
      path[-1] = f"layer_{part}"
    else:
      path.append(part)
  scope = [] if parts[0] == "cls" else ["bert"]
  if path[-1] == "LayerNorm" and leaf in ("weight", "gamma", "bias", "beta"):
    return "/".join(scope + path + ["gamma" if leaf in ("weight", "gamma") else "beta"]), False
  if path[-1] in _TABLES and leaf == "weight":
    return "/".join(scope + path), False
  if leaf == "weight":
    return "/".join(scope + path + ["kernel"]), True
  if leaf == "bias":
    return "/".join(scope + path + ["bias"]), False
  return name, False


def hf_to_original(weights, source="the Hugging Face checkpoint"):
  """Renames (and transposes) Hugging Face BERT tensors to the original TF1 variables.

  A `bert.` prefix (as in `BertForPreTraining`) is dropped. Names that are not BERT's keep their
  own name, so `tf1.check_compatible` reports them as unexpected.

  Args:
    weights: `{Hugging Face name: numpy array}`.
    source: what to call the checkpoint in error messages.

  Returns:
    `{original name: numpy array}`.
  """
  weights = {name[len("bert."):] if name.startswith("bert.") else name: value
             for name, value in weights.items()}
  decoder = weights.get(_DECODER_WEIGHT)
  word_embeddings = weights.get("embeddings.word_embeddings.weight")
  if decoder is not None and (word_embeddings is None
                              or not np.array_equal(decoder, word_embeddings)):
    raise ValueError(f"{source}: {_DECODER_WEIGHT} differs from the word embeddings; BERT ties "
                     "them and this model has no separate output projection.")
  decoder_bias = weights.get(_DECODER_BIAS)
  if decoder_bias is not None:
    if "cls.predictions.bias" not in weights:
      weights["cls.predictions.bias"] = decoder_bias
    elif not np.array_equal(decoder_bias, weights["cls.predictions.bias"]):
      raise ValueError(f"{source}: {_DECODER_BIAS} differs from cls.predictions.bias.")
  dropped = [name for name in (_POSITION_IDS, _DECODER_WEIGHT, _DECODER_BIAS)
             if weights.pop(name, None) is not None]
  if dropped:
    logging.info("%s: dropped %s (a buffer, or tied to another tensor).", source,
                 ", ".join(dropped))
  original = {}
  for name, value in weights.items():
    target, transposed = _original_name(name)
    value = np.asarray(value)
    original[target] = np.ascontiguousarray(value.T) if transposed else value
  return original


def load_hf_checkpoint(model, path):
  """Loads Hugging Face BERT weights into a model, checking every name and shape.

  Args:
    model: a `BertEncoder`, a `BertPretrainer` (the file must hold `cls.predictions.*` and
      `cls.seq_relationship.*`) or a task model with an `.encoder`.
    path: see `find_hf_checkpoint`.

  Example, with the folder of a downloaded Hugging Face model:

      encoder = BertEncoder(read_hf_config("all-MiniLM-L6-v2"))
      load_hf_checkpoint(encoder, "all-MiniLM-L6-v2")
  """
  weights_file = require_hf_checkpoint(path)[1]
  weights = hf_to_original(read_hf_weights(weights_file), source=weights_file)
  logging.info("Read %d tensors from %s.", len(weights), weights_file)
  tf1.set_original_weights(model, weights, source=weights_file)
