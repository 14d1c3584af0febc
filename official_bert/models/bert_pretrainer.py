"""`BertPretrainer`: the encoder with the masked-LM and next-sentence heads of pre-training."""

import keras

from official_bert import ops as kernel_ops
from official_bert.common import registry
from official_bert.layers.classification_head import ClassificationHead
from official_bert.layers.masked_lm import MaskedLMHead
from official_bert.models._base import encode, resolve_encoder, task_config
from official_bert.networks.bert_encoder import INPUT_NAMES, encoder_inputs
from official_bert.networks.functional import FunctionalModel


@registry.register("pretrainer")
@keras.saving.register_keras_serializable(package="official_bert")
class BertPretrainer(FunctionalModel):
  """BERT with its two pre-training heads; the MLM output projection shares the word embeddings.

  Args:
    config: a `BertConfig` (or its dict).
    encoder: optional encoder network to use (and train): a `BertEncoder` built from `config`,
      or any Keras model that maps the input dict to a dict with `sequence_output` and
      `pooled_output`; the MLM projection shares its `word_embeddings` layer when it has one
      and has a kernel of its own otherwise.
    dtype: optional dtype policy for the heads and a newly built encoder.
    kernels: the kernels of the heads and a newly built encoder (`official_bert.ops.CHOICES`;
      see `BertEncoder`).
    **kwargs: passed to `keras.Model`.

  Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`) plus
  `masked_lm_positions`, int32 `[batch, predictions]`.

  Outputs: a dict with `mlm_logits` `[batch, predictions, vocab]` and `next_sentence_logits`
  `[batch, 2]` (class 1 = B is a random sentence, as in the original data), both float32.
  `official_bert.models.losses.pretraining_losses` turns them into the original losses.

  Example:

  >>> import numpy as np
  >>> from official_bert import BertConfig, BertPretrainer
  >>> config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=32)
  >>> model = BertPretrainer(config)
  >>> ids = np.array([[2, 4, 1, 3, 0]], "int32")
  >>> outputs = model({"input_word_ids": ids, "input_mask": np.sign(ids),
  ...                  "input_type_ids": np.zeros_like(ids),
  ...                  "masked_lm_positions": np.array([[2]], "int32")})
  >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["next_sentence_logits"].shape)
  ((1, 1, 50), (1, 2))
  """

  def __init__(self, config, encoder=None, dtype=None, kernels="auto", **kwargs):
    config, encoder = resolve_encoder(config, encoder, dtype, kernels)

    # === Layers ===
    self.encoder = encoder
    self.masked_lm = MaskedLMHead(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        activation=config.hidden_act, initializer_range=config.initializer_range,
        embedding=getattr(encoder, "word_embeddings", None), kernels=kernels, dtype=dtype,
        name="masked_lm")
    self.next_sentence = ClassificationHead(
        2, initializer_range=config.initializer_range, kernels=kernels, dtype=dtype,
        name="next_sentence")

    # === Functional Model ===
    inputs = encoder_inputs()
    inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                name="masked_lm_positions")
    sequence_output, pooled_output = encode(encoder, {name: inputs[name] for name in INPUT_NAMES},
                                            "sequence_output", "pooled_output")
    outputs = {
        "mlm_logits": self.masked_lm(sequence_output, inputs["masked_lm_positions"]),
        "next_sentence_logits": self.next_sentence(pooled_output),
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # A functional model ignores `dtype=`; its layers got it above.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.config = config
    self.kernels = kernel_ops.choice_name(kernels)

  def get_config(self):
    return task_config(self)

  @classmethod
  def from_config(cls, config):
    # A config saved on TensorFlow may name kernels that this backend lacks (`ops.loadable`).
    return cls(**dict(config, kernels=kernel_ops.loadable(config.get("kernels"), cls.__name__)))
