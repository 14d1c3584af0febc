"""`python -m official_bert.squad_evaluate DATA.json PREDICTIONS.json [--na_prob_file F]`.

The official SQuAD v1.1 / v2.0 evaluation under a short name; see
`official_bert.evaluation.squad_evaluate`.
"""

from official_bert.evaluation.squad_evaluate import evaluate_files, main

__all__ = ["evaluate_files", "main"]

if __name__ == "__main__":
  main()
