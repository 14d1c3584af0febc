"""Evaluation: task metrics, and the post-processing that turns model outputs into answers."""

from official_bert.evaluation import glue_metrics, ner_metrics, squad_evaluate, squad_postprocessing
