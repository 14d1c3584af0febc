"""The stock forms of the backend-specific kernels: `keras.ops`, autodiff gradients.

These define each kernel's contract and run on every Keras backend; `cpu_xla.py` and
`cpu_onednn.py` compute the same functions another way, in TensorFlow. Two are the engine's and
TensorFlow's by nature (`dropout` with a replica's stateless seed, `global_norm` of
`tf.IndexedSlices`).
"""

import math

import keras
from keras import ops


def dropout(inputs, rate, seed):
  """Zeroes each element with probability `rate` and scales the others by `1 / (1 - rate)`.

  TensorFlow's stateless dropout: on TensorFlow a `layers.Dropout` passes each replica its own
  seed; on the other backends it runs Keras' dropout on its seed generator instead.

  Args:
    inputs: a float tensor.
    rate: a Python float in `(0, 1)`.
    seed: an int32 tensor of shape `[2]`; the mask is a function of it.

  Returns:
    A tensor like `inputs`.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.nn.experimental.stateless_dropout(inputs, rate=rate, seed=seed)


def label_logits(labels, logits):
  """The logit of each row's label: `logits[..., label]`, float32 `[...]`.

  Example:

  >>> float(label_logits(ops.array([1]), ops.array([[0.5, 2.0]]))[0])
  2.0
  """
  labels = ops.cast(labels, "int32")
  return ops.take_along_axis(ops.cast(logits, "float32"), labels[..., None], axis=-1)[..., 0]


def sparse_softmax_cross_entropy(labels, logits):
  """Per-row `-log softmax(logits)[label]`, computed in float32.

  Args:
    labels: int `[...]`, each in `[0, classes)`.
    logits: float `[..., classes]`.

  Returns:
    float32 `[...]`.

  Example:

  >>> import numpy as np
  >>> loss = sparse_softmax_cross_entropy(np.array([1]), np.log(np.array([[1.0, 3.0]])))
  >>> round(float(loss[0]), 4)  # -log(3 / 4)
  0.2877
  """
  return ops.sparse_categorical_crossentropy(ops.cast(labels, "int32"),
                                             ops.cast(logits, "float32"), from_logits=True)


def project_onto_table(hidden, table, bias):
  """`hidden @ table^T + bias`: a 2-D `[rows, hidden]` input onto a `[classes, hidden]` table.

  In the dtype of `hidden`; a backend may return float32 logits for bfloat16 inputs, as the
  caller (the masked-LM head) wants them.
  """
  return ops.matmul(hidden, ops.transpose(table)) + bias


def matmul_transposed(inputs, kernel):
  """`inputs @ kernel^T` over the last axis of `inputs`, with `kernel` of shape `[out, in]`."""
  return ops.matmul(inputs, ops.transpose(kernel))


def dense(inputs, kernel, bias, activation=None, transpose_kernel=False, training=False,
          residual=None):
  """`activation(inputs @ kernel + bias)` over the last axis of `inputs`, as `keras.layers.Dense`,
  plus `residual` if given.

  Args:
    inputs: float `[..., in]`.
    kernel: `[in, out]`, or `[out, in]` with `transpose_kernel`.
    bias: `[out]`, or None for the product alone (for a caller that adds the bias in a fused
      pass of its own).
    activation: a function of one tensor, or None.
    transpose_kernel: the kernel is stored `[out, in]` (see `TransposedDense`).
    training: whether the gradient will be taken (a backend may then choose another form).
    residual: None, or `[..., out]` added to the result (a residual connection, which a backend
      may fuse into the product).

  Example:

  >>> float(dense(ops.ones((1, 2)), ops.ones((2, 1)), ops.array([0.5]))[0, 0])
  2.5
  """
  if transpose_kernel:
    outputs = matmul_transposed(inputs, kernel)
  else:
    outputs = ops.matmul(inputs, kernel)
  outputs = outputs if bias is None else outputs + bias
  outputs = outputs if activation is None else activation(outputs)
  return outputs if residual is None else outputs + residual


def layer_norm(inputs, gamma, beta, epsilon, training=False):
  """Layer normalization over the last axis, as `keras.layers.LayerNormalization`, in float32.

  Args:
    inputs: float `[..., width]`, of any float dtype.
    gamma: float32 `[width]`, the scale.
    beta: float32 `[width]`, the offset.
    epsilon: added to the variance.
    training: whether the gradient will be taken (a backend may then choose another form).

  Returns:
    float32 `[..., width]` (a backend may return the dtype of `inputs`).

  Example:

  >>> outputs = layer_norm(ops.array([[1.0, 3.0]]), ops.ones(2), ops.zeros(2), 1e-12)
  >>> [round(v, 3) for v in ops.convert_to_numpy(outputs)[0].tolist()]
  [-1.0, 1.0]
  """
  del training  # one form
  return ops.layer_normalization(ops.cast(inputs, gamma.dtype), gamma, beta, -1, epsilon)


# Added to the scores of padding positions; large enough that their softmax weight is exactly zero
# in float32 and bfloat16.
MASKED_SCORE = -1e9


def dropout_add_layer_norm(inputs, residual, gamma, beta, epsilon, rate, seed, bias=None):
  """`layer_norm(residual + dropout(inputs + bias))`, the end of a transformer sublayer in
  training.

  Args:
    inputs: float `[..., width]`, the sublayer's output.
    residual: `[..., width]` of the dtype of `inputs`, the sublayer's input.
    gamma, beta, epsilon: as for `layer_norm`.
    rate: a Python float in `[0, 1)`; 0 leaves the dropout out.
    seed: an int32 tensor of shape `[2]` for `dropout` (unused at rate 0).
    bias: `[width]` of the dtype of `inputs`, the bias of the sublayer's last projection, or
      None (already added).

  Returns:
    float32 `[..., width]` (a backend may return the dtype of `inputs`).

  Example:

  >>> outputs = dropout_add_layer_norm(ops.array([[1.0, 0.0]]), ops.array([[0.0, 2.0]]),
  ...                                  ops.ones(2), ops.zeros(2), 1e-12, 0.0, None)
  >>> [round(v, 3) for v in ops.convert_to_numpy(outputs)[0].tolist()]
  [-1.0, 1.0]
  """
  return compose_dropout_add_layer_norm(dropout, layer_norm, inputs, residual, gamma, beta,
                                        epsilon, rate, seed, bias)


def project_dropout_add_layer_norm(hidden, projection, residual, dropout, norm, training=False):
  """`norm(residual + dropout(projection(hidden)))`: the end of a transformer sublayer.

  The seam where a backend fuses the sublayer's last projection, its dropout, the residual sum
  and the layer norm; this form calls the four layers as they are.

  Args:
    hidden: the input of the sublayer's last projection.
    projection: that projection, a dense Keras layer (`layers.Dense`, `layers.TransposedDense`).
    residual: the sublayer's input, `[..., width]`, in the compute dtype.
    dropout: the dropout layer on the projection's output (`layers.Dropout`).
    norm: the layer norm (`layers.LayerNorm`).
    training: whether this is a training step.

  Returns:
    `[..., width]` in the dtype of `residual`.

  Example:

  >>> projection, norm = keras.layers.Dense(2), keras.layers.LayerNormalization(epsilon=1e-12)
  >>> outputs = project_dropout_add_layer_norm(ops.ones((1, 3)), projection, ops.ones((1, 2)),
  ...                                          keras.layers.Dropout(0.1), norm)
  >>> tuple(outputs.shape)
  (1, 2)
  """
  outputs = dropout(projection(hidden), training=training)
  return ops.cast(norm(residual + outputs, training=training), residual.dtype)


def compose_dropout_add_layer_norm(dropout_fn, layer_norm_fn, inputs, residual, gamma, beta,
                                   epsilon, rate, seed, bias=None):
  """`dropout_add_layer_norm` composed of a backend's own `dropout_fn` and `layer_norm_fn`."""
  if bias is not None:
    inputs = inputs + bias
  if rate:
    inputs = dropout_fn(inputs, rate, seed)
  return layer_norm_fn(residual + inputs, gamma, beta, epsilon, training=True)


def attention(query_key_value, mask, num_heads, dropout, training=False):
  """Multi-head attention of every position over the non-padding ones.

  Scores and softmax in float32, whatever the dtype of `query_key_value`.

  Args:
    query_key_value: `[batch, seq, 3 * hidden]`, the queries, keys and values side by side.
    mask: `[batch, seq]`, 1 for real tokens and 0 for padding.
    num_heads: the number of heads; divides `hidden`.
    dropout: a function of the attention probabilities (their dropout), called with
      `training=training`.
    training: whether this is a training step.

  Returns:
    `[batch, seq, hidden]`, the heads' contexts side by side, in the dtype of `query_key_value`.

  Example:

  >>> tuple(attention(ops.ones((2, 5, 12)), ops.ones((2, 5)), 2, lambda p, training: p).shape)
  (2, 5, 4)
  """
  dtype = query_key_value.dtype
  batch, seq = ops.shape(query_key_value)[0], ops.shape(query_key_value)[1]
  hidden = query_key_value.shape[-1] // 3
  head_size = hidden // num_heads
  qkv = ops.reshape(query_key_value, (batch, seq, 3, num_heads, head_size))
  # Unstacked rather than sliced: the gradient is then one stack, where three slices' gradients
  # are three zero-padded copies of the block summed (a tenth of a bfloat16 step on CPU).
  query, key, value = ops.unstack(qkv, 3, axis=2)
  query = query * ops.cast(1.0 / math.sqrt(head_size), dtype)
  scores = ops.cast(ops.einsum("bqnd,bknd->bnqk", query, key), "float32")
  padding = 1.0 - ops.cast(mask, "float32")
  scores = scores + padding[:, None, None, :] * MASKED_SCORE
  probs = dropout(ops.cast(ops.softmax(scores, axis=-1), dtype), training=training)
  context = ops.einsum("bnqk,bknd->bqnd", probs, value)
  return ops.reshape(context, (batch, seq, hidden))


def gelu(x):
  """The exact (erf) GELU, `x * Phi(x)`."""
  return keras.activations.gelu(x, approximate=False)


_SQRT_TWO_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
  """The original BERT's GELU, `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`.

  One form on every backend; it is here, beside the exact one, so that the kernels that fuse an
  activation can tell the two apart (`official_bert.layers.activations` names them).
  """
  # `x * x * x` rather than a power: one fused multiply chain, and no `pow` kernel.
  return 0.5 * x * (1.0 + ops.tanh(_SQRT_TWO_OVER_PI * (x + 0.044715 * (x * x * x))))


def global_norm(tensors):
  """The Euclidean norm of all `tensors` together (float32); None entries are skipped.

  The training engine's (TensorFlow's), as its gradients may be `tf.IndexedSlices`.

  Args:
    tensors: a list of tensors or `tf.IndexedSlices` (their values count).

  Example:

  >>> float(global_norm([ops.ones([2, 32]), ops.array([6.0])]))
  10.0
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  values = [tf.cast(t.values if isinstance(t, tf.IndexedSlices) else t, tf.float32)
            for t in tensors if t is not None]
  return tf.linalg.global_norm(values) if values else tf.constant(0.0)
