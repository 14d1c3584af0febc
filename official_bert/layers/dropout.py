"""Dropout whose masks come from a keyed integer hash computed inside the step's own loops."""

import keras
import numpy as np
import tensorflow as tf

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


@tf.function(jit_compile=True)
def _hashed_dropout(inputs, seed, rate):
  # Compiled apart so that a graph-mode step gets the fused form too; XLA inlines it into an
  # XLA-compiled step.
  threshold = tf.cast(tf.cast(rate, tf.float64) * 2.0**32, tf.uint32)
  shape = inputs.shape.as_list() if inputs.shape.is_fully_defined() else tf.shape(inputs)
  keep = random_words(shape, seed) >= threshold
  # Scaling after the select makes the gradient end in the select, which XLA's CPU backend sums
  # quickly into a bias gradient; a product at the end falls back to a much slower reduction.
  return tf.where(keep, inputs, tf.zeros_like(inputs)) * tf.cast(1 / (1 - rate), inputs.dtype)


@keras.saving.register_keras_serializable(package="official_bert")
class Dropout(keras.layers.Dropout):
  """`keras.layers.Dropout` with masks from a keyed hash of each element's position.

  Keras draws masks with TensorFlow's stateless generators, which XLA runs as a separate
  program writing a buffer of random words that the dropout then reads: a large share of a BERT
  training step on CPU, whose attention dropout alone covers `batch * heads * seq^2` elements
  per layer. Here each element's 32-bit word is two rounds of MurmurHash3's finalizer over its
  position and a key from the seed (`random_words`), a dozen integer operations that XLA fuses
  into the dropout itself, so no random buffer is written. An element is kept when its word is
  at least `rate * 2^32`. The seeds (the layer's `SeedGenerator`), the rate and the scaling are
  Keras'; only the random stream differs.

  Args:
    rate: fraction of the inputs to drop.
    **kwargs: passed to `keras.layers.Dropout`.

  Example:

  >>> layer = Dropout(0.5, seed=1)
  >>> outputs = layer(tf.ones((4, 1000)), training=True)
  >>> sorted(set(outputs.numpy().ravel().tolist()))
  [0.0, 2.0]
  """

  def call(self, inputs, training=False):
    if not training or self.rate == 0 or self.noise_shape is not None:
      return super().call(inputs, training=training)
    seed = self.seed_generator.next()
    # The generator's state is int64; the hash keys come from two 32-bit words.
    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return _hashed_dropout(inputs, seed, tf.constant(self.rate, tf.float32))
