"""Checkpoints in and out: model folders, original TF1 checkpoints and Hugging Face folders.

`bert-convert-checkpoint` and the end of pre-training write a model folder
(`checkpoints/model_dir.py`: `bert_config.json`, `vocab.txt`, `model.weights.h5`, `model.json`)
of kind `encoder`, or the kind whose head the source holds: `pretrainer` (masked-LM and
next-sentence heads), `classifier` or `span_labeler` (an original `run_classifier.py` or
`run_squad.py` checkpoint); with format "tf1" (alone or beside it) they write the original
`bert_model.ckpt.index` and `.data-00000-of-00001`, readable by the original google-research/bert
code, head included. Every loader here (`load_encoder`, the `--init_checkpoint` of each script)
accepts a model folder of any kind, an original TF1 checkpoint or a Hugging Face folder; the
`--init_checkpoint` of fine-tuning (`restore_task_weights`) also takes the task head from a
checkpoint that holds one of the model's kind and shapes. Where a folder holds both a model folder
and a TF1 checkpoint, the model folder is read.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from official_bert.checkpoints import huggingface, model_dir, tf1
from official_bert.checkpoints.model_dir import CONFIG_NAME, MANIFEST_NAME, VOCAB_NAME, WEIGHTS_NAME
from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.configs import BertConfig
from official_bert.layers import activations
from official_bert.models.bert_pretrainer import BertPretrainer
from official_bert.networks.bert_encoder import BertEncoder

KERAS, TF1, HF = "keras", "tf1", "hf"
OUTPUT_FORMATS = (KERAS, TF1)
INPUT_FORMATS = (TF1, HF, KERAS)
# Fields that do not change the function a checkpoint computes once loaded.
_TRAINING_ONLY_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


@dataclasses.dataclass(frozen=True)
class LocatedCheckpoint:
  """A checkpoint found once (`check_init_checkpoint`): every loader here takes it in place of
  its path and does not look again.

  Attributes:
    path: the path as given.
    kind: `keras` (a model folder), `tf1` or `hf`.
    location: the model folder, the TF1 prefix or the Hugging Face weights file.
    config_file: the config file beside the weights (which may be missing).
  """
  path: str
  kind: str
  location: str
  config_file: str

  def __fspath__(self):
    return self.path


def _locate(path):
  """Returns `(kind, location, config_file)`: kind `keras`, `tf1` or `hf`."""
  if isinstance(path, LocatedCheckpoint):
    return path.kind, path.location, path.config_file
  path = os.fspath(path)
  if model_dir.is_model_dir(path):
    return KERAS, path, os.path.join(path, CONFIG_NAME)
  prefix = tf1.resolve_tf1_prefix(path)
  if prefix is not None:
    return TF1, prefix, os.path.join(os.path.dirname(prefix), CONFIG_NAME)
  hf_files = huggingface.find_hf_checkpoint(path)
  if hf_files is not None:
    return HF, hf_files[1], hf_files[0]
  raise FileNotFoundError(
      f"No BERT checkpoint at {path}: expected a model folder (with {MANIFEST_NAME}), a TF1 "
      f"checkpoint prefix or folder (with {tf1.CHECKPOINT_NAME}.index), or a Hugging Face folder "
      f"({huggingface.CONFIG_NAME} + {huggingface.SAFETENSORS_NAME}).")


# The key every object-based (TensorFlow 2) checkpoint holds: the graph of the saved objects.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def check_init_checkpoint(path):
  """Checks, before any training, that `path` holds starting weights this package can read.

  A model folder of any kind (a fine-tuned one gives its encoder), an original TF1 checkpoint and
  a Hugging Face folder are fine. A training checkpoint (`ckpt-N` in a run's output folder, or
  any object-based TensorFlow 2 checkpoint) holds the optimizer and the step beside weights named
  by object path: it is the way to resume a run, not a starting point, and the TF1 reader cannot
  read it.

  Args:
    path: the `init_checkpoint`.

  Returns:
    The `LocatedCheckpoint`, which the loaders take instead of `path`.

  Raises:
    FileNotFoundError: nothing at `path` is a checkpoint of a known kind.
    UserError: `path` is a training checkpoint.
  """
  kind, location, config_file = _locate(path)
  if kind == TF1 and _OBJECT_GRAPH_KEY in dict(tf.train.list_variables(location)):
    raise UserError(
        f"{path} is a training checkpoint ({location}: the weights, optimizer and step of a run "
        "in progress), not a model to start from. To continue that run, give its folder as "
        "output_dir (the run resumes from its newest checkpoint); to start from its weights, "
        f"give the model folder a finished run saves in its output_dir ({MANIFEST_NAME} beside "
        "the weights).")
  return LocatedCheckpoint(os.fspath(path), kind, location, config_file)


def _read_config(kind, config_file):
  if kind == HF:
    return huggingface.read_hf_config(config_file)
  return BertConfig.from_json_file(config_file)


def _resolve_config(config, kind, config_file, path):
  if isinstance(config, BertConfig):
    return config
  if isinstance(config, dict):
    return BertConfig.from_dict(config)
  if config is not None:
    return BertConfig.from_json_file(config)
  if not tf.io.gfile.exists(config_file):
    raise FileNotFoundError(f"{config_file} is missing, so the shape of the checkpoint at {path} "
                            "is unknown: pass config= (a BertConfig or the path of its json).")
  return _read_config(kind, config_file)


def _check_same_architecture(expected, found, source):
  differences = [f"{field.name}: {getattr(found, field.name)!r} in {source}, "
                 f"{getattr(expected, field.name)!r} in the model"
                 for field in dataclasses.fields(BertConfig)
                 if field.name not in _TRAINING_ONLY_FIELDS
                 and getattr(found, field.name) != getattr(expected, field.name)]
  if differences:
    raise ValueError(f"{source} describes another network than the model's config: "
                     + "; ".join(differences) + ".")


def _restore(model, kind, location):
  """Loads weights of the given kind; `model` is a `BertEncoder` or a `BertPretrainer`."""
  if kind == KERAS:
    saved, info = model_dir.load_model_dir(location)
    if isinstance(model, BertPretrainer) and info.kind != BertPretrainer.kind:
      raise FileNotFoundError(f"{location} holds a model of kind {info.kind!r}, without the "
                              "pre-training heads; use load_encoder.")
    if not isinstance(model, BertPretrainer) and info.kind != BertEncoder.kind:
      saved = saved.encoder
    if type(saved) is not type(model):
      raise TypeError(f"The {info.kind} model of {location} is built on a "
                      f"{type(saved).__name__}, not a {type(model).__name__}.")
    model.set_weights(saved.get_weights())
    logging.info("Loaded the weights of %s.", location)
  elif kind == TF1:
    tf1.load_tf1_checkpoint(model, location)
  else:
    huggingface.load_hf_checkpoint(model, location)


def read_config(path, config=None):
  """The `BertConfig` of a checkpoint, without loading its weights.

  Args:
    path: anything `load_encoder` accepts (checked to hold a checkpoint).
    config: optional `BertConfig`, dict or json path to use instead of the file beside the
      weights, as in `load_encoder`.

  Returns:
    The `BertConfig`.
  """
  kind, _, config_file = _locate(path)
  return _resolve_config(config, kind, config_file, path)


def load_encoder(path, config=None, dtype=None):
  """Builds a `BertEncoder` and loads its weights from a checkpoint.

  Args:
    path: a model folder of any kind (its encoder), an original TF1 checkpoint prefix or a
      folder holding `bert_model.ckpt.*` (the `cls/` heads are ignored), or a Hugging Face folder.
    config: optional `BertConfig`, dict or json path; by default the `bert_config.json` (or
      Hugging Face `config.json`) beside the weights.
    dtype: optional dtype policy of the encoder, e.g. `"mixed_bfloat16"`.

  Returns:
    The built `BertEncoder` with the checkpoint's weights.

  Example:

  >>> import numpy as np
  >>> import official_bert
  >>> config = official_bert.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                                   num_attention_heads=2, intermediate_size=32)
  >>> _ = write_dir(official_bert.BertEncoder(config), "bert_mini")
  >>> encoder = official_bert.load_encoder("bert_mini")
  >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
  >>> outputs = encoder({"input_word_ids": ids, "input_mask": np.sign(ids),
  ...                    "input_type_ids": np.zeros_like(ids)})
  >>> tuple(outputs["pooled_output"].shape)
  (1, 16)
  """
  kind, location, config_file = _locate(path)
  encoder = BertEncoder(_resolve_config(config, kind, config_file, path), dtype=dtype)
  _restore(encoder, kind, location)
  return encoder


def load_pretrainer(path, config=None, dtype=None):
  """Builds a `BertPretrainer` and loads the encoder and both pre-training heads.

  Args:
    path: a model folder of kind `pretrainer`, or a TF1 or Hugging Face checkpoint that holds the
      `cls/` (`cls.`) heads.
    config: optional `BertConfig`, dict or json path (default: the file beside the weights).
    dtype: optional dtype policy.

  Returns:
    The built `BertPretrainer`.
  """
  kind, location, config_file = _locate(path)
  pretrainer = BertPretrainer(_resolve_config(config, kind, config_file, path), dtype=dtype)
  _restore(pretrainer, kind, location)
  return pretrainer


def load_model(path, dtype=None):
  """Loads the model of a model folder, or the encoder of an original TF1 or Hugging Face one.

  Args:
    path: a model folder (see `checkpoints/model_dir.py`), or anything else `load_encoder`
      accepts, which loads as kind `encoder` with `do_lower_case` and `max_seq_length` unknown.
    dtype: optional dtype policy to build the model under.

  Returns:
    `(model, info)`: the model with its weights and its `model_dir.ModelInfo`.
  """
  path = os.fspath(path)
  if model_dir.is_model_dir(path):
    return model_dir.load_model_dir(path, dtype=dtype)
  encoder = load_encoder(path, dtype=dtype)
  folder = path if tf.io.gfile.isdir(path) else os.path.dirname(path)
  vocab_file = os.path.join(folder, VOCAB_NAME)
  logging.info("%s is no model folder: loaded its pre-trained encoder.", path)
  return encoder, model_dir.model_info(
      encoder, vocab_file=vocab_file if tf.io.gfile.exists(vocab_file) else None)


def restore_encoder_weights(encoder, path):
  """Loads checkpoint weights into an existing encoder: the `--init_checkpoint` of fine-tuning.

  Args:
    encoder: a `BertEncoder`, or a task model (`BertClassifier`, ...) whose `.encoder` is one.
    path: anything `load_encoder` accepts. A config file beside the weights must describe the
      same architecture (dropout rates may differ).
  """
  if not isinstance(encoder, BertEncoder):
    encoder = encoder.encoder
  kind, location = _locate_compatible(encoder.config, path)
  _restore(encoder, kind, location)


def _original_weights(model, kind, location):
  """The checkpoint's weights under original names, when it may hold the model's task head."""
  if not tf1.head_names(model):
    return None
  if kind == TF1:
    return tf1.read_tf1_checkpoint(location)
  if kind == KERAS and model_dir.read_model_info(location).kind == type(model).kind:
    saved, _ = model_dir.load_model_dir(location)
    if tf1.head_names(saved):
      return tf1.get_original_weights(saved)
  return None


def restore_task_weights(model, path):
  """Loads a checkpoint into a task model: the `--init_checkpoint` of fine-tuning.

  The encoder always comes from the checkpoint. The task head does too when the checkpoint holds
  the head of the model's kind with the model's shapes, as the original scripts did (they
  initialised every variable whose name the checkpoint has): an original fine-tuned
  `run_classifier.py` checkpoint initialises a classifier's `output_weights` / `output_bias`, a
  `run_squad.py` one a span labeler's `cls/squad/...`, and so does a model folder of the same
  kind. Otherwise the head keeps its fresh initialisation; the log says which.

  Args:
    model: a task model (`BertClassifier`, ...) with a `BertEncoder`, or a `BertEncoder`.
    path: anything `load_encoder` accepts.

  Returns:
    True when the task head was restored too (for a `BertPretrainer`, the pre-training heads:
    see `restore_pretrainer_weights`).
  """
  if isinstance(model, BertPretrainer):
    return restore_pretrainer_weights(model, path)
  encoder = model if isinstance(model, BertEncoder) else model.encoder
  kind, location = _locate_compatible(encoder.config, path)
  weights = _original_weights(model, kind, location)
  if weights is None:
    _restore(encoder, kind, location)
    if model is not encoder:
      logging.info("The head of the %s starts freshly initialised: %s holds no head of its kind.",
                   type(model).__name__, location)
    return False
  tf1.set_original_weights(encoder, weights, source=location)
  return tf1.set_head_weights(model, weights, source=location)


def restore_pretrainer_weights(pretrainer, path):
  """Loads the encoder and, where the checkpoint has them, the MLM and NSP heads of pre-training.

  This is the `--init_checkpoint` of `run_pretraining.py`: an original checkpoint restores the
  whole pre-training model, as in the original; one without heads (a Hugging Face encoder, a
  model folder of another kind) initialises the encoder and leaves the heads fresh.

  Args:
    pretrainer: a `BertPretrainer`.
    path: anything `load_encoder` accepts.

  Returns:
    True when the heads were restored too.
  """
  kind, location = _locate_compatible(pretrainer.config, path)
  if _has_pretraining_heads(kind, location):
    _restore(pretrainer, kind, location)
    return True
  logging.warning("%s holds no pre-training heads; only the encoder is initialised from it.", path)
  _restore(pretrainer.encoder, kind, location)
  return False


def _locate_compatible(config, path):
  kind, location, config_file = _locate(path)
  if tf.io.gfile.exists(config_file):
    _check_same_architecture(config, _read_config(kind, config_file), config_file)
  return kind, location


def _has_pretraining_heads(kind, location):
  if kind == KERAS:
    return model_dir.read_model_info(location).kind == BertPretrainer.kind
  if kind == TF1:
    return any(name.startswith("cls/") for name in tf1.list_tf1_variables(location))
  return any(name.startswith("cls.") for name in huggingface.read_hf_weights(location))


def write_dir(model, output_dir, vocab_file=None, formats=(KERAS,), is_regression=False):
  """Writes a model's checkpoint folder: a model folder, an original TF1 checkpoint, or both.

  Format "keras" writes the model folder (`model_dir.save_model_dir`, kind the model's own);
  "tf1" writes `bert_model.ckpt.*` (the encoder, plus the head where the original has names for
  it: see `tf1`), and then `bert_config.json` names the activation as the original code does
  (`gelu` for `gelu_tanh`, which this package reads back as the same function). A "tf1" export
  alone removes the manifest and weights of an earlier model folder there, since the loaders would
  read them first; a TF1 checkpoint that a "keras" export does not rewrite is left in place (it
  may be the source of an in-place conversion) with a warning.

  Args:
    model: any registered model (format "tf1": with a `BertEncoder`; a head the original has no
      names for is left out, with a warning).
    output_dir: the folder; created if needed.
    vocab_file: optional `vocab.txt` to copy in.
    formats: any of `"keras"` and `"tf1"`.
    is_regression: the model is a one-output classifier that scores a number.

  Returns:
    `output_dir`.
  """
  unknown = set(formats) - set(OUTPUT_FORMATS)
  if unknown or not formats:
    raise ValueError(f"formats must be chosen from {OUTPUT_FORMATS}, got {formats!r}.")
  output_dir = os.fspath(output_dir)
  if TF1 in formats:
    activation = activations.original_activation_name(model.config.hidden_act)
    if activation not in activations.ORIGINAL_NAMES:
      logging.warning("hidden_act %r has no name in the original google-research/bert code: it "
                      "will refuse the bert_config.json of %s rather than run another function.",
                      activation, output_dir)
    tf1.save_tf1_checkpoint(model, os.path.join(output_dir, tf1.CHECKPOINT_NAME))
  if KERAS in formats:
    model_dir.save_model_dir(model, output_dir, vocab_file=vocab_file, is_regression=is_regression,
                             original_config_names=TF1 in formats)
  else:
    for name in (MANIFEST_NAME, WEIGHTS_NAME):
      if tf.io.gfile.exists(os.path.join(output_dir, name)):
        tf.io.gfile.remove(os.path.join(output_dir, name))
        logging.info("Removed %s of an earlier model folder from %s.", name, output_dir)

    def fill(staging):
      if vocab_file is not None:
        tf.io.gfile.copy(vocab_file, os.path.join(staging, VOCAB_NAME))
      model.config.to_json_file(os.path.join(staging, CONFIG_NAME), original_names=True)

    file_io.write_folder(output_dir, fill, last=CONFIG_NAME)
  if TF1 not in formats and tf1.resolve_tf1_prefix(output_dir) is not None:
    logging.warning("%s still holds the TF1 checkpoint %s, which this export did not rewrite.",
                    output_dir, tf1.resolve_tf1_prefix(output_dir))
  logging.info("Wrote %s (%s) to %s.", type(model).__name__, " + ".join(formats), output_dir)
  return output_dir


def export_pretrained_dir(pretrainer_or_encoder, config, output_dir, vocab_file=None, tf1=False):
  """Writes the model folder of a pre-trained model: the end of pre-training.

  Args:
    pretrainer_or_encoder: a `BertPretrainer` (encoder and heads are written) or a `BertEncoder`.
    config: the model's `BertConfig` (or dict); checked against the model's own.
    output_dir: the folder to write.
    vocab_file: optional `vocab.txt` to copy in.
    tf1: also write `bert_model.ckpt.*`, for the original google-research/bert code.

  Returns:
    `output_dir`.
  """
  config = BertConfig.from_dict(config) if isinstance(config, dict) else config
  _check_same_architecture(pretrainer_or_encoder.config, config,
                           "the config passed to export_pretrained_dir")
  formats = (KERAS, TF1) if tf1 else (KERAS,)
  return write_dir(pretrainer_or_encoder, output_dir, vocab_file=vocab_file, formats=formats)


def convert(input_format, input_path, output_dir, output_format=KERAS, config_file=None):
  """Converts a BERT checkpoint between the original TF1 layout and the model folder.

  An original TF1 or a Hugging Face checkpoint becomes a model folder (or, `output_format="tf1"`,
  a rewritten `bert_model.ckpt`) of the kind whose head it holds (`tf1.original_kind`):
  `pretrainer`, `classifier` (its number of classes from the shape of `output_weights`),
  `span_labeler`, or else `encoder`. A model folder (`input_format="keras"`) becomes an original
  `bert_model.ckpt` that the original scripts read, head included, as their `--init_checkpoint`.

  Args:
    input_format: `"tf1"` (a `bert_model.ckpt` or `model.ckpt-<step>` prefix or its folder),
      `"hf"` (a folder with `config.json` and `model.safetensors` / `pytorch_model.bin`) or
      `"keras"` (a model folder; only to `output_format="tf1"`).
    input_path: the checkpoint.
    output_dir: the folder to write.
    output_format: `"keras"` or `"tf1"`.
    config_file: optional `bert_config.json` when none lies beside a TF1 checkpoint.

  Returns:
    `output_dir`.

  Example, with the original BERT-Mini files of google-research/bert:

      convert("tf1", "uncased_L-4_H-256_A-4/bert_model.ckpt", "bert_mini")  # returns "bert_mini"
  """
  if input_format not in INPUT_FORMATS:
    raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}.")
  if output_format not in OUTPUT_FORMATS:
    raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}.")
  input_path = os.fspath(input_path)
  if input_format == KERAS:
    if output_format != TF1:
      raise ValueError(f"{input_path} is a model folder already: convert it to "
                       f"output_format={TF1!r}.")
    if os.path.abspath(input_path) == os.path.abspath(os.fspath(output_dir)):
      raise ValueError(f"Write the original checkpoint of {input_path} to another folder: a TF1 "
                       "export there would replace the model folder's manifest and weights.")
    model, info = model_dir.load_model_dir(input_path)
    write_dir(model, output_dir, vocab_file=info.vocab_file, formats=(TF1,))
    logging.info("Converted the %s model folder %s to an original checkpoint in %s.", info.kind,
                 input_path, output_dir)
    return output_dir
  if input_format == TF1:
    location = tf1.require_tf1_prefix(input_path)
    beside = os.path.join(os.path.dirname(location), CONFIG_NAME)
    config = _resolve_config(config_file, TF1, beside, input_path)
    weights = tf1.read_tf1_checkpoint(location)
  else:
    beside, location = huggingface.require_hf_checkpoint(input_path)
    config = _resolve_config(config_file, HF, beside, input_path)
    weights = huggingface.hf_to_original(huggingface.read_hf_weights(location), source=location)
  model = tf1.model_for_weights(config, weights)
  tf1.set_original_weights(model, weights, source=location)
  vocab_file = os.path.join(os.path.dirname(beside), VOCAB_NAME)
  if not tf.io.gfile.exists(vocab_file):
    logging.warning("No %s beside %s; the output folder has none.", VOCAB_NAME, location)
    vocab_file = None
  write_dir(model, output_dir, vocab_file=vocab_file, formats=(output_format,),
            is_regression=getattr(model, "num_classes", None) == 1)
  logging.info("Converted %s (%s, %d layers, hidden %d) to a model of kind %s in %s.", location,
               input_format, config.num_hidden_layers, config.hidden_size, type(model).kind,
               output_dir)
  return output_dir
