"""The few kernels of the training step that have a backend-specific form, chosen in one place.

Each kernel exists once per backend, under the same name and as the same mathematical function:

* `stock` (`ops/stock.py`): the plain TensorFlow / Keras forms (an einsum, `tf.nn` dropout and
  cross-entropy, automatic differentiation, `tf.linalg.global_norm`, Keras' GELU), what a GPU or
  TPU compiler is tuned for;
* `cpu_xla` (`ops/cpu_xla.py`): forms shaped for XLA's CPU backend (a hashed dropout fused into
  the step, one-pass cross-entropy and tied-projection gradients, a row-wise gradient norm);
* `cpu_onednn` (`ops/cpu_onednn.py`): forms that TensorFlow's graph optimizer fuses into oneDNN
  kernels on CPUs without XLA (a 2-D product, bias and activation as one kernel; in inference,
  one-pass layer norms and attention on batched products in the inputs' dtype), the fast path
  for bfloat16 on CPUs with AMX.

The backend is process-wide: `EngineConfig.setup()` sets it (`EngineConfig.kernels`, the
`--kernels` flag) before any model is built; `auto` is `stock` on GPUs and TPUs and, when the
strategy's replicas are CPUs, `cpu_xla` with XLA and `cpu_onednn` without it
(`official_bert.training.accelerators` decides both). Layers read it when they are constructed
and keep their choice (it is not part of their config, so a model saved on one backend loads on
another); functions such as the losses read it when they are traced. Before any
`set_kernel_backend`, the backend is that of `auto` for the visible devices.

Example:

>>> with use_kernels("stock"):
...   kernels().__name__
'official_bert.ops.stock'
"""

import contextlib

import tensorflow as tf

from official_bert.ops import cpu_onednn, cpu_xla, stock

BACKENDS = {"stock": stock, "cpu_xla": cpu_xla, "cpu_onednn": cpu_onednn}
# What each backend's module defines (`stock.py` gives their contracts).
KERNELS = ("dropout", "sparse_softmax_cross_entropy", "project_onto_table", "dense", "gelu",
           "global_norm", "layer_norm", "dropout_add_layer_norm", "attention")
CHOICES = ("auto", *BACKENDS)

_backend = None


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


def set_kernel_backend(name):
  """Selects the kernels of layers constructed and functions traced from now on.

  Args:
    name: `stock` or `cpu_xla`.
  """
  global _backend
  if name not in BACKENDS:
    raise ValueError(f"kernel backend must be one of {', '.join(BACKENDS)}, got {name!r}.")
  _backend = name


def kernel_backend():
  """The current backend's name; before any `set_kernel_backend`, `auto`'s for this machine."""
  if _backend is not None:
    return _backend
  # Physical devices can be listed before the runtime starts, unlike logical ones.
  accelerated = tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU")
  return resolve_backend("auto", "GPU" if accelerated else "CPU")


def kernels(name=None):
  """The module of backend `name` (the current backend by default), defining the `KERNELS`."""
  return BACKENDS[name or kernel_backend()]


def backends_of(model):
  """The names of the backends the layers of `model` (a Keras model) were constructed on."""
  return {name for layer in model._flatten_layers()  # pylint: disable=protected-access
          for name, module in BACKENDS.items() if getattr(layer, "_kernels", None) is module}


@contextlib.contextmanager
def use_kernels(name):
  """Selects backend `name` inside a `with` block, then restores the previous choice."""
  global _backend
  previous = _backend
  set_kernel_backend(name)
  try:
    yield
  finally:
    _backend = previous
