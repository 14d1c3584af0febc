"""`python run_swag.py`, the original command (also installed as `bert-run-swag`).

Its flags and documentation are in `official_bert/cli/run_swag.py`.
"""

from official_bert.cli import run_swag

if __name__ == "__main__":
  run_swag.run()
