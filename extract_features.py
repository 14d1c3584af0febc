"""`python extract_features.py`, the original command (also installed as `bert-extract-features`).

Its flags and documentation are in `official_bert/cli/extract_features.py`.
"""

from official_bert.cli import extract_features

if __name__ == "__main__":
  extract_features.run()
