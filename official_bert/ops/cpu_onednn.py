"""The kernels of `stock.py` in the forms that TensorFlow's oneDNN CPU kernels run fastest.

Without XLA, a CPU step runs TensorFlow's graph, whose optimizer (grappler's remapper) fuses a
2-D `MatMul`, a `BiasAdd` and an activation (the tanh and erf GELUs, ReLU, tanh) into one oneDNN
kernel. In bfloat16 that kernel's product uses AMX where the CPU has it, and the fused epilogue
spares the element-wise passes that TensorFlow's bfloat16 kernels run slowly (the feed-forward
GELU alone was a third of a BERT-Base forward pass before it was fused). The remapper sees none
of this in the stock forms: Keras writes a 3-D product as a `Tensordot` whose reshape stands
between the product and its bias, and a bias added with `+` keeps the activation apart.
The other kernels are the stock ones, measured no slower in the graph
(`benchmarks/pretraining_throughput.py --variants=...`); `tests/test_bf16.py` checks these forms
against the stock ones, forward and backward.
"""

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
