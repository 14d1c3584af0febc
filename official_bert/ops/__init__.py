"""The few kernels that have a backend-specific form, chosen per model.

Each kernel exists once per backend, under the same name and as the same mathematical function:

* `stock` (`ops/stock.py`): plain `keras.ops` forms (Keras' dropout, cross-entropy and GELU,
  automatic differentiation), what a GPU or TPU compiler is tuned for, and the only kernels on
  the JAX and PyTorch backends;
* `cpu_xla` (`ops/cpu_xla.py`): forms shaped for XLA's CPU backend (a hashed dropout fused into
  the step, one-pass cross-entropy and tied-projection gradients);
* `cpu_onednn` (`ops/cpu_onednn.py`): forms that TensorFlow's graph optimizer fuses into oneDNN
  kernels on CPUs without XLA (a 2-D product, bias and activation as one kernel; in inference,
  one-pass layer norms and attention on batched products in the inputs' dtype), the fast path
  for bfloat16 on CPUs with AMX.

The two CPU forms are TensorFlow's (`TENSORFLOW_ONLY`), imported when first chosen.

The choice belongs to a model: `BertEncoder`, the task models and the layers with such kernels
take a `kernels` argument, one of `CHOICES`, and keep the backend it names (`kernels(choice)`),
so that two models in one process can differ. `auto`, the default, is `stock` when a GPU or TPU
is visible or Keras runs on JAX or PyTorch, and `cpu_xla` otherwise. Asking for a TensorFlow form
on another backend is the user's error (`KernelsUnavailableError`); a saved config that names one
loads with `stock` (`loadable`). The engine decides per device, dtype and XLA
(`RuntimeConfig.accelerator_choice(strategy).kernels`: `cpu_onednn` for a CPU step without XLA)
and the tasks pass that to the models they build. Functions of tensors that have a kernel, such
as the pre-training losses, take the same argument.

Example:

>>> kernels("stock").__name__
'official_bert.ops.stock'
>>> choice_name(kernels("cpu_xla"))
'cpu_xla'
"""

import importlib
import types

from absl import logging
import keras

from official_bert.common.errors import UserError
from official_bert.ops import stock

BACKENDS = ("stock", "cpu_xla", "cpu_onednn")
# The forms written in TensorFlow, chosen on the TensorFlow backend only.
TENSORFLOW_ONLY = ("cpu_xla", "cpu_onednn")
# What each backend's module defines (`stock.py` gives their contracts).
KERNELS = ("dropout", "sparse_softmax_cross_entropy", "project_onto_table", "dense", "gelu",
           "global_norm", "layer_norm", "dropout_add_layer_norm", "attention",
           "project_dropout_add_layer_norm")
CHOICES = ("auto", *BACKENDS)


def resolve_backend(name, device_type, xla=True):
  """The backend that `name` selects for replicas of `device_type`.

  Args:
    name: `auto`, `stock`, `cpu_xla` or `cpu_onednn`.
    device_type: `CPU`, `GPU` or `TPU`, the type of the devices the steps run on.
    xla: whether the steps are compiled with XLA.

  Returns:
    A backend name: `auto` gives, on CPUs, `cpu_xla` with XLA and `cpu_onednn` without it (each
    was measured faster only on its own CPU path), and `stock` on GPUs and TPUs.
  """
  if name not in CHOICES:
    raise ValueError(f"kernels must be one of {', '.join(CHOICES)}, got {name!r}.")
  if name != "auto":
    return name
  if device_type.upper() != "CPU":
    return "stock"
  return "cpu_xla" if xla else "cpu_onednn"


class KernelsUnavailableError(UserError):
  """Kernels written in TensorFlow asked for on another Keras backend."""


def _on_tensorflow():
  return keras.backend.backend() == "tensorflow"


# The backends' modules by name, imported once. A loss looks its backend up while a step is
# traced; a dictionary lookup keeps `importlib` (which AutoGraph cannot convert, and warns of) out
# of the traced code.
_MODULES = {"stock": stock}


def _module(name):
  if name not in _MODULES:
    _MODULES[name] = importlib.import_module(f"official_bert.ops.{name}")
  return _MODULES[name]


def kernels(choice="auto", argument="kernels"):
  """The module of the backend that `choice` names, defining the `KERNELS`.

  Args:
    choice: one of `CHOICES`, or a backend's module (returned as it is). `auto` is `stock` when
      a GPU or TPU is visible or Keras runs on JAX or PyTorch, and `cpu_xla` otherwise.
    argument: how the caller names the choice, for the error (`kernels`, `--kernels`).

  Raises:
    ValueError: an unknown name.
    KernelsUnavailableError: a TensorFlow form (`TENSORFLOW_ONLY`) on another backend.
  """
  if isinstance(choice, types.ModuleType):
    return choice
  if choice == "auto":
    if not _on_tensorflow():
      return stock
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    # Physical devices can be listed before the runtime starts, unlike logical ones.
    accelerated = (tf.config.list_physical_devices("GPU")
                   or tf.config.list_physical_devices("TPU"))
    return _module(resolve_backend("auto", "GPU" if accelerated else "CPU"))
  name = resolve_backend(choice, "CPU")
  if name in TENSORFLOW_ONLY and not _on_tensorflow():
    raise KernelsUnavailableError(
        f"{argument}={name}: these kernels are TensorFlow's, and Keras runs on "
        f"{keras.backend.backend()} (KERAS_BACKEND): use {argument}=auto or stock.")
  return _module(name)


def loadable(choice, what):
  """`choice` from a saved config, or `stock` where this backend lacks it (said in one line).

  Args:
    choice: the `kernels` of a saved config; None (a config written before the field) is
      `auto`.
    what: what is being loaded, for the line (a class name).
  """
  choice = "auto" if choice is None else choice
  if choice in TENSORFLOW_ONLY and not _on_tensorflow():
    logging.warning("%s was saved with the %s kernels, which are TensorFlow's; Keras runs on %s "
                    "here, so it loads with the stock ones (the same weights).", what, choice,
                    keras.backend.backend())
    return "stock"
  return choice


def choice_name(choice):
  """`choice` as a name of `CHOICES`, for a config: a name as it is, a module by its backend."""
  if isinstance(choice, str):
    return choice
  return choice.__name__.rsplit(".", 1)[-1]


def backends_of(model):
  """The names of the backends the layers of `model` (a Keras model) were built on."""
  return {choice_name(layer._kernels)  # pylint: disable=protected-access
          for layer in model._flatten_layers()  # pylint: disable=protected-access
          if isinstance(getattr(layer, "_kernels", None), types.ModuleType)}
