"""Whole networks built from `official_bert.layers`."""

from official_bert.networks.bert_encoder import INPUT_NAMES, BertEncoder, encoder_inputs
