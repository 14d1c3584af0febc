"""What every BERT task model shares: an encoder (given or built) and its input dict."""

from official_bert.configs import BertConfig
from official_bert.networks.bert_encoder import BertEncoder


def resolve_encoder(config, encoder, dtype):
  """Returns `(config, encoder)`: the given encoder after checking it fits, or a new one."""
  if isinstance(config, dict):
    config = BertConfig.from_dict(config)
  if encoder is None:
    return config, BertEncoder(config, dtype=dtype, name="encoder")
  if encoder.config != config:
    raise ValueError(f"The encoder was built from {encoder.config}, not from {config}.")
  return config, encoder


def task_config(model, **task_fields):
  """The `get_config` of a task model: the BERT config, the task's own fields, name, trainable."""
  return {"config": model.config.to_dict(), **task_fields, "name": model.name,
          "trainable": model.trainable}
