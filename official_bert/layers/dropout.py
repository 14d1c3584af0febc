"""Dropout through the layer's kernels, with a different mask on each replica."""

import keras

from official_bert import ops

# Added, times the replica's index, to the first word of a layer's seed: the odd 64-bit golden
# ratio spreads the replicas' keys far apart.
_REPLICA_STRIDE = 0x9E3779B97F4A7C15 - 2**64


@keras.saving.register_keras_serializable(package="official_bert")
class Dropout(keras.layers.Dropout):
  """`keras.layers.Dropout` whose masks come from its kernels' `dropout`.

  The seeds (the layer's `SeedGenerator`, saved with the trainer's checkpoints), the rate and the
  scaling are Keras'. On TensorFlow two things differ: the mask is drawn by the kernels'
  `dropout` (the `stock` form is TensorFlow's stateless dropout; `cpu_xla` hashes each element's
  position, see `official_bert.ops.cpu_xla.dropout`), and the seed is offset by the replica's
  index under a `tf.distribute` strategy, whose replicas share the mirrored seed state and would
  otherwise drop the same positions of their own batches. On JAX and PyTorch it is Keras'
  dropout.

  Args:
    rate: fraction of the inputs to drop.
    kernels: the kernels it computes with (`official_bert.ops.CHOICES`, or a backend's module).
    **kwargs: passed to `keras.layers.Dropout`.

  Example:

  >>> layer = Dropout(0.5, seed=1)
  >>> outputs = layer(keras.ops.ones((4, 1000)), training=True)
  >>> sorted(set(keras.ops.convert_to_numpy(outputs).ravel().tolist()))
  [0.0, 2.0]
  """

  def __init__(self, rate, kernels="auto", **kwargs):
    super().__init__(rate, **kwargs)
    self.kernels = ops.choice_name(kernels)
    self._kernels = ops.kernels(kernels)

  def call(self, inputs, training=False):
    if (not training or self.rate == 0 or self.noise_shape is not None
        or keras.backend.backend() != "tensorflow"):
      return super().call(inputs, training=training)
    return self._kernels.dropout(inputs, self.rate, self.next_seed())

  def next_seed(self):
    """The int32 `[2]` seed of this layer's next mask on this replica (advancing the layer's
    generator), for kernels that apply the dropout inside a larger fused pass."""
    return _replica_seed(self.seed_generator.next())

  def get_config(self):
    return dict(super().get_config(), kernels=self.kernels)


def _replica_seed(state):
  """The int32 `[2]` seed of this replica from a Keras seed generator's int64 state."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  replica = tf.distribute.get_replica_context()
  if replica is not None:
    offset = tf.cast(replica.replica_id_in_sync_group, tf.int64) * _REPLICA_STRIDE
    state = state + tf.stack([offset, tf.constant(0, tf.int64)])
  # As Keras does: the generator's state is int64, the random ops take two 32-bit words.
  return tf.cast(tf.math.floormod(state, tf.int32.max - 1), tf.int32)
