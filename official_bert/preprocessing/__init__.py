"""In-graph BERT preprocessing on tensorflow-text: tokenization and input packing.

These layers run inside `tf.data` pipelines and inside exported SavedModels. Dynamic masking of
pre-training records is in `official_bert.pretraining.dynamic_masking`; the offline WordPiece
vocabulary builder is `official_bert.tokenization.vocab_builder`.
"""

from official_bert.preprocessing.input_packer import BertInputPacker
from official_bert.preprocessing.tokenizer_layer import BertTokenizerLayer

__all__ = ["BertInputPacker", "BertTokenizerLayer"]
