"""`BertEncoder`: embeddings -> transformer layers -> pooler, as a Keras functional model."""

import keras

from official_bert import ops as kernel_ops
from official_bert.common import registry
from official_bert.configs import BertConfig
from official_bert.layers.embeddings import BertEmbeddings
from official_bert.layers.transformer_block import TransformerBlock
from official_bert.networks.functional import FunctionalModel

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(name_prefix=""):
  """Returns the encoder's three `keras.Input`s, int32 `[batch, seq]`, keyed by `INPUT_NAMES`."""
  return {name: keras.Input(shape=(None,), dtype="int32", name=name_prefix + name)
          for name in INPUT_NAMES}


@registry.register("encoder")
@keras.saving.register_keras_serializable(package="official_bert")
class BertEncoder(FunctionalModel):
  """The bidirectional transformer encoder of BERT (Devlin et al., 2018).

  Args:
    config: a `BertConfig` (or its dict) giving the sizes.
    dtype: optional dtype policy for every layer (for example `"mixed_bfloat16"`); the global
      policy by default. Layer norms and softmax always run in float32.
    kernels: the forms of the few kernels that have backend-specific ones
      (`official_bert.ops.CHOICES`): `auto` (the default: `stock` where a GPU or TPU is visible,
      else `cpu_xla`), `stock`, `cpu_xla` or `cpu_onednn`. The training engine passes its choice
      for the device, dtype and XLA (`RuntimeConfig.accelerator_choice`). Saved in the config;
      the weights are the same whatever the kernels.
    **kwargs: passed to `keras.Model` (`name`, `trainable`).

  Inputs: a dict of int32 `[batch, seq]` tensors: `input_word_ids` (WordPiece ids), `input_mask`
  (1 for real tokens, 0 for padding) and `input_type_ids` (segment ids, 0 or 1).

  Outputs: a dict with `sequence_output` `[batch, seq, hidden]` (the last layer),
  `pooled_output` `[batch, hidden]` (tanh dense on the `[CLS]` vector) and `encoder_outputs`
  (the list of every transformer layer's output, first to last).

  Example:

  >>> import numpy as np
  >>> from official_bert import BertConfig, BertEncoder
  >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=64)
  >>> encoder = BertEncoder(config)
  >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
  >>> outputs = encoder({"input_word_ids": ids, "input_mask": np.sign(ids),
  ...                    "input_type_ids": np.zeros_like(ids)})
  >>> tuple(outputs["sequence_output"].shape), len(outputs["encoder_outputs"])
  ((1, 5, 32), 2)
  """

  def __init__(self, config, dtype=None, kernels="auto", **kwargs):
    if isinstance(config, dict):
      config = BertConfig.from_dict(config)
    kernels = kernel_ops.choice_name(kernels)
    layer_kernels = kernel_ops.kernels(kernels)

    # === Layers ===
    self.embeddings = BertEmbeddings(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dropout_rate=config.hidden_dropout_prob,
        initializer_range=config.initializer_range, kernels=layer_kernels, dtype=dtype,
        name="embeddings")
    self.transformer_layers = [
        TransformerBlock(
            hidden_size=config.hidden_size, num_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size, activation=config.hidden_act,
            dropout_rate=config.hidden_dropout_prob,
            attention_dropout_rate=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range, kernels=layer_kernels, dtype=dtype,
            name=f"transformer_layer_{i}")
        for i in range(config.num_hidden_layers)]
    self.pooler = keras.layers.Dense(
        config.hidden_size, activation="tanh",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
        dtype=dtype, name="pooler")

    # === Functional Model ===
    inputs = encoder_inputs()
    hidden = self.embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    encoder_outputs = []
    for layer in self.transformer_layers:
      hidden = layer(hidden, inputs["input_mask"])
      encoder_outputs.append(hidden)
    outputs = {
        "sequence_output": hidden,
        "pooled_output": self.pooler(hidden[:, 0, :]),
        "encoder_outputs": encoder_outputs,
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # A functional model ignores `dtype=`; its layers got it above.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.config = config
    self.kernels = kernels

  @property
  def word_embeddings(self):
    """The word-embedding layer, whose table the masked-LM head shares."""
    return self.embeddings.word_embeddings

  def get_config(self):
    return {"config": self.config.to_dict(), "kernels": self.kernels, "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy)}

  @classmethod
  def from_config(cls, config):
    # A config saved on TensorFlow may name kernels that this backend lacks (`ops.loadable`).
    return cls(**dict(config, kernels=kernel_ops.loadable(config.get("kernels"), cls.__name__)))
