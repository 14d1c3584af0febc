"""`BertMultipleChoice`: scores each candidate ending from its `[CLS]` vector (SWAG)."""

import keras
from keras import ops

from official_bert import ops as kernel_ops
from official_bert.common import registry
from official_bert.layers.classification_head import ClassificationHead
from official_bert.models._base import encode, resolve_encoder, resolve_head, task_config
from official_bert.networks.bert_encoder import INPUT_NAMES
from official_bert.networks.functional import FunctionalModel


@keras.saving.register_keras_serializable(package="official_bert")
class MergeChoices(keras.layers.Layer):
  """Folds the choice axis into the batch: `[batch, choices, seq]` -> `[batch * choices, seq]`."""

  def call(self, inputs):
    return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

  def compute_output_shape(self, inputs_shape):
    return (None, inputs_shape[-1])

  def get_config(self):
    # Written out so that a `DTypePolicy` argument serialises too (Keras' automatic config
    # takes plain values only).
    return super().get_config()


@registry.register("multiple_choice")
@keras.saving.register_keras_serializable(package="official_bert")
class BertMultipleChoice(FunctionalModel):
  """BERT that reads each (context, choice) pair and applies a softmax over the choices.

  Every choice is encoded on its own; one dense unit scores its pooled `[CLS]` vector, and the
  scores of a question's choices form its logits (train with softmax cross-entropy over them).

  Args:
    config: a `BertConfig` (or its dict).
    num_choices: number of candidates per question (4 for SWAG).
    dropout_rate: dropout on the pooled output; `config.hidden_dropout_prob` by default.
    encoder: optional encoder network to use: a `BertEncoder` built from `config`, or any Keras
      model that maps the input dict to a dict with `pooled_output` (see `models/_base.py`).
    head: optional Keras layer mapping each choice's pooled output to one score `[..., 1]`;
      by default dropout and one dense unit (`ClassificationHead`).
    dtype: optional dtype policy for the head and a newly built encoder.
    kernels: the kernels of the heads and a newly built encoder (`official_bert.ops.CHOICES`;
      see `BertEncoder`).
    **kwargs: passed to `keras.Model`.

  Inputs: the encoder's three names, each int32 `[batch, num_choices, seq]`.
  Outputs: a dict with float32 `logits` `[batch, num_choices]`.

  Example:

  >>> import numpy as np
  >>> from official_bert import BertConfig, BertMultipleChoice
  >>> config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=32)
  >>> model = BertMultipleChoice(config, num_choices=4)
  >>> ids = np.full((2, 4, 6), 5, "int32")
  >>> logits = model({"input_word_ids": ids, "input_mask": np.ones_like(ids),
  ...                 "input_type_ids": np.zeros_like(ids)})["logits"]
  >>> tuple(logits.shape)
  (2, 4)
  """

  def __init__(self, config, num_choices, dropout_rate=None, encoder=None, head=None, dtype=None,
               kernels="auto", **kwargs):
    config, encoder = resolve_encoder(config, encoder, dtype, kernels)
    if dropout_rate is None:
      dropout_rate = config.hidden_dropout_prob

    # === Layers ===
    self.encoder = encoder
    self.merge_choices = MergeChoices(name="merge_choices")
    self.scorer = resolve_head(head, lambda: ClassificationHead(
        1, dropout_rate, config.initializer_range, kernels=kernels, dtype=dtype, name="scorer"))

    # === Functional Model ===
    inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
              for name in INPUT_NAMES}
    flat = {name: self.merge_choices(tensor) for name, tensor in inputs.items()}
    scores = self.scorer(encode(encoder, flat, "pooled_output"))
    logits = ops.reshape(scores, (-1, num_choices))
    super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
    # A functional model ignores `dtype=`; its layers got it above.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.config = config
    self.kernels = kernel_ops.choice_name(kernels)
    self.num_choices = num_choices
    self.dropout_rate = dropout_rate
    self._custom_head = head is not None

  def get_config(self):
    return task_config(self, head=self.scorer if self._custom_head else None,
                       num_choices=self.num_choices, dropout_rate=self.dropout_rate)

  @classmethod
  def from_config(cls, config):
    # A config saved on TensorFlow may name kernels that this backend lacks (`ops.loadable`).
    return cls(**dict(config, kernels=kernel_ops.loadable(config.get("kernels"), cls.__name__)))
