"""Text to WordPiece tokens in Python, as the original did, and learning a vocabulary.

- `full_tokenizer`: the original's rules (`FullTokenizer`, `BasicTokenizer`, `WordpieceTokenizer`).
- `vocab_builder`: learns a `vocab.txt` from text files (`build_vocab`).
- `utf8`: decodes text as the original did, counting the bytes that are not UTF-8.

The same rules run in-graph in `official_bert.preprocessing`.

>>> from official_bert import tokenization
>>> tokenization.BasicTokenizer(do_lower_case=True).tokenize("Héllo, wörld!")
['hello', ',', 'world', '!']
"""

from official_bert.tokenization.full_tokenizer import (
  CJK_RANGES,
  MAX_INPUT_CHARS_PER_WORD,
  UNK_TOKEN,
  BasicTokenizer,
  FullTokenizer,
  WordpieceTokenizer,
  character_replacements,
  convert_to_unicode,
  load_vocab,
  model_tokenizer,
  truncate_seq_pair,
  validate_case_matches_checkpoint,
  whitespace_tokenize,
)
from official_bert.tokenization.vocab_builder import build_vocab
