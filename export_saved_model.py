"""`python export_saved_model.py`, the original command (also `bert-export-saved-model`).

Its flags and documentation are in `official_bert/cli/export_saved_model.py`.
"""

from official_bert.cli import export_saved_model

if __name__ == "__main__":
  export_saved_model.run()
