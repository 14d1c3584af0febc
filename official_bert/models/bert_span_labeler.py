"""`BertSpanLabeler`: start and end logits over the sequence, for extractive question answering."""

import keras

from official_bert import ops as kernel_ops
from official_bert.common import registry
from official_bert.layers.classification_head import SpanHead
from official_bert.models._base import encode, resolve_encoder, resolve_head, task_config
from official_bert.networks.bert_encoder import encoder_inputs
from official_bert.networks.functional import FunctionalModel


@registry.register("span_labeler")
@keras.saving.register_keras_serializable(package="official_bert")
class BertSpanLabeler(FunctionalModel):
  """BERT with a two-unit dense layer on every position: answer start and end scores (SQuAD).

  Args:
    config: a `BertConfig` (or its dict).
    encoder: optional encoder network to use: a `BertEncoder` built from `config`, or any Keras
      model that maps the input dict to a dict with `sequence_output` (see `models/_base.py`).
    head: optional Keras layer mapping the sequence output to `(start_logits, end_logits)`;
      by default one two-unit dense layer (`SpanHead`).
    dtype: optional dtype policy for the head and a newly built encoder.
    kernels: the kernels of the heads and a newly built encoder (`official_bert.ops.CHOICES`;
      see `BertEncoder`).
    **kwargs: passed to `keras.Model`.

  Inputs: the encoder's dict. Outputs: a dict with float32 `start_logits` and `end_logits`,
  each `[batch, seq]`.

  Example:

  >>> import numpy as np
  >>> from official_bert import BertConfig, BertSpanLabeler
  >>> config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=32)
  >>> model = BertSpanLabeler(config)
  >>> ids = np.array([[2, 4, 3, 5, 3]], "int32")
  >>> outputs = model({"input_word_ids": ids, "input_mask": np.sign(ids),
  ...                  "input_type_ids": np.array([[0, 0, 0, 1, 1]], "int32")})
  >>> tuple(outputs["start_logits"].shape)
  (1, 5)
  """

  def __init__(self, config, encoder=None, head=None, dtype=None, kernels="auto", **kwargs):
    config, encoder = resolve_encoder(config, encoder, dtype, kernels)

    # === Layers ===
    self.encoder = encoder
    self.span_head = resolve_head(
        head, lambda: SpanHead(config.initializer_range, dtype=dtype, name="span_head"))

    # === Functional Model ===
    inputs = encoder_inputs()
    start_logits, end_logits = self.span_head(encode(encoder, inputs, "sequence_output"))
    super().__init__(inputs=inputs,
                     outputs={"start_logits": start_logits, "end_logits": end_logits},
                     **kwargs)
    # A functional model ignores `dtype=`; its layers got it above.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.config = config
    self.kernels = kernel_ops.choice_name(kernels)
    self._custom_head = head is not None

  def get_config(self):
    return task_config(self, head=self.span_head if self._custom_head else None)

  @classmethod
  def from_config(cls, config):
    # A config saved on TensorFlow may name kernels that this backend lacks (`ops.loadable`).
    return cls(**dict(config, kernels=kernel_ops.loadable(config.get("kernels"), cls.__name__)))
