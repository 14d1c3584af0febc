"""The feed-forward activations that `hidden_act` names in BERT configuration files."""

import keras
from keras import ops

_SQRT_HALF = 0.7071067811865476


def _gelu_exact(x):
  # The same function as `keras.activations.gelu(approximate=False)`, which TensorFlow writes
  # with `erfc`; XLA's `erf` is a short polynomial where `erfc` needs an exponential, and the
  # feed-forward activation of a BERT step spends a few percent of it there.
  return 0.5 * x * (1.0 + ops.erf(x * _SQRT_HALF))


def _gelu_tanh(x):
  return keras.activations.gelu(x, approximate=True)


# `gelu` is the exact erf form, as in Hugging Face and Model Garden configs; the original TF1 code
# used the tanh approximation under the same name, which differs by less than 1e-3 per unit.
_ACTIVATIONS = {
    "gelu": _gelu_exact,
    "gelu_exact": _gelu_exact,
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

  Args:
    name: one of `gelu` (exact), `gelu_new` / `gelu_tanh` / `gelu_approximate` (tanh approximation),
      `relu`, `silu` / `swish`, `tanh`.
  """
  try:
    return _ACTIVATIONS[name.lower()]
  except KeyError:
    raise ValueError(f"Unknown hidden_act {name!r}; choose one of "
                     f"{', '.join(sorted(_ACTIVATIONS))}.") from None
