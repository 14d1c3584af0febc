"""The model folder: one format for converted, pre-trained and fine-tuned models.

`convert_checkpoint.py`, the end of pre-training and every fine-tuning script write it; every
script's `--init_checkpoint`, `load_encoder` and `export_saved_model.py` read it:

    bert_config.json   the encoder's shape, in the original format; `hidden_act` names its GELU
                       `gelu_tanh` or `gelu_erf` (or `gelu`, the original's name of the tanh
                       form, beside an original TF1 checkpoint)
    vocab.txt          the WordPiece vocabulary, when the writer had one
    model.weights.h5   Keras weights of the whole model (encoder and heads)
    model.json         the manifest; written last, so it marks a complete folder

`model.json` holds:

    kind            the model class, as it registered itself
                    (`official_bert.common.registry`): `encoder`,
                    `pretrainer`, `classifier`, `span_labeler`, `multiple_choice`,
                    `token_classifier`
    model_config    the class's Keras config (`get_config()`) without the BERT config, which is
                    `bert_config.json`, and without the dtype policy, which the reader chooses;
                    its `kernels` (`official_bert.ops`) is absent from folders of earlier
                    versions, which then load with `auto`
    do_lower_case   whether the text was lower-cased; null when unknown (a converted checkpoint)
    max_seq_length  the sequence length of training; null when unknown
    labels          label names by class id, or null
    is_regression   true for a one-output classifier that scores a number (STS-B)
    extra           settings for serving: `sentence_pair` (classifier), `max_query_length` and
                    `max_answer_length` (span labeler); free-form JSON otherwise

Other files in the folder (training checkpoints, `eval_results.txt`, an original
`bert_model.ckpt.*` written beside) are left alone. Paths may be local or `gs://`.

Example:

>>> from official_bert import BertClassifier, BertConfig
>>> config = BertConfig(vocab_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
...                     intermediate_size=32, max_position_embeddings=16)
>>> with open("vocab.txt", "w") as f:
...   _ = f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]))
>>> folder = save_model_dir(BertClassifier(config, num_classes=2), "mrpc_output",
...                         vocab_file="vocab.txt", do_lower_case=True, max_seq_length=16,
...                         labels=["0", "1"], extra={"sentence_pair": True})
>>> model, info = load_model_dir("mrpc_output")
>>> info.kind, info.labels, info.extra
('classifier', ('0', '1'), {'sentence_pair': True})
"""

import dataclasses
import json
import os
import tempfile

from absl import logging
import tensorflow as tf

from official_bert.common import file_io, registry
from official_bert.common.errors import UserError
from official_bert.configs import BertConfig

# The model classes register their kinds when imported.
from official_bert.tokenization import load_vocab

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
WEIGHTS_NAME = "model.weights.h5"
MANIFEST_NAME = "model.json"
# Left out of `model_config`: written to `bert_config.json`, or chosen by the reader.
_NOT_IN_MODEL_CONFIG = ("config", "dtype")


@dataclasses.dataclass(frozen=True)
class ModelInfo:
  """What a model folder says about its model: the manifest, the config and the vocabulary.

  Args:
    kind: the registered kind of the model class.
    config: the encoder's `BertConfig`.
    vocab_file: the folder's `vocab.txt`; None when it has none.
    do_lower_case: whether text is lower-cased; None when unknown.
    max_seq_length: the sequence length of training; None when unknown.
    labels: label names by class id, or None.
    is_regression: a one-output classifier that scores a number.
    extra: settings for serving, e.g. `{"sentence_pair": True}`.
    model_config: the model's Keras config without `config` and `dtype`.
  """

  kind: str
  config: BertConfig
  vocab_file: str | None = None
  do_lower_case: bool | None = None
  max_seq_length: int | None = None
  labels: tuple[str, ...] | None = None
  is_regression: bool = False
  extra: dict = dataclasses.field(default_factory=dict)
  model_config: dict = dataclasses.field(default_factory=dict)

  def manifest(self):
    """The content of `model.json`."""
    return {"kind": self.kind, "model_config": self.model_config,
            "do_lower_case": self.do_lower_case, "max_seq_length": self.max_seq_length,
            "labels": None if self.labels is None else list(self.labels),
            "is_regression": self.is_regression, "extra": dict(self.extra)}

  def build_model(self, dtype=None, kernels=None):
    """A new model of this kind and config (fresh weights), under `dtype` or the global policy,
    on `kernels` (`official_bert.ops.CHOICES`) or those of `model_config`."""
    overrides = {} if kernels is None else {"kernels": kernels}
    return registry.model_class(self.kind).from_config(
        {**self.model_config, "config": self.config.to_dict(), "dtype": dtype, **overrides})


def is_model_dir(path):
  """Whether `path` is a complete model folder (has its `model.json`)."""
  return tf.io.gfile.exists(os.path.join(os.fspath(path), MANIFEST_NAME))


def model_info(model, **fields):
  """The `ModelInfo` of an in-memory model (as `save_model_dir` would write it).

  Args:
    model: an instance of a registered model class.
    **fields: the `ModelInfo` fields after `config` (`do_lower_case`, `labels`, ...).
  """
  model_config = {name: value for name, value in model.get_config().items()
                  if name not in _NOT_IN_MODEL_CONFIG}
  return ModelInfo(kind=registry.kind_of(model), config=model.config, model_config=model_config,
                   **fields)


def _check_fields(model, vocab_file, labels, is_regression):
  num_classes = getattr(model, "num_classes", None)
  if labels is not None and len(labels) != num_classes:
    raise ValueError(f"{len(labels)} labels given for a {type(model).__name__} with "
                     f"{num_classes} classes.")
  if is_regression and num_classes != 1:
    raise ValueError(f"is_regression needs a model with one output (num_classes=1), got a "
                     f"{type(model).__name__} with num_classes={num_classes}.")
  if num_classes == 1 and not is_regression:
    raise ValueError(f"A {type(model).__name__} with one output scores a number: pass "
                     "is_regression=True (a classifier needs num_classes >= 2).")
  if vocab_file is not None:
    size = len(load_vocab(vocab_file))
    if size > model.config.vocab_size:
      raise ValueError(f"{vocab_file} has {size} tokens but the model's vocab_size is "
                       f"{model.config.vocab_size}: it is not the vocabulary of this model.")


def _is_local(path):
  return "://" not in path


def save_model_dir(model, output_dir, *, vocab_file=None, do_lower_case=None, max_seq_length=None,
                   labels=None, is_regression=False, extra=None, original_config_names=False):
  """Writes the model folder of `model` (see the module docstring for its files).

  The files are staged inside `output_dir` and moved into place with `model.json` last
  (`file_io.write_folder`): an interrupted save leaves the previous model folder as it was.

  Args:
    model: any registered model: a `BertEncoder`, `BertPretrainer`, `BertClassifier`,
      `BertSpanLabeler`, `BertMultipleChoice` or `BertTokenClassifier`; its kind is its class's.
    output_dir: the folder; created if needed.
    vocab_file: the `vocab.txt` the model was trained with; copied in.
    do_lower_case: whether the text was lower-cased (None: unknown).
    max_seq_length: the sequence length of training (None: unknown).
    labels: label names in class-id order.
    is_regression: the model is a one-output `BertClassifier` that scores a number.
    extra: JSON-serialisable settings for serving (see the module docstring).
    original_config_names: write `bert_config.json` with the original code's activation names
      (`gelu` for `gelu_tanh`), for a folder that also holds an original TF1 checkpoint; by
      default the canonical names (`gelu_tanh`, `gelu_erf`). Both read back as the same function.

  Returns:
    `output_dir`.
  """
  vocab_file = None if vocab_file is None else os.fspath(vocab_file)
  _check_fields(model, vocab_file, labels, is_regression)
  info = model_info(
      model, do_lower_case=None if do_lower_case is None else bool(do_lower_case),
      max_seq_length=None if max_seq_length is None else int(max_seq_length),
      labels=None if labels is None else tuple(str(label) for label in labels),
      is_regression=bool(is_regression), extra=dict(extra or {}))
  manifest = json.dumps(info.manifest(), indent=2, sort_keys=True) + "\n"

  def fill(staging):
    weights_file = os.path.join(staging, WEIGHTS_NAME)
    if _is_local(weights_file):
      model.save_weights(weights_file)
    else:  # Keras writes `.weights.h5` files to local paths only.
      with tempfile.TemporaryDirectory() as local:
        model.save_weights(os.path.join(local, WEIGHTS_NAME))
        tf.io.gfile.copy(os.path.join(local, WEIGHTS_NAME), weights_file)
    model.config.to_json_file(os.path.join(staging, CONFIG_NAME), original_config_names)
    if vocab_file is not None:
      tf.io.gfile.copy(vocab_file, os.path.join(staging, VOCAB_NAME))
    file_io.write_text(os.path.join(staging, MANIFEST_NAME), manifest)

  output_dir = os.fspath(output_dir)
  file_io.write_folder(output_dir, fill, last=MANIFEST_NAME)
  logging.info("Saved the %s model (%s) to %s.", info.kind, type(model).__name__, output_dir)
  return output_dir


def _field(values, name, kinds, path, required=True):
  value = values.get(name)
  if value is None and not required:
    return None
  if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
    raise ValueError(f"{path}: field {name!r} must be {' or '.join(k.__name__ for k in kinds)}, "
                     f"got {value!r}.")
  return value


def read_model_info(model_dir):
  """Reads and checks the manifest of a model folder.

  Args:
    model_dir: a folder written by `save_model_dir`.

  Returns:
    Its `ModelInfo`.

  Raises:
    FileNotFoundError: the folder has no `model.json`.
    ValueError: the manifest, or a field of it, is malformed (the message names file and field).
  """
  model_dir = os.fspath(model_dir)
  path = os.path.join(model_dir, MANIFEST_NAME)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{model_dir} has no {MANIFEST_NAME}: it is no (complete) model "
                            "folder.")
  values = file_io.read_json_object(path)
  kind = _field(values, "kind", (str,), path)
  if kind not in registry.kinds():
    raise ValueError(f"{path}: field 'kind' must be one of {', '.join(registry.kinds())}, got "
                     f"{kind!r}.")
  labels = _field(values, "labels", (list,), path, required=False)
  vocab_file = os.path.join(model_dir, VOCAB_NAME)
  return ModelInfo(
      kind=kind,
      config=BertConfig.from_json_file(os.path.join(model_dir, CONFIG_NAME)),
      vocab_file=vocab_file if tf.io.gfile.exists(vocab_file) else None,
      do_lower_case=_field(values, "do_lower_case", (bool,), path, required=False),
      max_seq_length=_field(values, "max_seq_length", (int,), path, required=False),
      labels=None if labels is None else tuple(str(label) for label in labels),
      is_regression=bool(_field(values, "is_regression", (bool,), path, required=False)),
      extra=_field(values, "extra", (dict,), path, required=False) or {},
      model_config=_field(values, "model_config", (dict,), path))


def load_model_dir(model_dir, dtype=None):
  """Rebuilds the model of a model folder and loads its weights.

  Args:
    model_dir: a folder written by `save_model_dir`.
    dtype: the dtype policy to build the model under; the global policy by default.

  Returns:
    `(model, info)`: the model with the folder's weights and its `ModelInfo`.
  """
  model_dir = os.fspath(model_dir)
  info = read_model_info(model_dir)
  weights_file = os.path.join(model_dir, WEIGHTS_NAME)
  if not tf.io.gfile.exists(weights_file):
    raise FileNotFoundError(f"{model_dir} has a {MANIFEST_NAME} but no {WEIGHTS_NAME}.")
  model = info.build_model(dtype)
  if _is_local(weights_file):
    _load_weights(model, weights_file, weights_file, info)
  else:  # Keras reads `.weights.h5` files from local paths only.
    with tempfile.TemporaryDirectory() as local:
      tf.io.gfile.copy(weights_file, os.path.join(local, WEIGHTS_NAME))
      _load_weights(model, os.path.join(local, WEIGHTS_NAME), weights_file, info)
  logging.info("Loaded the %s model of %s.", info.kind, model_dir)
  return model, info


def _load_weights(model, local_file, weights_file, info):
  """`model.load_weights`, with a damaged file or one of another model named as the user's fault.

  h5py raises `OSError` for a truncated or corrupt file; Keras raises `ValueError` when the file's
  variables do not fit the model that `model.json` describes (another `num_classes`, say).
  """
  try:
    model.load_weights(local_file)
  except OSError as error:
    raise UserError(f"{weights_file}: cannot be read as Keras weights ({_first_line(error)}); "
                    "the file is damaged or truncated: copy or save the model folder again."
                    ) from error
  except ValueError as error:
    raise UserError(f"{weights_file}: does not fit the {info.kind} model that {MANIFEST_NAME} "
                    f"describes (model_config {json.dumps(info.model_config, sort_keys=True)}): "
                    f"{_first_line(error)} Was {MANIFEST_NAME} "
                    "edited, or the weights copied from another folder?") from error


def _first_line(error, max_chars=300):
  """The start of an error message on one line (Keras' run over several)."""
  text = " ".join(str(error).split()) or type(error).__name__
  return text if len(text) <= max_chars else text[:max_chars] + " ..."
