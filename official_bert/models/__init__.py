"""Task models: a `BertEncoder` plus the heads of pre-training and each fine-tuning task."""

from official_bert.models.bert_classifier import BertClassifier
from official_bert.models.bert_multiple_choice import BertMultipleChoice
from official_bert.models.bert_pretrainer import BertPretrainer
from official_bert.models.bert_span_labeler import BertSpanLabeler
from official_bert.models.bert_token_classifier import BertTokenClassifier
from official_bert.models.losses import masked_lm_loss, next_sentence_loss, pretraining_losses
