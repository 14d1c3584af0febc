"""Low-precision copies of the float32 weights, written by the optimizer update instead of cast in
every step.

Under a mixed policy (`mixed_bfloat16`) each layer casts its float32 weights to the compute dtype
when it reads them, and each weight's gradient comes back through that cast: two passes over all
weights per step besides the products. Where the step runs as TensorFlow's graph and XLA compiles
the update apart (bfloat16 on a CPU, `official_bert.training.accelerators`), the two casts are
separate passes over memory, a tenth of a BERT-Base bfloat16 pre-training step's op time measured
with `tf.profiler`. The update already reads and writes every weight; there it also writes a
bfloat16 copy of each, which the next step reads as it is. The gradients then come back in
bfloat16, and the update turns them into float32 as it applies them (the fused kernel of
`ops.adam_update` in one pass per weight, XLA's compiled update in a few). The float32 weights
stay the master weights (the optimizer's and the checkpoint's); the copies are neither trained nor
saved.

Layers read a weight with `read(variable, dtype)`: a cast, or the variable's copy while the step's
forward pass is traced inside `WeightCopies.reading()`. `read` runs on every backend;
`WeightCopies` belongs to TensorFlow's training engine and loads TensorFlow when it is made.

Example:

>>> import tensorflow as tf
>>> layer = keras.layers.Dense(2)
>>> layer.build((None, 3))
>>> copies = WeightCopies([layer.kernel], "bfloat16")
>>> with tf.GradientTape() as tape, copies.reading():
...   loss = tf.reduce_sum(read(layer.kernel, "bfloat16"))
>>> direct, copied = copies.gradients(tape, loss, [layer.kernel])
>>> direct, copied[0].dtype.name
([None], 'bfloat16')
>>> copies.combine(direct, copied)[0].dtype.name
'float32'
"""

import contextlib

import keras

# The `WeightCopies` whose copies `read` returns, while a training step's forward pass is traced.
_reading = None


def read(variable, dtype):
  """The value of `variable` in `dtype`: its copy while one is being read, else a cast.

  Args:
    variable: a Keras or TensorFlow variable.
    dtype: the compute dtype the caller wants.

  Returns:
    A tensor of `dtype`.
  """
  copy = _reading.copy_of(variable) if _reading is not None else None
  standardize = keras.backend.standardize_dtype
  if copy is not None and standardize(copy.dtype) == standardize(dtype):
    return copy.read_value()
  return keras.ops.cast(variable, dtype)


class WeightCopies:
  """Copies in `dtype` of float32 `variables`, read by the layers in place of casts.

  Args:
    variables: the float32 variables to copy (other dtypes are left out).
    dtype: the copies' dtype, the compute dtype of the model's layers.
  """

  def __init__(self, variables, dtype):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    self.variables = [v for v in variables if tf.as_dtype(v.dtype) == tf.float32]
    # Trainable, so that a gradient tape watches their reads; they belong to no model or
    # checkpoint.
    self.copies = [tf.Variable(tf.cast(_value(v), dtype), trainable=True,
                               name=f"{v.name}_{tf.as_dtype(dtype).name}")
                   for v in self.variables]
    self._index = {id(v): i for i, v in enumerate(self.variables)}

  def copy_of(self, variable):
    """The copy of `variable`, or None."""
    index = self._index.get(id(variable))
    return None if index is None else self.copies[index]

  @contextlib.contextmanager
  def reading(self):
    """Makes `read` return the copies inside the `with` block (the trace of a forward pass)."""
    global _reading
    previous, _reading = _reading, self
    try:
      yield
    finally:
      _reading = previous

  def gradients(self, tape, target, variables):
    """The gradients of `target` for `variables` in two parts, for `combine`.

    Returns:
      `(direct, through_copies)`: for each of `variables`, the gradient of its own reads and
      that of its copy's reads (in the copy's dtype), each None where there were none.
    """
    copies = [self.copy_of(v) for v in variables]
    sources = list(variables) + [c for c in copies if c is not None]
    grads = tape.gradient(target, sources)
    direct, rest = grads[:len(variables)], iter(grads[len(variables):])
    return list(direct), [None if c is None else next(rest) for c in copies]

  @staticmethod
  def combine(direct, through_copies):
    """Each variable's float32 gradient from the two parts of `gradients`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    combined = []
    for own, copied in zip(direct, through_copies):
      own = None if own is None else tf.convert_to_tensor(own)
      copied = None if copied is None else tf.cast(tf.convert_to_tensor(copied), tf.float32)
      combined.append(copied if own is None else own if copied is None else own + copied)
    return combined

  def refresh(self, variables=None):
    """Writes each copy from its variable (after an update or a restore): of all the
    variables, or of `variables` alone."""
    for variable in self.variables if variables is None else variables:
      copy = self.copy_of(variable)
      if copy is not None:
        copy.assign(keras.ops.cast(_value(variable), copy.dtype))


def _value(variable):
  # A Keras variable read as itself, not autocast to a policy's compute dtype.
  return variable.value if isinstance(variable, keras.Variable) else variable
