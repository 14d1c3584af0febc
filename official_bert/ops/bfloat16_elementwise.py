"""The element-wise work of a bfloat16 training step on CPUs as one pass over memory each way:
TensorFlow kernels of this package (`bfloat16_elementwise.cc`), built by `bert-build-kernels`
(`ops.native`).

Why: around its products, a bfloat16 BERT step spends its time in element-wise work that is
bound by memory: the feed-forward bias and GELU, the attention softmax with its scale, padding
mask and dropout, and each sublayer's end (bias, dropout, residual sum, layer norm). XLA's CPU
backend, which compiled these as small programs (`cpu_onednn._compiled_in_float32`), writes each
output in a loop of its own and does not fuse a reduction into its consumers, so each program
passes over its rows several times: with AMX's fast products they take a large share of a
BERT-Base training step (`docs/design/cpu-kernels.md`). These kernels compute each row in float32
in the L1 cache and round the results to bfloat16 once, and their backward passes recompute the
forward pass from its inputs, as the compiled programs do. Dropout uses `cpu_xla.dropout`'s
hashed mask, bit for bit, so a step drops the same elements on either path.

When: `cpu_onednn`'s bfloat16 training forms take these kernels where `usable()` (they are
built and load, and the step is not being compiled whole by XLA), and their compiled XLA programs
otherwise. Set `OFFICIAL_BERT_FUSED_ELEMENTWISE=0` to take the programs.
Neither is used in inference or in SavedModels, whose graphs hold TensorFlow's own ops only.
`tests/ops/test_ops_bfloat16_elementwise.py` checks each kernel against its XLA program.

Example (`usable()` is False until `bert-build-kernels` has built them):

>>> usable() in (True, False)
True
"""

import os

import tensorflow as tf

# The one way to ask whether ops are being traced into an XLA program (`jit_compile=True`).
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

from official_bert.ops import native

SOURCE = "bfloat16_elementwise.cc"
ENABLE_VARIABLE = "OFFICIAL_BERT_FUSED_ELEMENTWISE"


def kernels():
  """The loaded kernels' module, or None where they are turned off
  (`OFFICIAL_BERT_FUSED_ELEMENTWISE` is `0`), or are not built for this CPU or do not load
  (`native.load`, which logs why in one line)."""
  if os.environ.get(ENABLE_VARIABLE, "1") == "0":
    return None
  return native.load(SOURCE)


def usable():
  """Whether ops traced here can run on the kernels: they load, and the trace is not part of an
  XLA program (they have no XLA form: a step compiled whole with `--kernels=cpu_onednn` keeps
  the compiled programs, which XLA inlines)."""
  if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
    return False
  return kernels() is not None


def _module():
  module = kernels()
  if module is None:
    raise RuntimeError("The fused bfloat16 element-wise kernels are unavailable (not built: "
                       "bert-build-kernels; or turned off); see the log.")
  return module


def bias_gelu(inputs, bias, approximate):
  """`gelu(inputs + bias)` of bfloat16 tensors, one pass each way, float32 inside.

  Args:
    inputs: bfloat16 `[..., width]`.
    bias: bfloat16 `[width]`.
    approximate: True for the tanh form (the original BERT's `gelu`), False for the erf form.

  Returns:
    bfloat16 of the shape of `inputs`, with a gradient for both arguments (the bias's summed
    over the rows in float32).
  """
  module = _module()

  @tf.custom_gradient
  def fused(x, b):
    def gradient(upstream):
      return module.bias_gelu_bfloat16_grad(tf.cast(upstream, tf.bfloat16), x, b,
                                            approximate=approximate)
    return module.bias_gelu_bfloat16(x, b, approximate=approximate), gradient

  return fused(inputs, bias)


def bias_add(inputs, bias):
  """`inputs + bias` of bfloat16 tensors: TensorFlow's `BiasAdd` forward (which oneDNN fuses into
  a product before it), and backward the upstream gradient passed through whole and the bias's
  summed over the rows in float32 in one pass.

  Args:
    inputs: bfloat16 `[..., width]`.
    bias: bfloat16 `[width]`.

  Returns:
    bfloat16 of the shape of `inputs`, with a gradient for both arguments.
  """
  module = _module()

  @tf.custom_gradient
  def fused(x, b):
    def gradient(upstream):
      upstream = tf.cast(upstream, tf.bfloat16)
      return upstream, module.bias_grad_bfloat16(upstream)
    return tf.nn.bias_add(x, b), gradient

  return fused(inputs, bias)


def dropout_add_layer_norm(inputs, bias, residual, gamma, beta, seed, epsilon, rate):
  """`layer_norm(residual + dropout(inputs + bias))` of bfloat16 tensors, one pass each way.

  Args:
    inputs, residual: bfloat16 `[..., width]`.
    bias: bfloat16 `[width]`.
    gamma, beta: float32 `[width]`.
    seed: int32 `[2]`, the dropout's (`cpu_xla.dropout`'s mask).
    epsilon: added to the variance.
    rate: the dropout rate, a Python float in `[0, 1)`.

  Returns:
    bfloat16 of the shape of `inputs`, with gradients for all but the seed.
  """
  module = _module()
  attrs = {"epsilon": float(epsilon), "rate": float(rate)}

  @tf.custom_gradient
  def fused(x, b, r, g, bt):
    def gradient(upstream):
      return module.dropout_add_layer_norm_bfloat16_grad(tf.cast(upstream, tf.bfloat16), x, b, r,
                                                         g, bt, seed, **attrs)
    return module.dropout_add_layer_norm_bfloat16(x, b, r, g, bt, seed, **attrs), gradient

  return fused(inputs, bias, residual, gamma, beta)


def masked_softmax(scores, padding, seed, scale, rate):
  """`dropout(softmax(scores * scale + padding))` of bfloat16 attention scores, one pass each way.

  Args:
    scores: bfloat16 `[batch, heads, queries, keys]`.
    padding: float32 `[batch, keys]`: 0, or `stock.MASKED_SCORE` at padding keys.
    seed: int32 `[2]`, the dropout's (`cpu_xla.dropout`'s mask over `scores`).
    scale: the scores' factor, `1 / sqrt(head_size)`.
    rate: the dropout rate, a Python float in `[0, 1)`.

  Returns:
    bfloat16 probabilities of the shape of `scores`, with a gradient for `scores`.
  """
  module = _module()
  attrs = {"scale": float(scale), "rate": float(rate)}

  @tf.custom_gradient
  def fused(s):
    def gradient(upstream):
      return module.masked_softmax_dropout_bfloat16_grad(tf.cast(upstream, tf.bfloat16), s,
                                                         padding, seed, **attrs)
    return module.masked_softmax_dropout_bfloat16(s, padding, seed, **attrs), gradient

  return fused(scores)
