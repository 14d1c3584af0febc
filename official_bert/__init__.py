"""official_bert: BERT pre-training, fine-tuning and serving with Keras 3 on TensorFlow."""

from official_bert.configs import PRESETS, BertConfig, get_preset
from official_bert.models import (BertClassifier, BertMultipleChoice, BertPretrainer,
                                  BertSpanLabeler, BertTokenClassifier)
from official_bert.networks import BertEncoder

__version__ = "0.1.0"
