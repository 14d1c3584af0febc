"""Evaluation: task metrics, and the post-processing that turns model outputs into answers."""

from official_bert.evaluation import glue_metrics
from official_bert.evaluation import ner_metrics
from official_bert.evaluation import squad_evaluate
from official_bert.evaluation import squad_postprocessing
