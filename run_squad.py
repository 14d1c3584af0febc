"""`python run_squad.py`, the original command (also installed as `bert-run-squad`).

Its flags and documentation are in `official_bert/cli/run_squad.py`.
"""

from official_bert.cli import run_squad

if __name__ == "__main__":
  run_squad.run()
