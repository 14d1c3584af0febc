"""In-graph BERT preprocessing on tensorflow-text: tokenization and input packing.

These layers run inside `tf.data` pipelines and inside exported SavedModels. `DynamicMasking`
draws new masked-LM masks every epoch over pre-training records. `build_vocab` learns a WordPiece
vocabulary that fits the tokenizer.
"""

from official_bert.preprocessing.input_packer import BertInputPacker
from official_bert.preprocessing.masking import (
  DynamicMasking,
  apply_dynamic_masking,
  restore_token_ids,
)
from official_bert.preprocessing.tokenizer_layer import BertTokenizerLayer
from official_bert.preprocessing.vocab_builder import build_vocab

__all__ = ["BertInputPacker", "BertTokenizerLayer", "DynamicMasking", "apply_dynamic_masking",
           "build_vocab", "restore_token_ids"]
