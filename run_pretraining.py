"""`python run_pretraining.py`, the original command (also installed as `bert-run-pretraining`).

Its flags and documentation are in `official_bert/cli/run_pretraining.py`.
"""

from official_bert.cli import run_pretraining

if __name__ == "__main__":
  run_pretraining.run()
