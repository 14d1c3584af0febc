"""official_bert: BERT pre-training, fine-tuning and serving with Keras 3 on TensorFlow.

The public API is loaded on first use, so that importing a subpackage (`official_bert.cli` sets
TensorFlow's environment before TensorFlow loads) does not import TensorFlow first.

>>> from official_bert import BertConfig
>>> BertConfig(vocab_size=30522).hidden_size
768
"""

from official_bert.common.lazy_exports import lazy_exports

__version__ = "0.1.0"

_PUBLIC = {
    "BertConfig": ".configs",
    "PRESETS": ".configs",
    "get_preset": ".configs",
    "BertEncoder": ".networks",
    "BertClassifier": ".models",
    "BertMultipleChoice": ".models",
    "BertPretrainer": ".models",
    "BertSpanLabeler": ".models",
    "BertTokenClassifier": ".models",
    "export_pretrained_dir": ".checkpoints",
    "load_encoder": ".checkpoints",
    "load_pretrainer": ".checkpoints",
    "restore_encoder_weights": ".checkpoints",
    "restore_task_weights": ".checkpoints",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)
