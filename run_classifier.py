"""`python run_classifier.py`, the original command (also installed as `bert-run-classifier`).

Its flags and documentation are in `official_bert/cli/run_classifier.py`.
"""

from official_bert.cli import run_classifier

if __name__ == "__main__":
  run_classifier.run()
