"""`python build_vocab.py`, the original command (also installed as `bert-build-vocab`).

Its flags and documentation are in `official_bert/cli/build_vocab.py`.
"""

from official_bert.cli import build_vocab

if __name__ == "__main__":
  build_vocab.run()
