"""Tests of `official_bert/export/normalizer_model.py`: tables written for tf.text's
`FastBertNormalizer`, read by its own kernel.

Every code point goes through the kernel, between two letters, with the table of the original's
rules; a random table checks the trie on keys of every UTF-8 length.
"""

import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from official_bert import tokenization
from official_bert.export import normalizer_model

_CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def _normalized(model, chars):
  """What the kernel makes of each of `chars` between "x" and "y"."""
  normalizer = tf_text.FastBertNormalizer(model_buffer=model)
  texts = tf.constant([f"x{char}y" for char in chars])
  return [text.decode("utf-8") for text in normalizer.normalize(texts).numpy()]


@pytest.mark.parametrize("lower", [True, False])
def test_the_bert_table_normalizes_every_code_point_as_the_original(lower):
  replacements = tokenization.character_replacements(lower)
  chars = [chr(cp) for cp in _CODE_POINTS]
  got = _normalized(normalizer_model.bert_normalizer_model(lower), chars)
  want = [f"x{replacements.get(char, char)}y" for char in chars]
  wrong = [(f"U+{ord(c):04X}", g, w) for c, g, w in zip(chars, got, want) if g != w]
  assert not wrong, f"{len(wrong)} code points differ, first {wrong[:5]}"
  # The characters tf.text's own table treats otherwise (NFKC case folding, control characters
  # as spaces) are among them.
  assert replacements.get("\u00b5") is None and replacements["\u00ad"] == ""
  if lower:
    assert replacements["\u00c5"] == "a" and "\ufb01" not in replacements


def test_a_random_table_round_trips_through_the_kernel():
  rng = random.Random(0)
  # Keys of one to four UTF-8 bytes, NUL among them; replacements of zero to 60 bytes.
  keys = {"\x00", "a", "\x7f", "\u00e9", "\uffff", "\U0010ffff"}
  keys |= {chr(cp) for cp in rng.sample(_CODE_POINTS, 3000)}
  alphabet = "ab \u00e9\u4e2d\U0001f600"
  replacements = {key: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 15)))
                  for key in keys}
  replacements["b"] = "\U0001f600" * 15  # 60 bytes
  model = normalizer_model.normalizer_model(replacements)
  probe = sorted(keys) + [chr(cp) for cp in rng.sample(_CODE_POINTS, 3000)]
  got = _normalized(model, probe)
  assert got == [f"x{replacements.get(char, char)}y" for char in probe]


def test_bad_tables_are_refused_with_the_reason():
  with pytest.raises(ValueError, match="'ab' is not one character"):
    normalizer_model.normalizer_model({"ab": ""})
  with pytest.raises(ValueError, match="U\\+0061 becomes 64 bytes, over 63"):
    normalizer_model.normalizer_model({"a": "b" * 64})
  with pytest.raises(ValueError, match="empty or holds a NUL"):
    normalizer_model.double_array_trie({b"a\x00": 1})


def test_the_trie_is_whole_blocks_of_units():
  trie = normalizer_model.double_array_trie({b"a": 1, b"ab": 2, b"\xc3\xa9": 3})
  assert trie.dtype == np.uint32 and len(trie) % 256 == 0
