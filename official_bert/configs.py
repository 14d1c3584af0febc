"""`BertConfig`: the hyper-parameters of a BERT encoder, as in the original `bert_config.json`."""

import dataclasses
import json
import math
import os

from absl import logging

from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.layers.activations import canonical_activation, original_activation_name

# The fields of the original `bert_config.json`: a file must give every one, so that a missing
# line never turns silently into BERT-Base's value.
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_act", "hidden_dropout_prob",
                   "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                   "initializer_range")
# Keys of released configuration files that shape nothing here: the multilingual release's
# pooler settings and text direction (ignored with a warning), and the casing that
# `tokenization.validate_case_matches_checkpoint` reads (ignored silently).
IGNORED_KEYS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")
_READ_ELSEWHERE = ("do_lower_case",)
_INT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "intermediate_size", "max_position_embeddings", "type_vocab_size")
_FLOAT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Shape and regularisation of a BERT encoder.

  The field names and meanings are those of the original `bert_config.json`, so the configuration
  files of every released BERT checkpoint load unchanged.

  Args:
    vocab_size: number of WordPiece tokens.
    hidden_size: width of every transformer layer.
    num_hidden_layers: number of transformer layers.
    num_attention_heads: attention heads per layer; must divide `hidden_size`.
    intermediate_size: width of the feed-forward layer inside each transformer layer.
    hidden_act: feed-forward activation: `gelu_tanh` (the original's GELU, the tanh
      approximation), `gelu_erf` (the exact GELU of Hugging Face and Model Garden), `relu`,
      `silu`, `tanh` or `linear`. A bare `gelu` means what it means in the original
      `bert_config.json`, the tanh form; other spellings are accepted too (`gelu_new`,
      `gelu_exact`, `swish`, see `layers.activations`). The field holds the canonical name.
    hidden_dropout_prob: dropout on embeddings, attention output and feed-forward output.
    attention_probs_dropout_prob: dropout on the attention probabilities.
    max_position_embeddings: longest sequence the position table covers.
    type_vocab_size: number of segment (token type) ids.
    initializer_range: standard deviation of the truncated-normal weight initializer.

  Example:

  >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=64)
  >>> config.head_size
  16
  """

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu_tanh"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02

  def __post_init__(self):
    for name in _INT_FIELDS:
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}.")
    for name in _FLOAT_FIELDS:
      value = getattr(self, name)
      # `json` reads NaN and Infinity, and NaN passes every comparison: check finiteness first.
      if (isinstance(value, bool) or not isinstance(value, (int, float))
          or not math.isfinite(value) or value < 0):
        raise ValueError(f"BertConfig.{name} must be a finite non-negative number, got "
                         f"{value!r}.")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      if getattr(self, name) >= 1:
        raise ValueError(f"BertConfig.{name} must be below 1, got {getattr(self, name)!r}.")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(f"BertConfig.hidden_size ({self.hidden_size}) must be a multiple of "
                       f"num_attention_heads ({self.num_attention_heads}).")
    # One name per function, so that equal configs build equal networks and a written config
    # says which GELU it means.
    try:
      object.__setattr__(self, "hidden_act", canonical_activation(self.hidden_act))
    except ValueError as error:
      raise ValueError(f"BertConfig.hidden_act: {error}") from None

  @property
  def head_size(self):
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, values, source="the configuration", allow_unknown_keys=False):
    """Builds a config from a dict such as a parsed `bert_config.json`.

    Every field of the original file must be there (`REQUIRED_FIELDS`). The released files' extra
    keys (`IGNORED_KEYS`) are ignored with a warning; any other key is an error unless
    `allow_unknown_keys`, since it usually means a misspelt field or another model's config.

    Args:
      values: mapping of field names to values.
      source: what to call the mapping in error messages (a file name, say).
      allow_unknown_keys: ignore (with a warning) keys that are no field of `BertConfig`, as a
        Hugging Face `config.json` has.

    Returns:
      A `BertConfig`.

    Raises:
      UserError: a field is missing, a key unknown, or a value invalid; the message names
        `source` and every such field.
    """
    if not isinstance(values, dict):
      raise UserError(f"{source}: expected a JSON object, got {type(values).__name__}.")
    missing = [name for name in REQUIRED_FIELDS if name not in values]
    if missing:
      raise UserError(f"{source}: the required field(s) {', '.join(missing)} are missing; a "
                      "BERT config gives every one of " + ", ".join(REQUIRED_FIELDS) + ".")
    known = {field.name for field in dataclasses.fields(cls)}
    extra = sorted(key for key in values if key not in known and key not in _READ_ELSEWHERE)
    unknown = [key for key in extra if key not in IGNORED_KEYS]
    if unknown and not allow_unknown_keys:
      raise UserError(f"{source}: unknown field(s) {', '.join(unknown)}; a BERT config has "
                      f"{', '.join(sorted(known))}. Fix the names, or allow unknown keys "
                      "(--allow_unknown_config_keys) to ignore them.")
    if extra:
      logging.warning("%s: ignoring the field(s) %s, which shape nothing in this model.", source,
                      ", ".join(extra))
    try:
      return cls(**{key: value for key, value in values.items() if key in known})
    except ValueError as error:
      raise UserError(f"{source}: {error}") from None

  @classmethod
  def from_json_file(cls, path, allow_unknown_keys=False):
    """Reads a `bert_config.json` (the original format; see `from_dict` for the fields).

    Args:
      path: path of the JSON file.
      allow_unknown_keys: ignore (with a warning) keys that are no field of `BertConfig`.

    Returns:
      A `BertConfig`.
    """
    path = os.fspath(path)
    if not file_io.exists(path):
      raise FileNotFoundError(f"The BERT config file {path} does not exist.")
    values = file_io.read_json_object(path)
    return cls.from_dict(values, source=path, allow_unknown_keys=allow_unknown_keys)

  def to_dict(self, original_names=False):
    """The fields as a dict.

    Args:
      original_names: name the activation as the original google-research/bert code does
        (`gelu` for `gelu_tanh`), for a `bert_config.json` that the original must read.
    """
    values = dataclasses.asdict(self)
    if original_names:
      values["hidden_act"] = original_activation_name(self.hidden_act)
    return values

  def to_json_file(self, path, original_names=False):
    """Writes the config as `bert_config.json` (atomically: a reader never sees half a file).

    Args:
      path: the file.
      original_names: see `to_dict`; by default the activation's canonical name is written, so
        re-reading the file never changes the function.
    """
    file_io.write_text(path, json.dumps(self.to_dict(original_names), indent=2, sort_keys=True)
                       + "\n")


def _small_bert(layers, hidden):
  return BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=hidden // 64, intermediate_size=4 * hidden)


# The released models: BERT-Base and BERT-Large (Devlin et al., 2018) and the 24 small BERTs
# (Turc et al., 2019), all with the uncased 30,522-token vocabulary.
PRESETS = {
    "bert_base": _small_bert(12, 768),
    "bert_large": BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                             num_attention_heads=16, intermediate_size=4096),
    **{f"bert_L{layers}_H{hidden}": _small_bert(layers, hidden)
       for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)},
}
# The names the small-BERT release gave to four of them.
PRESETS.update(bert_tiny=PRESETS["bert_L2_H128"], bert_mini=PRESETS["bert_L4_H256"],
               bert_small=PRESETS["bert_L4_H512"], bert_medium=PRESETS["bert_L8_H512"])


def get_preset(name):
  """Returns the `BertConfig` of a released model, e.g. `bert_base` or `bert_L4_H256`.

  Args:
    name: a key of `PRESETS`.
  """
  if name not in PRESETS:
    raise ValueError(f"Unknown BERT preset {name!r}; choose one of {', '.join(sorted(PRESETS))}.")
  return PRESETS[name]
