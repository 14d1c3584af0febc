"""What the serving signatures share: input specs, in-graph text packing and output heads."""

import functools
import inspect

import tensorflow as tf

from official_bert.networks.bert_encoder import INPUT_NAMES
from official_bert.preprocessing import BertInputPacker, BertTokenizerLayer

# The original TFRecord feature names, in the order of the encoder inputs they feed.
EXAMPLE_FEATURES = ("input_ids", "input_mask", "segment_ids")
# The shortest default bucket: below it the fixed cost of a call outweighs the sequence length.
SMALLEST_BUCKET = 16


def bucket_lengths(seq_length, buckets=None):
  """The sequence lengths a batch of raw text is padded to: sorted, ending at `seq_length`.

  Args:
    seq_length: the longest packed sequence (`max_seq_length`).
    buckets: the lengths, each between 3 and `seq_length` (`seq_length` itself is added); None
      for the powers of two from 16 below `seq_length`, then `seq_length`; an empty sequence for
      `seq_length` alone (every batch padded to it).

  Returns:
    A tuple of increasing ints whose last is `seq_length`.
  """
  if buckets is None:
    buckets = [SMALLEST_BUCKET << i for i in range(seq_length.bit_length())
               if SMALLEST_BUCKET << i < seq_length]
  lengths = set()
  for length in buckets:
    if isinstance(length, bool) or int(length) != length or not 3 <= length <= seq_length:
      raise ValueError(f"Each bucket must be a whole number between 3 and max_seq_length "
                       f"({seq_length}), got {length!r}.")
    lengths.add(int(length))
  return tuple(sorted(lengths | {seq_length}))


def trim_to_bucket(inputs, buckets):
  """Cuts packed inputs to the smallest bucket that holds the batch's longest sequence.

  Positions past a row's last token are padding that the attention mask hides, so the model's
  outputs on the real tokens do not change; only the work on padding is saved. A batch takes one
  of `len(buckets)` lengths, so a compiled (XLA) model compiles once per bucket and batch size.

  Args:
    inputs: the encoder's input dict, int32 `[..., seq_length]`, real tokens first in each row.
    buckets: `bucket_lengths(seq_length, ...)`.

  Returns:
    The same dict, `[..., bucket]`.
  """
  if len(buckets) == 1:
    return inputs
  longest = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=-1))
  lengths = tf.constant(buckets, tf.int32)
  length = lengths[tf.argmax(tf.cast(lengths >= longest, tf.int32), output_type=tf.int32)]
  return {name: value[..., :length] for name, value in inputs.items()}


def pad_sequence(tensor, seq_length, axis=1):
  """Zero-pads `tensor`'s sequence `axis` back to `seq_length` (the outputs' documented shape)."""
  padding = [[0, 0]] * tensor.shape.rank
  padding[axis] = [0, seq_length - tf.shape(tensor)[axis]]
  shape = tensor.shape.as_list()
  shape[axis] = seq_length
  return tf.ensure_shape(tf.pad(tensor, padding), shape)


def compiled(model, jit_compile):
  """`model(inputs, training=False)` as a `tf.function`, compiled with XLA when `jit_compile`.

  Only the model is compiled: the tokenizer's tensorflow-text ops have no XLA kernels. The
  function is saved with the SavedModel, and its XLA attribute with it. It is one function for
  all the signatures that call it, traced once for inputs of any batch size and length, so that
  an export traces the model once rather than once per signature (each would otherwise trace
  the whole model into its own graph). Without XLA, TensorFlow inlines the call when it runs a
  signature, so the graph optimizer sees one graph, as before.

  Args:
    model: a Keras model that takes a dict of tensors.
    jit_compile: whether XLA compiles the model.

  Returns:
    A function of the input dict.
  """
  def call(inputs):
    return model(inputs, training=False)

  function = tf.function(call, jit_compile=bool(jit_compile), autograph=False)

  def relaxed(inputs):
    # A signature whose inputs have a static length (`serve_examples`) would otherwise retrace
    # the model for it.
    specs = {name: tf.TensorSpec([None] * value.shape.rank, value.dtype, name=name)
             for name, value in inputs.items()}
    return function.get_concrete_function(specs)(inputs)

  return relaxed


def token_id_specs(shape=(None, None)):
  """Input specs of a `serve_token_ids` signature: the three int32 encoder inputs."""
  return [tf.TensorSpec(shape, tf.int32, name=name) for name in INPUT_NAMES]


def string_specs(*names, shape=(None,)):
  """One string input spec per name."""
  return [tf.TensorSpec(shape, tf.string, name=name) for name in names]


def add_endpoint(archive, name, fn, specs):
  """`archive.add_endpoint(name, fn, specs)`, with every input checked at run time first.

  A SavedModel signature does not enforce the shapes it declares: a scalar string given where a
  vector belongs reached the tokenizer's kernels and crashed the serving process. Here each input
  passes `tf.ensure_shape` with its spec's shape, whose failure is an `InvalidArgumentError`
  naming the input ("Shape of tensor text [] is not compatible with expected shape [?]"), and all
  inputs must have the same batch size; the model sees them only then.

  Args:
    archive: a `keras.export.ExportArchive`.
    name: the endpoint's name.
    fn: the endpoint's function, whose parameters are named as the specs.
    specs: one `tf.TensorSpec` (with its name) per parameter of `fn`.
  """
  parameters = inspect.signature(fn).parameters

  @functools.wraps(fn)
  def checked(*args, **kwargs):
    bound = inspect.signature(fn).bind(*args, **kwargs)
    values = [tf.ensure_shape(value, spec.shape)
              for value, spec in zip(bound.arguments.values(), specs)]
    first, first_name = values[0], specs[0].name
    checks = [tf.debugging.assert_equal(
        tf.shape(value)[0], tf.shape(first)[0],
        message=f"{spec.name} must have as many rows as {first_name} (the batch size)")
              for value, spec in zip(values[1:], specs[1:])]
    with tf.control_dependencies(checks):
      values = [tf.identity(value) for value in values]
    return fn(**dict(zip(parameters, values)))

  archive.add_endpoint(name, checked, specs)


def check_token_ids(inputs, config, seq_length, names=INPUT_NAMES):
  """The encoder inputs of a signature, checked before the (compiled) model sees them.

  An embedding lookup is a gather, and XLA's gather clamps an index out of range instead of
  failing: an id past the vocabulary, a negative one or a type id past `type_vocab_size` would
  give a confident answer for another input. So ids are checked here, outside the compiled part,
  and so are the mask (0 or 1, padding on the right) and the sequence length (longer than
  `seq_length` would fail deep inside the model, with "Incompatible shapes").

  Args:
    inputs: the encoder's input dict, int32 `[..., length]`.
    config: the model's `BertConfig`.
    seq_length: the signature's longest sequence (`max_seq_length`).
    names: the names the caller knows the three inputs by, for messages (`INPUT_NAMES`, or the
      `tf.Example` features).

  Returns:
    `inputs`, which fail with `InvalidArgumentError` naming the input when evaluated if a check
    fails.
  """
  word_ids, mask, type_ids = (inputs[name] for name in INPUT_NAMES)
  word_name, mask_name, type_name = names
  length = tf.shape(word_ids)[-1]
  checks = [
      tf.debugging.assert_equal(tf.shape(mask), tf.shape(word_ids),
                                message=f"{mask_name} must have the shape of {word_name}"),
      tf.debugging.assert_equal(tf.shape(type_ids), tf.shape(word_ids),
                                message=f"{type_name} must have the shape of {word_name}"),
      tf.debugging.assert_less_equal(
          length, seq_length,
          message=f"{word_name} has more positions than the max_seq_length of the signature, "
                  f"{seq_length}"),
  ]
  for name, ids, limit, limit_name in ((word_name, word_ids, config.vocab_size, "vocab_size"),
                                       (type_name, type_ids, config.type_vocab_size,
                                        "type_vocab_size")):
    checks += [
        tf.debugging.assert_non_negative(ids, message=f"{name} holds a negative id"),
        tf.debugging.assert_less(
            ids, tf.constant(limit, ids.dtype),
            message=f"{name} holds an id >= {limit_name} {limit} of the model"),
    ]
  # The mask is 1 on tokens and 0 on padding, which goes on the right: any other value would be
  # taken as a weight by the attention, and flip answers.
  checks += [
      tf.debugging.assert_non_negative(mask, message=f"{mask_name} must be 0 or 1, holds < 0"),
      tf.debugging.assert_less_equal(mask, tf.constant(1, mask.dtype),
                                     message=f"{mask_name} must be 0 or 1, holds > 1"),
      tf.debugging.assert_less_equal(
          mask[..., 1:], mask[..., :-1],
          message=f"{mask_name} has a 1 after a 0: padding goes on the right"),
  ]
  with tf.control_dependencies(checks):
    return {name: tf.identity(value) for name, value in inputs.items()}


def on_token_ids(outputs_fn, config, seq_length):
  """The `serve_token_ids` function: its three named inputs, as a dict, checked
  (`check_token_ids`), into `outputs_fn`."""

  def serve_token_ids(input_word_ids, input_mask, input_type_ids):
    inputs = dict(zip(INPUT_NAMES, (input_word_ids, input_mask, input_type_ids)))
    return outputs_fn(check_token_ids(inputs, config, seq_length))

  return serve_token_ids


def parse_examples(serialized, seq_length, config):
  """Serialized `tf.Example`s with the original int64 features -> the encoder's int32 inputs.

  Args:
    serialized: string `[batch]`, each a `tf.Example` with `input_ids`, `input_mask` and
      `segment_ids` of `seq_length` int64 values (as the original `run_classifier.py` wrote them).
    seq_length: their length.
    config: the model's `BertConfig`: the ids are checked against it (`check_token_ids`).

  Returns:
    The encoder's input dict, int32 `[batch, seq_length]`.
  """
  features = tf.io.parse_example(
      serialized, {name: tf.io.FixedLenFeature([seq_length], tf.int64)
                   for name in EXAMPLE_FEATURES})
  # Checked as int64: a cast to int32 first would wrap an id of 2**32 round to 0.
  checked = check_token_ids(
      {input_name: features[feature_name]
       for feature_name, input_name in zip(EXAMPLE_FEATURES, INPUT_NAMES)},
      config, seq_length, names=EXAMPLE_FEATURES)
  return {name: tf.cast(value, tf.int32) for name, value in checked.items()}


class TextPacker:
  """Raw strings -> the encoder inputs in-graph: `BertTokenizerLayer`, then `BertInputPacker`.

  The layers are those of the data pipeline's in-graph path, so a served model sees the same ids
  as in training (`FullTokenizer` and longest-first truncation).

  Args:
    vocab_file: the `vocab.txt`; it travels in the SavedModel's `assets/`.
    do_lower_case: whether the model is uncased.
    seq_length: length of the packed sequences.
    buckets: the shorter lengths a batch is cut to (`bucket_lengths`).
  """

  def __init__(self, vocab_file, do_lower_case, seq_length, buckets=None):
    self.tokenizer = BertTokenizerLayer(vocab_file, do_lower_case, name="tokenizer")
    # `ExportArchive.track` takes only built layers.
    self.tokenizer(tf.constant([""]))
    # Zero padding, as the data pipeline writes it, whatever the vocabulary's [PAD] id.
    self.packer = BertInputPacker(seq_length, self.tokenizer.cls_id, self.tokenizer.sep_id,
                                  pad_id=0, name="packer")
    self.seq_length = seq_length
    self.buckets = bucket_lengths(seq_length, buckets)

  def track(self, archive):
    """Tracks the tokenizer's vocabulary table (and so its asset) in an `ExportArchive`."""
    archive.track(self.tokenizer)

  def __call__(self, *segments):
    """Packs one or two string tensors `[batch]` (or ragged ids) into the encoder's inputs."""
    ids = [self.tokenizer(segment) if segment.dtype == tf.string else segment
           for segment in segments]
    return self.packer(ids)

  def trim(self, inputs):
    """`trim_to_bucket` with this packer's buckets."""
    return trim_to_bucket(inputs, self.buckets)


def class_outputs(logits, labels, axis_name="label"):
  """Outputs of a softmax head: logits, probabilities, the argmax and its name.

  Args:
    logits: `[..., classes]`.
    labels: label names by class id, or None to name classes by their ids.
    axis_name: the prefix of the predicted-class outputs (`label`, `label_id`).

  Returns:
    A dict: float32 `logits` and `probabilities` `[..., classes]`, int32 `<axis_name>_id` and
    string `<axis_name>` `[...]`.
  """
  logits = tf.cast(logits, tf.float32)
  class_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
  if labels is None:
    names = tf.strings.as_string(class_id)
  else:
    names = tf.gather(tf.constant([str(label) for label in labels], tf.string), class_id)
  return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
          f"{axis_name}_id": class_id, axis_name: names}


def regression_outputs(logits):
  """Outputs of a one-unit regression head: `logits` `[batch, 1]` and `score` `[batch]`."""
  logits = tf.cast(logits, tf.float32)
  return {"logits": logits, "score": logits[:, 0]}


def encoder_outputs(outputs):
  """The encoder's dict with `encoder_outputs` stacked to `[layers, batch, seq, hidden]`."""
  return {
      "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
      "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
      "encoder_outputs": tf.cast(tf.stack(outputs["encoder_outputs"]), tf.float32),
  }
