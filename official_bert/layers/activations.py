"""The feed-forward activations that `hidden_act` names in BERT configuration files."""

import keras

from official_bert import ops

# The exact GELU is a kernel of the backend (`ops.kernels().gelu`), looked up when asked for.
_GELU_EXACT = "gelu_exact"


def _gelu_tanh(x):
  return keras.activations.gelu(x, approximate=True)


# `gelu` is the exact erf form, as in Hugging Face and Model Garden configs; the original TF1 code
# used the tanh approximation under the same name, which differs by less than 1e-3 per unit.
_ACTIVATIONS = {
    "gelu": _GELU_EXACT,
    "gelu_exact": _GELU_EXACT,
    "gelu_new": _gelu_tanh,
    "gelu_tanh": _gelu_tanh,
    "gelu_approximate": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "swish": keras.activations.silu,
    "tanh": keras.activations.tanh,
}


def get_activation(name):
  """Returns the activation function called `name` in a BERT config.

  The exact GELU is the current kernel backend's form (see `official_bert.ops`); call this when
  the layer that uses the activation is constructed.

  Args:
    name: one of `gelu` (exact), `gelu_new` / `gelu_tanh` / `gelu_approximate` (tanh approximation),
      `relu`, `silu` / `swish`, `tanh`.
  """
  try:
    activation = _ACTIVATIONS[name.lower()]
  except KeyError:
    raise ValueError(f"Unknown hidden_act {name!r}; choose one of "
                     f"{', '.join(sorted(_ACTIVATIONS))}.") from None
  return ops.kernels().gelu if activation == _GELU_EXACT else activation
