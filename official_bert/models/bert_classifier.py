"""`BertClassifier`: sentence(-pair) classification or regression on the pooled `[CLS]` vector."""

import keras

from official_bert import ops as kernel_ops
from official_bert.common import registry
from official_bert.layers.classification_head import ClassificationHead
from official_bert.models._base import encode, resolve_encoder, resolve_head, task_config
from official_bert.networks.bert_encoder import encoder_inputs
from official_bert.networks.functional import FunctionalModel


@registry.register("classifier")
@keras.saving.register_keras_serializable(package="official_bert")
class BertClassifier(FunctionalModel):
  """BERT with one dense layer on the pooled output, as in the paper's GLUE experiments.

  Args:
    config: a `BertConfig` (or its dict).
    num_classes: number of classes; 1 makes it a regression model (STS-B).
    dropout_rate: dropout on the pooled output; `config.hidden_dropout_prob` by default.
    encoder: optional encoder network to use: a `BertEncoder` built from `config`, or any Keras
      model that maps the input dict to a dict with `pooled_output` (see `models/_base.py`).
    head: optional Keras layer mapping the pooled output to the logits; by default dropout and
      one dense layer (`ClassificationHead`).
    dtype: optional dtype policy for the head and a newly built encoder.
    kernels: the kernels of the heads and a newly built encoder (`official_bert.ops.CHOICES`;
      see `BertEncoder`).
    **kwargs: passed to `keras.Model`.

  Inputs: the encoder's dict. Outputs: a dict with float32 `logits` `[batch, num_classes]`.

  Example:

  >>> import numpy as np
  >>> from official_bert import BertClassifier, BertConfig
  >>> config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=32)
  >>> model = BertClassifier(config, num_classes=3)
  >>> ids = np.array([[2, 4, 3, 0]], "int32")
  >>> logits = model({"input_word_ids": ids, "input_mask": np.sign(ids),
  ...                 "input_type_ids": np.zeros_like(ids)})["logits"]
  >>> tuple(logits.shape)
  (1, 3)
  """

  def __init__(self, config, num_classes, dropout_rate=None, encoder=None, head=None, dtype=None,
               kernels="auto", **kwargs):
    config, encoder = resolve_encoder(config, encoder, dtype, kernels)
    if dropout_rate is None:
      dropout_rate = config.hidden_dropout_prob

    # === Layers ===
    self.encoder = encoder
    self.classifier = resolve_head(head, lambda: ClassificationHead(
        num_classes, dropout_rate, config.initializer_range, kernels=kernels, dtype=dtype,
        name="classifier"))

    # === Functional Model ===
    inputs = encoder_inputs()
    logits = self.classifier(encode(encoder, inputs, "pooled_output"))
    super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
    # A functional model ignores `dtype=`; its layers got it above.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.config = config
    self.kernels = kernel_ops.choice_name(kernels)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self._custom_head = head is not None

  def get_config(self):
    return task_config(self, head=self.classifier if self._custom_head else None,
                       num_classes=self.num_classes, dropout_rate=self.dropout_rate)

  @classmethod
  def from_config(cls, config):
    # A config saved on TensorFlow may name kernels that this backend lacks (`ops.loadable`).
    return cls(**dict(config, kernels=kernel_ops.loadable(config.get("kernels"), cls.__name__)))
