"""official_bert: BERT pre-training, fine-tuning and serving with Keras 3 on TensorFlow."""

import os

# TensorFlow leaves its oneDNN kernels off on some CPUs, where matrix products then run slower.
# The switch is read once, when TensorFlow is first imported, so it must be set before that.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

# pylint: disable=wrong-import-position

from official_bert.checkpoints import (
  export_pretrained_dir,
  load_encoder,
  load_pretrainer,
  restore_encoder_weights,
)
from official_bert.configs import PRESETS, BertConfig, get_preset
from official_bert.models import (
  BertClassifier,
  BertMultipleChoice,
  BertPretrainer,
  BertSpanLabeler,
  BertTokenClassifier,
)
from official_bert.networks import BertEncoder

__version__ = "0.1.0"
