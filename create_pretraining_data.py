"""`python create_pretraining_data.py`, the original command (also `bert-create-pretraining-data`).

Its flags and documentation are in `official_bert/cli/create_pretraining_data.py`.
"""

from official_bert.cli import create_pretraining_data

if __name__ == "__main__":
  create_pretraining_data.run()
