"""The kernels of `stock.py` in the forms that TensorFlow's oneDNN CPU kernels run fastest.

Without XLA, a CPU step runs TensorFlow's graph, whose optimizer (grappler's remapper) fuses a
2-D `MatMul`, a `BiasAdd` and an activation (the tanh and erf GELUs, ReLU, tanh) into one oneDNN
kernel. In bfloat16 that kernel's product uses AMX where the CPU has it, and the fused epilogue
spares the element-wise passes that TensorFlow's bfloat16 kernels run slowly (the feed-forward
GELU alone was a third of a BERT-Base forward pass before it was fused). The remapper sees none
of this in the stock forms: Keras writes a 3-D product as a `Tensordot` whose reshape stands
between the product and its bias, and a bias added with `+` keeps the activation apart.
In inference, layer norm and attention have forms that oneDNN runs as few fused kernels in the
dtype of their inputs (`layer_norm`, `attention`; in training they are the stock forms).
The other kernels are the stock ones, measured no slower in the graph
(`benchmarks/pretraining_throughput.py --variants=...`); `tests/test_bf16.py` checks these forms
against the stock ones, forward and backward.
"""

import math

import tensorflow as tf

from official_bert.ops import stock

# This backend's forms of these kernels are the stock ones.
dropout = stock.dropout
sparse_softmax_cross_entropy = stock.sparse_softmax_cross_entropy
project_onto_table = stock.project_onto_table
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


def matmul_transposed(inputs, kernel):
  """`stock.matmul_transposed` as one 2-D product with `transpose_b`."""
  return _unrows(tf.matmul(_rows(inputs), kernel, transpose_b=True), inputs)


def dense(inputs, kernel, bias, activation=None, transpose_kernel=False, training=False):
  """`stock.dense` as a 2-D `MatMul`, `BiasAdd` and the activation: one fused oneDNN kernel.

  In training the activation's input is kept for its gradient, so the activation stays apart
  from the product; in bfloat16 it is then computed in float32, whose element-wise kernels
  TensorFlow runs several times faster than its bfloat16 ones (forward and backward).

  Example:

  >>> float(dense(tf.ones((1, 1, 2)), tf.ones((2, 1)), tf.constant([0.5]))[0, 0, 0])
  2.5
  """
  outputs = tf.nn.bias_add(tf.matmul(_rows(inputs), kernel, transpose_b=transpose_kernel), bias)
  if activation is not None and training and outputs.dtype == tf.bfloat16:
    outputs = tf.cast(activation(tf.cast(outputs, tf.float32)), outputs.dtype)
  elif activation is not None:
    outputs = activation(outputs)
  return _unrows(outputs, inputs)


# The dtypes of oneDNN's layer norm and of its fused batched products.
_ONEDNN_DTYPES = (tf.float32, tf.bfloat16)


def layer_norm(inputs, gamma, beta, epsilon, training=False):
  """`stock.layer_norm` as one oneDNN layer norm in the dtype of `inputs` (inference).

  The graph optimizer (grappler's remapper) rewrites a normalization of `[1, rows, width, 1]`
  by `FusedBatchNormV3` in training mode, with scale and offset `Fill`s of ones and zeros,
  followed by `* gamma + beta`, into `_MklLayerNorm`, one pass that keeps its statistics in
  float32 also for bfloat16 inputs. (It matches none of the forms Keras writes when gamma and
  beta are variables.) The stock form, in float32, spends a sixth of a bfloat16 BERT-Base forward
  pass in its seven element-wise passes and the casts around them. The result is in the dtype
  of `inputs`; the form needs dynamic `rows` (as in a SavedModel's signature) for the rewrite,
  and is still one `FusedBatchNormV3` where the shape is static. Training and float16 inputs
  take the stock form.

  Example:

  >>> [round(v, 3) for v in layer_norm(tf.constant([[1.0, 3.0]]), tf.ones(2), tf.zeros(2),
  ...                                  1e-12)[0].numpy().tolist()]
  [-1.0, 1.0]
  """
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
  softmax keeps its sums in float32 also for bfloat16 inputs. Training and float16 inputs take
  the stock form.

  Example:

  >>> tuple(attention(tf.ones((2, 5, 12)), tf.ones((2, 5)), 2, lambda p, training: p).shape)
  (2, 5, 4)
  """
  if training or query_key_value.dtype not in _ONEDNN_DTYPES:
    return stock.attention(query_key_value, mask, num_heads, dropout, training=training)
  dtype = query_key_value.dtype
  batch, seq = tf.shape(query_key_value)[0], tf.shape(query_key_value)[1]
  hidden = query_key_value.shape[-1] // 3
  head_size = hidden // num_heads
  heads = tf.transpose(tf.reshape(query_key_value, (batch, seq, 3, num_heads, head_size)),
                       [2, 0, 3, 1, 4])
  query, key, value = tf.unstack(heads, 3, axis=0)  # each [batch, heads, seq, head_size]
  padding = tf.cast((1.0 - tf.cast(mask, tf.float32)) * stock.MASKED_SCORE, dtype)
  scores = (tf.matmul(query, key, transpose_b=True) * tf.constant(1 / math.sqrt(head_size), dtype)
            + padding[:, None, None, :])
  probs = dropout(tf.nn.softmax(scores, axis=-1), training=training)
  context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
  return tf.reshape(context, (batch, seq, hidden))
