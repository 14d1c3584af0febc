"""In-graph BERT preprocessing on tensorflow-text: tokenization and input packing.

These layers run inside `tf.data` pipelines and inside exported SavedModels. `build_vocab` learns
a WordPiece vocabulary that fits the tokenizer.
"""

from official_bert.preprocessing.input_packer import BertInputPacker
from official_bert.preprocessing.tokenizer_layer import BertTokenizerLayer
from official_bert.preprocessing.vocab_builder import build_vocab

__all__ = ["BertInputPacker", "BertTokenizerLayer", "build_vocab"]
