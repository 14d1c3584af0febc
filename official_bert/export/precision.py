"""The dtype a SavedModel computes in, and whether XLA compiles it, chosen per dtype.

`float32` serves the trained weights as they are. `bfloat16` stores every weight of the matrix
products and embeddings in bfloat16 in the SavedModel (half the size, and no cast of the weights
on each call) and computes in bfloat16 on the kernels `serving_choice` picks (`cpu_onednn`: layer
norms and softmax with float32 statistics, float32 outputs); on a CPU with AMX (`amx_bf16`)
oneDNN runs its matrix products at several times the float32 rate.

XLA (`jit_compile`) and the kernels are chosen per dtype and CPU from
`benchmarks/serving_throughput.py` (`official_bert.training.accelerators.choose`): off for
bfloat16, since XLA's CPU backend has no AMX kernels while the graph's oneDNN kernels use them
(`docs/performance.md` has what each export serves); off for float32 too on Intel CPUs where
TensorFlow runs its oneDNN kernels by default (`accelerators.onednn_by_default`), whose fused
inference forms (`cpu_onednn`) served faster than XLA there; on for float32 elsewhere, where XLA
served faster than the graph, on TensorFlow's own kernels as on an AMD EPYC's oneDNN ones. The
export is built on the chosen kernels, whatever the kernels the model was trained on. A server is
expected to run on the kind of CPU the export was made on, with TensorFlow's default for it.

Example:

>>> default_jit_compile("bfloat16")
False
"""

import keras

from official_bert import ops
from official_bert.checkpoints import model_info
from official_bert.training import accelerators

SERVING_DTYPES = ("float32", "bfloat16")


def check_dtype(dtype):
  """Raises `ValueError` unless `dtype` is None or one of `SERVING_DTYPES`."""
  if dtype is not None and dtype not in SERVING_DTYPES:
    raise ValueError(f"The serving dtype must be one of {', '.join(SERVING_DTYPES)}, got "
                     f"{dtype!r}.")


def compute_dtype(model, dtype=None):
  """The dtype the export computes in: `dtype`, else the model's own compute dtype."""
  check_dtype(dtype)
  return dtype or keras.backend.standardize_dtype(model.dtype_policy.compute_dtype)


def serving_choice(dtype, jit_compile=None):
  """XLA and the kernels of an export that computes in `dtype`, served on a CPU.

  The engine's one decision (`official_bert.training.accelerators.choose`) for this machine's
  CPU; `jit_compile` True or False overrides its XLA choice.

  Args:
    dtype: the compute dtype, e.g. `compute_dtype(model, dtype)`.
    jit_compile: None for the choice per dtype.
  """
  return accelerators.choose("CPU", dtype, accelerators.cpu_flags(), enable_xla=jit_compile,
                             inference=True, cpu_vendor=accelerators.cpu_vendor())


def default_jit_compile(dtype):
  """Whether an export that computes in `dtype` is compiled with XLA (see the module docstring).

  Args:
    dtype: the compute dtype, e.g. `compute_dtype(model, dtype)`.
  """
  return serving_choice(dtype).enable_xla


def serving_dtype(training_dtype):
  """The export dtype of a model trained under `--dtype=training_dtype`.

  A model trained in bfloat16 is served in bfloat16, one trained in float32 in float32; float16
  (mixed precision on GPUs) exports the model as it is.
  """
  return training_dtype if training_dtype in SERVING_DTYPES else None


def trained_dtype(model):
  """The export dtype of a model as trained: `serving_dtype` of its policy's compute dtype
  (`mixed_bfloat16` -> `bfloat16`)."""
  return serving_dtype(keras.backend.standardize_dtype(model.dtype_policy.compute_dtype))


def with_dtype(model, dtype, kernels=None):
  """`model` with its weights in, and computing in, `dtype` (Keras policy `dtype`).

  Args:
    model: an instance of a registered model class (a task model or a `BertEncoder`).
    dtype: `float32`, `bfloat16`, or None for `model`'s own policy.
    kernels: the kernels (`official_bert.ops.BACKENDS`) the result is built on, or None for
      any.

  Returns:
    `model` when it already has policy `dtype` and was built on `kernels`, else a new model of
    the same kind and config under policy `dtype` (built on `kernels`), with `model`'s weights
    cast to it (layers that compute in float32 whatever the policy, the layer norms, keep
    float32 weights).
  """
  check_dtype(dtype)
  policy = dtype or model.dtype_policy.name
  if policy == model.dtype_policy.name and (kernels is None or ops.backends_of(model) <= {kernels}):
    return model
  copy = model_info(model).build_model(policy, kernels=kernels)
  weights = model.get_weights()
  if len(copy.weights) != len(weights):
    raise ValueError(f"The {policy} copy of {model.name} has {len(copy.weights)} weights, the "
                     f"model {len(weights)}: is the model built?")
  copy.set_weights(weights)  # assigning casts each value to its variable's dtype
  return copy
