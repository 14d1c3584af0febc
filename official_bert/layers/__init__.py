"""Keras layers that BERT is built from; each is serialisable and works under mixed precision."""

from official_bert.layers.activations import get_activation
from official_bert.layers.attention import SelfAttention
from official_bert.layers.classification_head import ClassificationHead, SpanHead
from official_bert.layers.dropout import Dropout
from official_bert.layers.embeddings import BertEmbeddings
from official_bert.layers.masked_lm import MaskedLMHead
from official_bert.layers.transformer_block import TransformerBlock
from official_bert.layers.transposed_dense import TransposedDense
