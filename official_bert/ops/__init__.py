"""The few kernels that have a backend-specific form, chosen per model.

Each kernel exists once per backend, under the same name and as the same mathematical function:

* `stock` (`ops/stock.py`): the plain TensorFlow / Keras forms (an einsum, `tf.nn` dropout and
  cross-entropy, automatic differentiation, `tf.linalg.global_norm`, Keras' GELU), what a GPU or
  TPU compiler is tuned for;
* `cpu_xla` (`ops/cpu_xla.py`): forms shaped for XLA's CPU backend (a hashed dropout fused into
  the step, one-pass cross-entropy and tied-projection gradients);
* `cpu_onednn` (`ops/cpu_onednn.py`): forms that TensorFlow's graph optimizer fuses into oneDNN
  kernels on CPUs without XLA (a 2-D product, bias and activation as one kernel; in inference,
  one-pass layer norms and attention on batched products in the inputs' dtype), the fast path
  for bfloat16 on CPUs with AMX.

The choice belongs to a model: `BertEncoder`, the task models and the layers with such kernels
take a `kernels` argument, one of `CHOICES`, and keep the backend it names (`kernels(choice)`),
so that two models in one process can differ. `auto`, the default, is `stock` when a GPU or TPU
is visible and `cpu_xla` otherwise. The engine decides per device, dtype and XLA
(`EngineConfig.accelerator_choice(strategy).kernels`: `cpu_onednn` for a CPU step without XLA)
and the tasks pass that to the models they build. Functions of tensors that have a kernel, such
as the pre-training losses, take the same argument.

Example:

>>> kernels("stock").__name__
'official_bert.ops.stock'
>>> choice_name(kernels("cpu_xla"))
'cpu_xla'
"""

import tensorflow as tf

from official_bert.ops import cpu_onednn, cpu_xla, stock

BACKENDS = {"stock": stock, "cpu_xla": cpu_xla, "cpu_onednn": cpu_onednn}
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


def kernels(choice="auto"):
  """The module of the backend that `choice` names, defining the `KERNELS`.

  Args:
    choice: one of `CHOICES`, or a backend's module (returned as it is). `auto` is `stock` when
      a GPU or TPU is visible and `cpu_xla` otherwise.

  Raises:
    ValueError: an unknown name.
  """
  if choice in BACKENDS.values():
    return choice
  if choice == "auto":
    # Physical devices can be listed before the runtime starts, unlike logical ones.
    accelerated = (tf.config.list_physical_devices("GPU")
                   or tf.config.list_physical_devices("TPU"))
    return BACKENDS[resolve_backend("auto", "GPU" if accelerated else "CPU")]
  return BACKENDS[resolve_backend(choice, "CPU")]


def choice_name(choice):
  """`choice` as a name of `CHOICES`, for a config: a name as it is, a module by its backend."""
  if isinstance(choice, str):
    return choice
  return next(name for name, module in BACKENDS.items() if module is choice)


def backends_of(model):
  """The names of the backends the layers of `model` (a Keras model) were built on."""
  return {name for layer in model._flatten_layers()  # pylint: disable=protected-access
          for name, module in BACKENDS.items() if getattr(layer, "_kernels", None) is module}
