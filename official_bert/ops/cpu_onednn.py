"""The kernels of `stock.py` in the forms that TensorFlow's oneDNN CPU kernels run fastest.

Without XLA, a CPU step runs TensorFlow's graph, whose optimizer (grappler's remapper) fuses a
2-D `MatMul`, a `BiasAdd` and an activation (the tanh and erf GELUs, ReLU, tanh) into one oneDNN
kernel. In bfloat16 that kernel's product uses AMX where the CPU has it, and the fused epilogue
spares the element-wise passes that TensorFlow's bfloat16 kernels run slowly (unfused, the
feed-forward GELU alone is a large share of a BERT-Base forward pass). The remapper sees none
of this in the stock forms: Keras writes a 3-D product as a `Tensordot` whose reshape stands
between the product and its bias, and a bias added with `+` keeps the activation apart.
What the remapper cannot fuse in a training step, the element-wise work around the products (the
activation kept apart for its gradient, dropout, layer norm), runs as the package's fused
bfloat16 kernels (`bfloat16_elementwise`, one pass each way) where they load, and otherwise as
small XLA programs: XLA's CPU backend has no bfloat16 products worth using but fuses element-wise
work, where TensorFlow's graph runs each operation as its own pass (slowest in bfloat16). In
inference, layer norm and attention have forms that oneDNN runs as few fused kernels in the
dtype of their inputs (`layer_norm`, `attention`); in bfloat16 training, layer norm and the
attention softmax are computed apart instead, and the cross-entropy over a vocabulary is
compiled apart in any dtype. The other kernels are the stock ones, measured no slower in the
graph (`benchmarks/pretraining_throughput.py --variants=...`); `tests/models/test_bf16.py`
checks these forms against the stock ones, forward and backward.
"""

import math

import keras
import tensorflow as tf

from official_bert.ops import bfloat16_elementwise, cpu_xla, stock, weight_copies

# This backend's forms of these kernels are the stock ones.
gelu = stock.gelu
global_norm = stock.global_norm


def _rows(inputs):
  """`inputs` as a 2-D `[rows, width]` matrix."""
  return tf.reshape(inputs, [-1, inputs.shape[-1]])


def _unrows(outputs, inputs):
  """2-D `outputs` back to the leading shape of `inputs`."""
  if inputs.shape.rank == 2:
    return outputs
  return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], tf.shape(outputs)[-1:]], 0))


def dense(inputs, kernel, bias, activation=None, transpose_kernel=False, training=False,
          residual=None):
  """`stock.dense` as a 2-D `MatMul`, `BiasAdd` and the activation: one fused oneDNN kernel.

  In training the activation's input is kept for its gradient, so the activation stays apart
  from the product; in bfloat16 it is then `training_activation`'s one pass each way, which
  adds the bias too (and so sums the bias gradient in the same backward pass). A
  `residual` is added in 2-D right after the bias, where the graph optimizer fuses it into the
  same kernel too, instead of a pass of its own over the layer's output.

  Example:

  >>> float(dense(tf.ones((1, 1, 2)), tf.ones((2, 1)), tf.constant([0.5]))[0, 0, 0])
  2.5
  """
  rows = _rows(inputs)
  outputs = tf.matmul(rows, kernel, transpose_b=transpose_kernel)
  if bias is None:
    outputs = outputs if activation is None else activation(outputs)
  elif activation is not None and training and outputs.dtype == tf.bfloat16:
    outputs = training_activation(activation)(outputs, bias)
  else:
    outputs = tf.nn.bias_add(outputs, bias)
    if activation is not None:
      outputs = activation(outputs)
  if residual is not None:
    # Shaped by the rows of the product's inputs, which lets the optimizer see that the shapes
    # match (a shape read from `outputs` would be a second use of it, which stops the fusion).
    outputs += tf.reshape(residual, tf.concat([tf.shape(rows)[:1], residual.shape[-1:]], 0))
  return _unrows(outputs, inputs)


def project_dropout_add_layer_norm(hidden, projection, residual, dropout, norm, training=False):
  """`stock.project_dropout_add_layer_norm` with the projection's bias and the residual inside
  the fused passes.

  In training the product runs without its bias, and `dropout_add_layer_norm` adds the bias
  with the dropout, the residual and the norm: one pass forward and one backward in bfloat16,
  which also sums the bias gradient. In inference the residual is added to the product in 2-D
  (`dense`), where the graph optimizer fuses it into the product's oneDNN kernel, and the norm
  is oneDNN's (`layer_norm`). A projection with LoRA, quantized or without a bias, or a dropout
  with a noise shape, takes the stock form.

  Example:

  >>> import keras
  >>> projection, norm = keras.layers.Dense(2), keras.layers.LayerNormalization(epsilon=1e-12)
  >>> outputs = project_dropout_add_layer_norm(tf.ones((1, 3)), projection, tf.ones((1, 2)),
  ...                                          keras.layers.Dropout(0.1), norm)
  >>> tuple(outputs.shape)
  (1, 2)
  """
  if not projection.built:
    projection.build(hidden.shape)
  if (getattr(projection, "lora_enabled", False) or getattr(projection, "quantization_mode", None)
      or projection.bias is None or not _is_dropout_layer(dropout)):
    return stock.project_dropout_add_layer_norm(hidden, projection, residual, dropout, norm,
                                                training=training)
  dtype = residual.dtype
  kernel = weight_copies.read(projection.kernel, dtype)
  bias = weight_copies.read(projection.bias, dtype)
  transpose = getattr(projection, "transposed_kernel", False)
  if training:
    seed = dropout.next_seed() if dropout.rate else None
    outputs = dense(hidden, kernel, None, transpose_kernel=transpose, training=True)
    normalized = dropout_add_layer_norm(outputs, residual, norm.gamma, norm.beta, norm.epsilon,
                                        dropout.rate, seed, bias=bias)
  else:
    outputs = dense(hidden, kernel, bias, transpose_kernel=transpose, residual=residual)
    normalized = layer_norm(outputs, norm.gamma, norm.beta, norm.epsilon)
  return tf.cast(normalized, dtype)


# === Element-wise training work, compiled apart ===

def _compiled_in_float32(function, constants=0, output_dtype=None):
  """`function` of tensors as one XLA program forward and one backward, in float32 inside.

  The float inputs are cast to float32 inside each program, the result to `output_dtype` (by
  default the dtype of the first input), and each gradient to the dtype of its input (`_cast`);
  the last `constants` inputs (which may be integers, such as a dropout seed) get no gradient.
  The backward program recomputes `function` from the inputs instead of keeping the forward
  pass's intermediate values.
  """

  def in_float32(tensors):
    return [_cast(t, tf.float32) if t.dtype.is_floating else t for t in tensors]

  @tf.function(jit_compile=True, autograph=False)
  def forward(*inputs):
    return _cast(function(*in_float32(inputs)), output_dtype or inputs[0].dtype)

  @tf.function(jit_compile=True, autograph=False)
  def backward(upstream, *inputs):
    with tf.GradientTape() as tape:
      inputs32 = in_float32(inputs)
      variables = inputs32[:len(inputs32) - constants]
      tape.watch(variables)
      outputs = function(*inputs32)
    gradients = tape.gradient(outputs, variables, _cast(upstream, tf.float32))
    return [_cast(g, t.dtype) for g, t in zip(gradients, inputs)] + [None] * constants

  @tf.custom_gradient
  def compiled(*inputs):
    return forward(*inputs), lambda upstream: backward(upstream, *inputs)

  return compiled


def _cast(tensor, dtype):
  """`tf.cast` inside an XLA program, between bfloat16 and float32 by the bits.

  XLA's CPU backend runs each bfloat16 cast as a pass of its own (a `wrapped_convert`) instead
  of fusing it into its neighbours; as integer operations on the bits it fuses into the
  program's one pass. A bfloat16 is the upper half of a float32;
  the other way rounds to nearest, ties to even, as `tf.cast` does, and keeps NaNs NaN.
  """
  if tensor.dtype == dtype or {tensor.dtype, tf.as_dtype(dtype)} != {tf.bfloat16, tf.float32}:
    return tf.cast(tensor, dtype)
  if dtype == tf.float32:
    bits = tf.cast(tf.bitcast(tensor, tf.uint16), tf.uint32)
    return tf.bitcast(tf.bitwise.left_shift(bits, 16), tf.float32)
  bits = tf.bitcast(tensor, tf.uint32)
  lowest_kept = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 16), 1)
  # Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the dropped
  # half is above one half, or is one half and the kept half odd.
  rounded = tf.bitwise.right_shift(bits + 0x7FFF + lowest_kept, 16)
  # A NaN would round into the sign bit or to infinity: kept a (quiet) NaN instead. Selected
  # as integers, which XLA fuses where a float `is_nan` and select it did not.
  nan = tf.bitwise.bitwise_and(bits, 0x7FFFFFFF) > 0x7F800000
  rounded = tf.where(nan, tf.bitwise.bitwise_or(tf.bitwise.right_shift(bits, 16), 0x40), rounded)
  return tf.bitcast(tf.cast(rounded, tf.uint16), tf.bfloat16)


# Fewer classes than this (a classifier's) cost less as TensorFlow's kernel than as a program.
_COMPILED_CROSS_ENTROPY_MIN_CLASSES = 1024


def sparse_softmax_cross_entropy(labels, logits):
  """`stock.sparse_softmax_cross_entropy`; over a vocabulary, as one XLA pass each way.

  TensorFlow's kernel computes the softmax's gradient in the forward pass and keeps it, a
  second array as large as the logits; the compiled `cpu_xla` form keeps only the statistics
  forward and recomputes the gradient backward, which over a vocabulary (the masked-LM logits)
  is much the cheaper. Logits with fewer than 1,024 classes take TensorFlow's kernel, cheaper
  than a program's launch.

  Example:

  >>> import numpy as np
  >>> loss = sparse_softmax_cross_entropy(np.array([1]), np.log(np.full((1, 2048), 0.5)))
  >>> round(float(loss[0]), 4)  # -log(1 / 2048)
  7.6246
  """
  classes = logits.shape[-1]
  if classes is None or classes < _COMPILED_CROSS_ENTROPY_MIN_CLASSES:
    return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32),
                                                          tf.cast(logits, tf.float32))
  return _compiled_cross_entropy(tf.cast(logits, tf.float32), tf.cast(labels, tf.int32))


_compiled_cross_entropy = _compiled_in_float32(
    lambda logits, labels: cpu_xla.sparse_softmax_cross_entropy(labels, logits), constants=1)


def project_onto_table(hidden, table, bias):
  """`stock.project_onto_table`; in bfloat16, oneDNN's product alone, then the bias added by one
  XLA pass each way that returns float32 logits.

  oneDNN runs the product with a bias over a vocabulary fused in much slower than the product
  alone, and the masked-LM head then casts the bfloat16 logits to float32 in a pass of its own
  each way. Here one program adds the bias in float32 and returns the float32 logits the head
  wants; backward, one program rounds their gradient to bfloat16 for the product and sums the
  bias gradient in float32 (`docs/design/cpu-kernels.md` has the measurements).

  Returns:
    `[rows, classes]` logits: float32 for bfloat16 inputs, else in the dtype of `hidden`.

  Example:

  >>> logits = project_onto_table(tf.ones((1, 2), tf.bfloat16), tf.ones((3, 2), tf.bfloat16),
  ...                             tf.constant([0.5, 0.0, -0.5], tf.bfloat16))
  >>> logits.dtype.name, logits.numpy().tolist()
  ('float32', [[2.5, 2.0, 1.5]])
  """
  if hidden.dtype != tf.bfloat16:
    return tf.matmul(hidden, table, transpose_b=True) + bias  # no transpose of the table
  return _add_bias_in_float32(tf.matmul(hidden, table, transpose_b=True), bias)


_add_bias_in_float32 = _compiled_in_float32(lambda product, bias: product + bias,
                                            output_dtype=tf.float32)


_COMPILED_ACTIVATIONS = {}


def compiled_activation(activation):
  """`activation(x + bias)` of a bfloat16 `x` as one XLA pass forward and one backward, in float32.

  The backward pass recomputes the activation's derivative from its input instead of keeping the
  forward pass's intermediate values, and sums the bias gradient over the rows in float32 in the
  same pass, instead of TensorFlow's bfloat16 `BiasAddGrad` over the product's output. As
  TensorFlow graph operations the same function would pass over the rows once per operation
  (`tests/models/test_bf16.py` checks both against the stock forms).

  Args:
    activation: a function of one float32 tensor (a Keras activation).

  Returns:
    A function of `x` `[rows, width]` and `bias` `[width]`, with a custom gradient, giving a
    tensor of the dtype of `x`.

  Example:

  >>> y = compiled_activation(stock.gelu_tanh)(tf.constant([[0.5]], tf.bfloat16),
  ...                                    tf.constant([0.5], tf.bfloat16))
  >>> y.dtype.name, round(float(y[0, 0]), 2)
  ('bfloat16', 0.84)
  """
  if activation not in _COMPILED_ACTIVATIONS:
    _COMPILED_ACTIVATIONS[activation] = _compiled_in_float32(
        lambda x, bias: activation(x + bias))
  return _COMPILED_ACTIVATIONS[activation]


def training_activation(activation):
  """`activation(x + bias)` of a bfloat16 `x` in training: for the two GELUs and for none
  (`linear`) the fused kernels (`bfloat16_elementwise.bias_gelu`, `bias_add`) where they load,
  otherwise `compiled_activation`.

  Example:

  >>> y = training_activation(stock.gelu_tanh)(tf.constant([[0.5]], tf.bfloat16),
  ...                                    tf.constant([0.5], tf.bfloat16))
  >>> y.dtype.name, round(float(y[0, 0]), 2)
  ('bfloat16', 0.84)
  """
  if not bfloat16_elementwise.usable():
    return compiled_activation(activation)
  if activation is keras.activations.linear:
    return bfloat16_elementwise.bias_add
  # Which GELU each function is: the tanh form (`approximate`) or the erf form.
  approximate = {stock.gelu_tanh: True, stock.gelu: False, cpu_xla.gelu: False}.get(
      activation)
  if approximate is None:
    return compiled_activation(activation)
  return lambda x, bias: bfloat16_elementwise.bias_gelu(x, bias, approximate)


_COMPILED_LAYER_NORMS = {}


def compiled_layer_norm(epsilon):
  """`stock.layer_norm` of a bfloat16 tensor as one XLA pass forward and one backward.

  The statistics and the normalization are float32 inside each pass and the result is rounded
  to the dtype of the inputs once, as the inference form (`layer_norm`) returns it. The stock
  form runs as a dozen TensorFlow graph passes each way plus the casts around them: a seventh of
  the op time of a bfloat16 BERT-Base fine-tuning step (`tf.profiler`). The backward pass
  recomputes the statistics from the inputs instead of keeping them.

  Args:
    epsilon: added to the variance.

  Returns:
    A function of `(inputs, gamma, beta)` (bfloat16 inputs, float32 weights), with a custom
    gradient, giving a tensor of the dtype of the inputs.

  Example:

  >>> y = compiled_layer_norm(1e-12)(tf.constant([[1.0, 3.0]], tf.bfloat16), tf.ones(2),
  ...                                tf.zeros(2))
  >>> y.dtype.name, y.numpy().tolist()
  ('bfloat16', [[-1.0, 1.0]])
  """
  if epsilon not in _COMPILED_LAYER_NORMS:
    _COMPILED_LAYER_NORMS[epsilon] = _compiled_in_float32(
        lambda x, gamma, beta: stock.layer_norm(x, gamma, beta, epsilon))
  return _COMPILED_LAYER_NORMS[epsilon]


_COMPILED_SOFTMAXES = {}


def compiled_masked_softmax(scale, rate=0.0):
  """`dropout(softmax(scores * scale + padding))` of bfloat16 attention scores as one XLA pass
  forward and one backward, in float32 inside.

  The stock form scales the queries, casts the scores to float32, adds the padding mask, takes
  the softmax, casts the probabilities back and drops some, each a TensorFlow graph pass or an
  XLA program forward and again backward: several passes over the largest activations of an
  attention layer. The backward pass recomputes the softmax from the
  scores and hashes the same dropout mask (`cpu_xla.dropout`) again.

  Args:
    scale: the scores' factor, `1 / sqrt(head_size)`.
    rate: the probabilities' dropout rate, a Python float in `[0, 1)`.

  Returns:
    A function of `scores` `[batch, heads, queries, keys]`, float32 `padding` broadcastable
    to them (0, or `stock.MASKED_SCORE` at padding keys) and an int32 `[2]` dropout `seed`
    (neither with a gradient), with a custom gradient, giving probabilities of the dtype of
    `scores`.

  Example:

  >>> probs = compiled_masked_softmax(0.5)(tf.zeros((1, 1, 1, 3), tf.bfloat16),
  ...                                      tf.constant([0.0, 0.0, stock.MASKED_SCORE]),
  ...                                      tf.constant([0, 0]))
  >>> probs.dtype.name, probs.numpy().tolist()
  ('bfloat16', [[[[0.5, 0.5, 0.0]]]])
  """

  def masked_softmax(scores, padding, seed):
    probs = tf.nn.softmax(scores * scale + padding, axis=-1)
    return cpu_xla.dropout(probs, rate, seed) if rate else probs

  if (scale, rate) not in _COMPILED_SOFTMAXES:
    _COMPILED_SOFTMAXES[scale, rate] = _compiled_in_float32(masked_softmax, constants=2)
  return _COMPILED_SOFTMAXES[scale, rate]


_COMPILED_RESIDUAL_NORMS = {}


def compiled_dropout_add_layer_norm(epsilon, rate):
  """`stock.dropout_add_layer_norm` of bfloat16 tensors as one XLA pass forward and one backward.

  Bias, dropout, residual sum and layer norm, two XLA programs, a graph sum and the product's
  fused bias each way when taken apart, are one program each way here, float32 inside, with the
  result rounded to bfloat16 once; the bias gradient is summed in float32 in the backward pass
  (TensorFlow's bfloat16 `BiasAddGrad` sums in bfloat16). Each program a bfloat16 training step
  calls costs more than its pass over memory (it runs on one core, and waits for the products
  running beside it), so the fewer programs the better. The backward pass hashes the same
  dropout mask again and recomputes the
  statistics from the inputs.

  Args:
    epsilon: added to the variance.
    rate: the dropout rate, a Python float in `[0, 1)`.

  Returns:
    A function of `(inputs, bias, residual, gamma, beta, seed)` (bfloat16 inputs, bias and
    residual, float32 weights, an int32 `[2]` seed without gradient), with a custom gradient,
    giving a tensor of the dtype of the inputs.

  Example:

  >>> y = compiled_dropout_add_layer_norm(1e-12, 0.0)(
  ...     tf.constant([[1.0, 0.0]], tf.bfloat16), tf.zeros(2, tf.bfloat16),
  ...     tf.constant([[0.0, 2.0]], tf.bfloat16), tf.ones(2), tf.zeros(2), tf.constant([0, 0]))
  >>> y.dtype.name, y.numpy().tolist()
  ('bfloat16', [[-1.0, 1.0]])
  """
  if (epsilon, rate) not in _COMPILED_RESIDUAL_NORMS:
    _COMPILED_RESIDUAL_NORMS[epsilon, rate] = _compiled_in_float32(
        lambda x, bias, residual, gamma, beta, seed: cpu_xla.dropout_add_layer_norm(
            x, residual, gamma, beta, epsilon, rate, seed, bias=bias), constants=1)
  return _COMPILED_RESIDUAL_NORMS[epsilon, rate]


def dropout_add_layer_norm(inputs, residual, gamma, beta, epsilon, rate, seed, bias=None):
  """`stock.dropout_add_layer_norm`: in bfloat16, the fused kernel
  (`bfloat16_elementwise.dropout_add_layer_norm`) where it loads, else
  `compiled_dropout_add_layer_norm`; otherwise this backend's dropout and layer norm.

  Example:

  >>> y = dropout_add_layer_norm(tf.constant([[1.0, 0.0]], tf.bfloat16),
  ...                            tf.constant([[0.0, 2.0]], tf.bfloat16), tf.ones(2), tf.zeros(2),
  ...                            1e-12, 0.1, tf.constant([1, 2]))
  >>> y.dtype.name, y.shape.as_list()
  ('bfloat16', [1, 2])
  """
  if inputs.dtype == tf.bfloat16:
    bias = tf.zeros(inputs.shape[-1:], inputs.dtype) if bias is None else bias
    gamma, beta = tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta)
    seed = tf.zeros([2], tf.int32) if seed is None else seed
    if bfloat16_elementwise.usable():
      return bfloat16_elementwise.dropout_add_layer_norm(inputs, bias, residual, gamma, beta,
                                                         seed, epsilon, rate)
    return compiled_dropout_add_layer_norm(epsilon, rate)(inputs, bias, residual, gamma, beta,
                                                          seed)
  return stock.compose_dropout_add_layer_norm(dropout, layer_norm, inputs, residual, gamma, beta,
                                              epsilon, rate, seed, bias)


def dropout(inputs, rate, seed):
  """`cpu_xla.dropout` (a mask hashed from each element's position, one XLA pass), with a
  gradient that hashes the same mask again instead of keeping it.

  The stock form draws a random number per element, compares, scales and selects as separate
  graph operations, forward and backward, the random draws the costliest of them. Dropout is
  linear, so its gradient is the same dropout of the upstream gradient.

  Example:

  >>> outputs = dropout(tf.ones((4, 1000)), 0.5, tf.constant([1, 2]))
  >>> sorted(set(outputs.numpy().ravel().tolist()))
  [0.0, 2.0]
  """

  @tf.custom_gradient
  def masked(x):
    return cpu_xla.dropout(x, rate, seed), lambda upstream: cpu_xla.dropout(upstream, rate, seed)

  return masked(inputs)


# === Inference forms on oneDNN's fused kernels ===

# The dtypes of oneDNN's layer norm and of its fused batched products.
_ONEDNN_DTYPES = (tf.float32, tf.bfloat16)


def layer_norm(inputs, gamma, beta, epsilon, training=False):
  """`stock.layer_norm` as one oneDNN layer norm in the dtype of `inputs` (inference).

  The graph optimizer (grappler's remapper) rewrites a normalization of `[1, rows, width, 1]`
  by `FusedBatchNormV3` in training mode, with scale and offset `Fill`s of ones and zeros,
  followed by `* gamma + beta`, into `_MklLayerNorm`, one pass that keeps its statistics in
  float32 also for bfloat16 inputs. (It matches none of the forms Keras writes when gamma and
  beta are variables.) The stock form, in float32, runs seven element-wise passes and the casts
  around them, a large share of a bfloat16 forward pass. The result is in the dtype
  of `inputs`; the form needs dynamic `rows` (as in a SavedModel's signature) for the rewrite,
  and is still one `FusedBatchNormV3` where the shape is static. In training, bfloat16 inputs
  take `compiled_layer_norm`; float32 and float16 inputs take the stock form.

  Example:

  >>> [round(v, 3) for v in layer_norm(tf.constant([[1.0, 3.0]]), tf.ones(2), tf.zeros(2),
  ...                                  1e-12)[0].numpy().tolist()]
  [-1.0, 1.0]
  """
  if training and inputs.dtype == tf.bfloat16:
    return compiled_layer_norm(epsilon)(inputs, tf.convert_to_tensor(gamma),
                                        tf.convert_to_tensor(beta))
  if training or inputs.dtype not in _ONEDNN_DTYPES:
    return stock.layer_norm(inputs, gamma, beta, epsilon)
  shape = tf.shape(inputs)
  rows = tf.reduce_prod(shape[:-1])
  statistics = tf.constant([], tf.float32)  # none: training mode computes them per row
  normalized = tf.raw_ops.FusedBatchNormV3(
      x=tf.reshape(inputs, tf.stack([1, rows, shape[-1], 1])), scale=tf.fill([rows], 1.0),
      offset=tf.fill([rows], 0.0), mean=statistics, variance=statistics, epsilon=epsilon,
      data_format="NCHW", is_training=True).y
  return (tf.reshape(normalized, shape) * tf.cast(gamma, inputs.dtype)
          + tf.cast(beta, inputs.dtype))


def attention(query_key_value, mask, num_heads, dropout, training=False):
  """`stock.attention` in the dtype of `query_key_value`, on oneDNN's batched products (inference).

  The stock form scales the queries and casts the scores and probabilities to float32 and
  back, element-wise passes that TensorFlow runs slowly in bfloat16 (scaling the queries alone
  took more time than both attention products), and its einsums transpose all three of queries,
  keys and values. Here one transpose puts the heads of all three before the positions, the
  scores are a `BatchMatMulV2` against the untransposed keys whose scale and padding mask the
  graph optimizer fuses into it (`_FusedBatchMatMulV2` with `Mul` and `Add`), and oneDNN's
  softmax keeps its sums in float32 also for bfloat16 inputs. A bfloat16 training step takes
  the same products around one pass each way for the scale, the mask, the softmax and, when
  `dropout` is a `layers.Dropout`, its mask: the fused kernel
  (`bfloat16_elementwise.masked_softmax`) where it loads, else `compiled_masked_softmax`.
  Float32 training and float16 inputs take the stock form.

  Example:

  >>> tuple(attention(tf.ones((2, 5, 12)), tf.ones((2, 5)), 2, lambda p, training: p).shape)
  (2, 5, 4)
  """
  bfloat16_training = training and query_key_value.dtype == tf.bfloat16
  if (training and not bfloat16_training) or query_key_value.dtype not in _ONEDNN_DTYPES:
    return stock.attention(query_key_value, mask, num_heads, dropout, training=training)
  dtype = query_key_value.dtype
  batch, seq = tf.shape(query_key_value)[0], tf.shape(query_key_value)[1]
  hidden = query_key_value.shape[-1] // 3
  head_size = hidden // num_heads
  heads = tf.transpose(tf.reshape(query_key_value, (batch, seq, 3, num_heads, head_size)),
                       [2, 0, 3, 1, 4])
  query, key, value = tf.unstack(heads, 3, axis=0)  # each [batch, heads, seq, head_size]
  padding = (1.0 - tf.cast(mask, tf.float32)) * stock.MASKED_SCORE
  scale = 1 / math.sqrt(head_size)
  if bfloat16_training:
    fused = _is_dropout_layer(dropout)
    rate = dropout.rate if fused else 0.0
    seed = dropout.next_seed() if rate else tf.zeros([2], tf.int32)
    scores = tf.matmul(query, key, transpose_b=True)
    if bfloat16_elementwise.usable():
      probs = bfloat16_elementwise.masked_softmax(scores, padding, seed, scale, rate)
    else:
      probs = compiled_masked_softmax(scale, rate)(scores, padding[:, None, None, :], seed)
    if not fused:
      probs = dropout(probs, training=training)
  else:
    scores = (tf.matmul(query, key, transpose_b=True) * tf.constant(scale, dtype)
              + tf.cast(padding, dtype)[:, None, None, :])
    probs = dropout(tf.nn.softmax(scores, axis=-1), training=training)
  context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
  return tf.reshape(context, (batch, seq, hidden))


def _is_dropout_layer(dropout):
  """Whether `dropout` is a `layers.Dropout` (rate and seeds exposed) without a noise shape."""
  return hasattr(dropout, "next_seed") and getattr(dropout, "noise_shape", None) is None
