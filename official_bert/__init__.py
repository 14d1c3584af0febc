"""official_bert: BERT pre-training, fine-tuning and serving with Keras 3 on TensorFlow.

The public API is loaded on first use, so that importing a subpackage (`official_bert.cli` sets
TensorFlow's environment before TensorFlow loads) does not import TensorFlow first.

>>> from official_bert import BertConfig
>>> BertConfig(vocab_size=30522).hidden_size
768
"""

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "BertConfig": "official_bert.configs",
    "PRESETS": "official_bert.configs",
    "get_preset": "official_bert.configs",
    "BertEncoder": "official_bert.networks",
    "BertClassifier": "official_bert.models",
    "BertMultipleChoice": "official_bert.models",
    "BertPretrainer": "official_bert.models",
    "BertSpanLabeler": "official_bert.models",
    "BertTokenClassifier": "official_bert.models",
    "export_pretrained_dir": "official_bert.checkpoints",
    "load_encoder": "official_bert.checkpoints",
    "load_pretrainer": "official_bert.checkpoints",
    "restore_encoder_weights": "official_bert.checkpoints",
    "restore_task_weights": "official_bert.checkpoints",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
  if name not in _PUBLIC:
    raise AttributeError(f"module 'official_bert' has no attribute {name!r}")
  value = getattr(importlib.import_module(_PUBLIC[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_PUBLIC))
