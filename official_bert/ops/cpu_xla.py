"""The kernels of `stock.py`, in forms that XLA's CPU backend runs faster.

Each was measured on BERT training steps compiled by XLA for a 2-core CPU
(`benchmarks/pretraining_throughput.py --variants=ours_xla,ours_xla_stock`); each computes the
same function as its stock form, which `tests/ops/test_ops.py` checks, forward and backward.
"""

import keras
import numpy as np
import tensorflow as tf

from official_bert.ops import stock

# This backend's forms of these kernels are the stock ones.
layer_norm = stock.layer_norm
attention = stock.attention


def label_logits(labels, logits):
  """`stock.label_logits` as one `tf.gather` (the masked-LM metrics share it with the loss).

  Example:

  >>> float(label_logits(tf.constant([1]), tf.constant([[0.5, 2.0]]))[0])
  2.0
  """
  labels = tf.cast(labels, tf.int32)
  return tf.gather(tf.cast(logits, tf.float32), labels[..., None],
                   batch_dims=labels.shape.rank)[..., 0]


def matmul_transposed(inputs, kernel):
  """`stock.matmul_transposed` as one 2-D product over all leading axes.

  (`tf.einsum("...i,oi->...o")`, the same function, compiles under XLA for CPU to a far slower
  loop at BERT's shapes, and an explicitly transposed kernel ran slower than this product at
  every BERT size measured.)
  """
  return tf.tensordot(inputs, kernel, [[inputs.shape.rank - 1], [1]])


def dense(inputs, kernel, bias, activation=None, transpose_kernel=False, training=False,
          residual=None):
  """`stock.dense`, a transposed kernel's product as `matmul_transposed`.

  Example:

  >>> float(dense(tf.ones((1, 2)), tf.ones((1, 2)), tf.constant([0.5]),
  ...             transpose_kernel=True)[0, 0])
  2.5
  """
  del training  # one form
  if transpose_kernel:
    outputs = matmul_transposed(inputs, kernel)
  else:
    outputs = keras.ops.matmul(inputs, kernel)
  outputs = outputs if bias is None else outputs + bias
  outputs = outputs if activation is None else activation(outputs)
  return outputs if residual is None else outputs + residual
# XLA fuses the stock composition of the layers' own forms.
project_dropout_add_layer_norm = stock.project_dropout_add_layer_norm

# === Dropout ===

# Odd constants of the 32-bit golden ratio and of MurmurHash3's finalizer.
_GOLDEN = 0x9E3779B9
_MIX_MULTIPLIERS = (0x85EBCA6B, 0xC2B2AE35)


def _mix32(x):
  """MurmurHash3's 32-bit finalizer: a bijection in which every input bit flips each output bit
  with probability close to 1/2."""
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))
  x *= tf.constant(_MIX_MULTIPLIERS[0], tf.uint32)
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13))
  x *= tf.constant(_MIX_MULTIPLIERS[1], tf.uint32)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def random_words(shape, seed):
  """Uniform 32-bit words, one per element of `shape`, a function of `seed` and the position.

  Each word is `mix(mix(position ^ key0) + key1)`, with both keys drawn from both halves of the
  seed, so that different seeds give unrelated streams (not shifted copies of one stream).

  Args:
    shape: the shape of the result: a list of ints or an int tensor.
    seed: an int32 tensor of shape `[2]`.

  Returns:
    A uint32 tensor of `shape`.

  Example:

  >>> words = random_words([2, 3], tf.constant([1, 2]))
  >>> words.dtype.name, tuple(words.shape)
  ('uint32', (2, 3))
  """
  seed = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
  key0 = _mix32(tf.bitwise.bitwise_xor(seed[0], _mix32(seed[1] + _GOLDEN)))
  key1 = _mix32(tf.bitwise.bitwise_xor(seed[1], _mix32(seed[0])))
  static = isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape)
  if static and np.prod(shape, dtype=np.int64) < 2**31:
    position = tf.bitcast(tf.range(int(np.prod(shape))), tf.uint32)
  else:
    # Larger or dynamic shapes count in int64, positions modulo 2^32.
    position = tf.cast(tf.range(tf.reduce_prod(tf.cast(shape, tf.int64))) % 2**32, tf.uint32)
  words = _mix32(_mix32(tf.bitwise.bitwise_xor(position, key0)) + key1)
  return tf.reshape(words, shape)


@tf.function(jit_compile=True, autograph=False)
def _hashed_dropout(inputs, seed, rate):
  # Compiled apart so that a graph-mode step gets the fused form too; XLA inlines it into an
  # XLA-compiled step.
  threshold = tf.cast(tf.cast(rate, tf.float64) * 2.0**32, tf.uint32)
  shape = inputs.shape.as_list() if inputs.shape.is_fully_defined() else tf.shape(inputs)
  keep = random_words(shape, seed) >= threshold
  # Scaling after the select makes the gradient end in the select, which XLA's CPU backend sums
  # quickly into a bias gradient; a product at the end falls back to a much slower reduction.
  return tf.where(keep, inputs, tf.zeros_like(inputs)) * tf.cast(1 / (1 - rate), inputs.dtype)


def dropout(inputs, rate, seed):
  """`stock.dropout` with masks from a keyed hash of each element's position.

  TensorFlow's stateless generators run under XLA as a separate program writing a buffer of
  random words that the dropout then reads: a large share of a BERT training step on CPU, whose
  attention dropout alone covers `batch * heads * seq^2` elements per layer. Here each element's
  32-bit word is two rounds of MurmurHash3's finalizer over its position and a key from the seed
  (`random_words`), a dozen integer operations that XLA fuses into the dropout itself. An element
  is kept when its word is at least `rate * 2^32`. Rate and scaling are the stock form's; only
  the random stream differs.

  Example:

  >>> outputs = dropout(tf.ones((4, 1000)), 0.5, tf.constant([1, 2]))
  >>> sorted(set(outputs.numpy().ravel().tolist()))
  [0.0, 2.0]
  """
  return _hashed_dropout(inputs, seed, tf.constant(rate, tf.float32))


def dropout_add_layer_norm(inputs, residual, gamma, beta, epsilon, rate, seed, bias=None):
  """`stock.dropout_add_layer_norm` with this backend's dropout (XLA fuses the whole)."""
  return stock.compose_dropout_add_layer_norm(dropout, layer_norm, inputs, residual, gamma, beta,
                                              epsilon, rate, seed, bias)


# === Cross-entropy ===

def sparse_softmax_cross_entropy(labels, logits):
  """`stock.sparse_softmax_cross_entropy`, with a gradient that costs one pass over the logits.

  `tf.nn.sparse_softmax_cross_entropy_with_logits` computes the softmax's gradient already in the
  forward pass and keeps it, so an XLA-compiled training step reads and writes the whole
  `[predictions, vocab]` logits block more often than it needs, and at BERT-Tiny that block
  (640 x 30,522 floats, 78 MB) is the step's largest array. Here the
  forward pass keeps only each row's maximum and sum of exponentials, and the backward pass
  recomputes the softmax in the one pass that writes the gradient. The masked-LM metrics reuse the
  same maximum and label logit, which XLA computes once for both.
  """
  return _cross_entropy(tf.cast(logits, tf.float32), tf.cast(labels, tf.int32))


@tf.custom_gradient
def _cross_entropy(logits, labels):
  max_logit = tf.reduce_max(logits, axis=-1, keepdims=True)
  sum_exp = tf.reduce_sum(tf.exp(logits - max_logit), axis=-1, keepdims=True)
  loss = (max_logit + tf.math.log(sum_exp))[..., 0] - label_logits(labels, logits)

  def gradient(upstream):
    probabilities = tf.exp(logits - max_logit) * (1.0 / sum_exp)
    one_hot = tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype)
    return (probabilities - one_hot) * upstream[..., None], None

  return loss, gradient


# === Projections ===

@tf.custom_gradient
def project_onto_table(hidden, table, bias):
  """`stock.project_onto_table`, with the bias gradient computed inside the table's.

  The bias gradient, a column sum over the `[predictions, vocab]` gradient, is the slowest
  reduction XLA's CPU backend emits (a tenth of a BERT-Tiny step); here it comes out of the
  table's gradient product as one more column, from a column of ones appended to `hidden`.
  """
  logits = tf.matmul(hidden, table, transpose_b=True) + bias

  def gradient(upstream):
    ones = tf.ones([tf.shape(hidden)[0], 1], hidden.dtype)
    table_and_bias = tf.matmul(upstream, tf.concat([hidden, ones], 1), transpose_a=True)
    return tf.matmul(upstream, table), table_and_bias[:, :-1], table_and_bias[:, -1]

  return logits, gradient


# === Activation ===

_SQRT_HALF = 0.7071067811865476


def gelu(x):
  """`stock.gelu` written with `erf`.

  TensorFlow writes the exact GELU with `erfc`; XLA's `erf` is a short polynomial where `erfc`
  needs an exponential, and the feed-forward activation of a BERT step spends a few percent of it
  there.
  """
  return 0.5 * x * (1.0 + tf.math.erf(x * _SQRT_HALF))


# === Gradient norm ===

# XLA's CPU backend rewrites a sum over more than 32 elements of a product (such as a square)
# into windowed partial sums that run at a fraction of memory speed. Sums over rows of 32 are
# left alone and fused with the squaring.
_ROW = 32


def _sum_of_squares(tensor):
  if isinstance(tensor, tf.IndexedSlices):
    tensor = tensor.values
  size = tensor.shape.num_elements()
  if size is None or size % _ROW:
    return tf.reduce_sum(tf.square(tensor))
  rows = tf.reduce_sum(tf.square(tf.reshape(tensor, [size // _ROW, _ROW])), -1)
  # `abs` (a no-op on these non-negative sums, NaN kept) stops XLA from merging the two sums
  # back into one long sum of a product, the slow form.
  return tf.reduce_sum(tf.abs(rows))


def global_norm(tensors):
  """`stock.global_norm`, summed in rows of 32 that XLA's CPU backend reduces quickly.

  Example:

  >>> float(global_norm([tf.ones([2, 32]), tf.constant([6.0])]))
  10.0
  """
  squares = [tf.cast(_sum_of_squares(t), tf.float32) for t in tensors if t is not None]
  return tf.sqrt(tf.add_n(squares)) if squares else tf.constant(0.0)
