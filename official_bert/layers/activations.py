"""The feed-forward activations that `hidden_act` names in BERT configuration files.

Two functions go by the name GELU. The original google-research/bert computes the tanh
approximation, `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`, and calls it `gelu`;
Hugging Face and Model Garden call the exact `0.5 * x * (1 + erf(x / sqrt(2)))` `gelu`. They differ
by up to about 5e-4 per unit, so a checkpoint runs the network it was trained with only under its
own form. This package names the two without ambiguity, `gelu_tanh` and `gelu_erf`, and reads a
bare `gelu` as the original did (tanh): `BertConfig` and every `bert_config.json` follow the
original, and only the Hugging Face reader (`checkpoints/huggingface.py`) translates its own names.
"""

import keras

from official_bert import ops
from official_bert.ops.stock import gelu_tanh

GELU_TANH = "gelu_tanh"
GELU_ERF = "gelu_erf"

# The names the original's `modeling.get_activation` knows.
ORIGINAL_NAMES = ("gelu", "relu", "tanh", "linear")

# The exact GELU is a kernel of each backend (`ops.kernels(choice).gelu`), looked up when asked
# for; the tanh form is one function everywhere (`gelu_tanh`, defined beside the kernels).
_FUNCTIONS = {
    GELU_TANH: gelu_tanh,
    GELU_ERF: None,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}
# Other spellings of the same functions. `gelu` is the original's name for the tanh form; the
# rest are the names of Hugging Face (`gelu_new`, `gelu_pytorch_tanh`) and Keras (`approximate`).
_ALIASES = {
    "gelu": GELU_TANH,
    "gelu_new": GELU_TANH,
    "gelu_pytorch_tanh": GELU_TANH,
    "gelu_approximate": GELU_TANH,
    "gelu_exact": GELU_ERF,
    "swish": "silu",
}


def canonical_activation(name):
  """Returns the one name of the activation `name` stands for (`gelu` -> `gelu_tanh`).

  Args:
    name: an activation name of a `bert_config.json`: `gelu_tanh`, `gelu_erf`, `relu`, `silu`,
      `tanh`, `linear`, or one of their other spellings: `gelu` (the original's name of the
      tanh form), `gelu_new`, `gelu_pytorch_tanh`, `gelu_approximate`, `gelu_exact`, `swish`.

  Raises:
    ValueError: an unknown name.

  >>> canonical_activation("gelu"), canonical_activation("GELU_ERF")
  ('gelu_tanh', 'gelu_erf')
  """
  if not isinstance(name, str):
    raise ValueError(f"An activation name must be a string, got {name!r}.")
  key = name.lower()
  key = _ALIASES.get(key, key)
  if key not in _FUNCTIONS:
    raise ValueError(f"Unknown hidden_act {name!r}; choose one of "
                     f"{', '.join(sorted(set(_FUNCTIONS) | set(_ALIASES)))}.")
  return key


def original_activation_name(name):
  """The name the original google-research/bert code reads for an activation.

  The original knows `ORIGINAL_NAMES`: `gelu` (its tanh form), `relu`, `tanh` and `linear`. The
  exact GELU and SiLU have no name there, so their canonical names are returned, which the
  original refuses rather than running another function.

  Args:
    name: any name `canonical_activation` accepts.
  """
  canonical = canonical_activation(name)
  return "gelu" if canonical == GELU_TANH else canonical


def get_activation(name, kernels="auto"):
  """Returns the activation function called `name` in a BERT config.

  Args:
    name: any name `canonical_activation` accepts; `gelu` is the tanh form, as in the original.
    kernels: the kernels (`official_bert.ops.CHOICES`, or a backend's module) whose form of the
      exact GELU `gelu_erf` is.

  >>> get_activation("gelu") is gelu_tanh
  True
  """
  canonical = canonical_activation(name)
  return ops.kernels(kernels).gelu if canonical == GELU_ERF else _FUNCTIONS[canonical]
