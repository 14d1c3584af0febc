"""What every BERT task model shares: an encoder network (given or built), a head, their config.

As in Model Garden, the encoder of a task model can be any encoder network: a Keras layer or
model that takes the dict of `input_word_ids`, `input_mask`, `input_type_ids` and returns a dict
with the outputs the task reads (`sequence_output`, `pooled_output`). A `BertEncoder` of the
model's `BertConfig` is the default. Likewise a head can be any Keras layer that maps those outputs
to the task's logits, the stock head being the default. A given encoder that is no `BertEncoder`,
and a given head, are stored in the model's config (`keras.saving.serialize_keras_object`), so
their classes must be Keras-serialisable.
"""

import keras

from official_bert.configs import BertConfig
from official_bert.networks.bert_encoder import BertEncoder


def _deserialize(part):
  return keras.saving.deserialize_keras_object(part) if isinstance(part, dict) else part


def resolve_encoder(config, encoder, dtype, kernels="auto"):
  """Returns `(config, encoder)`: the given encoder network after checking it, or a new one.

  Args:
    config: a `BertConfig` or its dict.
    encoder: None (build a `BertEncoder` of `config`), an encoder network (a `BertEncoder` must
      have been built from `config`), or a serialised one from a model config.
    dtype: the dtype policy of a newly built encoder.
    kernels: the kernels of a newly built encoder (`official_bert.ops.CHOICES`).
  """
  if isinstance(config, dict):
    config = BertConfig.from_dict(config)
  if encoder is None:
    return config, BertEncoder(config, dtype=dtype, kernels=kernels, name="encoder")
  encoder = _deserialize(encoder)
  if not isinstance(encoder, keras.layers.Layer):
    raise TypeError(f"encoder must be a Keras layer or model (an encoder network), got "
                    f"{type(encoder).__name__}.")
  if isinstance(encoder, BertEncoder) and encoder.config != config:
    raise ValueError(f"The encoder was built from {encoder.config}, not from {config}.")
  return config, encoder


def resolve_head(head, build_default):
  """Returns the given head layer (or its deserialised config), else `build_default()`."""
  if head is None:
    return build_default()
  head = _deserialize(head)
  if not isinstance(head, keras.layers.Layer):
    raise TypeError(f"head must be a Keras layer, got {type(head).__name__}.")
  return head


def encode(encoder, inputs, *output_names):
  """Calls the encoder network once; returns its output of each name (one name: that output).

  Raises:
    ValueError: the network returned no dict with these names.
  """
  outputs = encoder(inputs)
  missing = [name for name in output_names
             if not isinstance(outputs, dict) or name not in outputs]
  if missing:
    found = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
    raise ValueError(f"The encoder network {encoder.name!r} must return a dict with "
                     f"{', '.join(missing)} (as BertEncoder does); it returned {found}.")
  values = tuple(outputs[name] for name in output_names)
  return values[0] if len(values) == 1 else values


def task_config(model, head=None, **task_fields):
  """The `get_config` of a task model.

  Args:
    model: the task model, with `config`, `kernels`, `encoder` and its dtype policy.
    head: the head layer when it was given (not the stock one): serialised into the config.
    **task_fields: the model's own arguments (`num_classes`, ...).

  Returns:
    The BERT config, the kernels, the task's fields, a custom encoder and head, name, trainable
    and dtype.
  """
  config = {"config": model.config.to_dict(), "kernels": model.kernels, **task_fields}
  if not isinstance(model.encoder, BertEncoder):
    config["encoder"] = keras.saving.serialize_keras_object(model.encoder)
  if head is not None:
    config["head"] = keras.saving.serialize_keras_object(head)
  config.update(name=model.name, trainable=model.trainable,
                dtype=keras.dtype_policies.serialize(model.dtype_policy))
  return config
