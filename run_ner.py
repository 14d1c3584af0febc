"""`python run_ner.py`, the original command (also installed as `bert-run-ner`).

Its flags and documentation are in `official_bert/cli/run_ner.py`.
"""

from official_bert.cli import run_ner

if __name__ == "__main__":
  run_ner.run()
