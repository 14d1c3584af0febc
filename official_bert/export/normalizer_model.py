"""A model for tf.text's `FastBertNormalizer` that applies the original BERT's rules.

`FastBertNormalizer` is the only text normalizer with a LiteRT kernel, and it reads its rules from
a model: a per-character table. The table it builds for itself deletes some characters the
original keeps and folds others as NFKC case folding does ("µ" becomes "μ", "ﬁ" becomes "fi", a
soft hyphen splits a word), so its tokens differ from `FullTokenizer`'s on real text. This module
writes the table from `tokenization.character_replacements` instead, in the model's own format
(facts of tf.text's `fast_bert_normalizer_model.fbs`):

- a FlatBuffers table `{lower_case_nfd_strip_accents: bool, trie_array: [uint32],
  data_for_codepoint_zero: int32, normalized_string_pool: [ubyte]}`;
- `trie_array`, a double-array trie in darts-clone's layout, maps the UTF-8 bytes of each changed
  character to its data: bit 30 set, the replacement's byte length in bits 0-5 and its offset in
  the string pool in bits 6-29;
- NUL, which the trie cannot hold, has its data in `data_for_codepoint_zero`.

    normalizer = tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(True))
    normalizer.normalize(tf.constant(["µGuru"]))  # [b"\xc2\xb5guru"]: "µguru", as FullTokenizer
"""

import functools

import flatbuffers
import numpy as np

from official_bert import tokenization

_CHANGED = 1 << 30
_LENGTH_BITS = 6
_MAX_LENGTH = (1 << _LENGTH_BITS) - 1
_MAX_OFFSET = (1 << (30 - _LENGTH_BITS)) - 1
# darts-clone's unit: a leaf holds its value with bit 31 set (so no byte label matches it); an inner
# unit holds its label in bits 0-7, "has a leaf child" in bit 8 and the XOR offset to its children
# in bits 10-30 (bit 9 would scale the offset by 256, which tables this small never need).
_LEAF = 1 << 31
_HAS_LEAF = 1 << 8
_OFFSET_SHIFT = 10
_MAX_UNITS = 1 << 21
# How far back a node's children are placed: a bound on the build's time, not on the table.
_SEARCH_UNITS = 4 * 256


@functools.cache
def bert_normalizer_model(do_lower_case):
  """The `FastBertNormalizer` model (bytes) of the original's per-character rules.

  Args:
    do_lower_case: whether to lower-case and strip accents (the uncased models).

  Returns:
    The FlatBuffers model, for `tf_text.FastBertNormalizer(model_buffer=...)`.
  """
  return normalizer_model(tokenization.character_replacements(do_lower_case), do_lower_case)


def normalizer_model(replacements, lower_case_flag=False):
  """A `FastBertNormalizer` model that replaces characters as `replacements` says.

  Args:
    replacements: dict from single characters to what each becomes (`""` deletes it); every
      other character is kept.
    lower_case_flag: the model's `lower_case_nfd_strip_accents` field, which only records what
      the table does (the kernel reads the table alone).

  Returns:
    The FlatBuffers model (bytes).
  """
  pool, offsets, data = bytearray(), {}, {}
  for char, new in replacements.items():
    if len(char) != 1:
      raise ValueError(f"{char!r} is not one character.")
    value = new.encode("utf-8")
    if len(value) > _MAX_LENGTH:
      raise ValueError(f"U+{ord(char):04X} becomes {len(value)} bytes, over {_MAX_LENGTH}.")
    if value not in offsets:
      offsets[value] = len(pool)
      pool += value
    if offsets[value] > _MAX_OFFSET:
      raise ValueError(f"The replacement pool is over {_MAX_OFFSET} bytes.")
    data[char.encode("utf-8")] = _CHANGED | (offsets[value] << _LENGTH_BITS) | len(value)
  zero = data.pop(b"\x00", 0)
  return _flatbuffer(lower_case_flag, double_array_trie(data), zero, bytes(pool))


def double_array_trie(values):
  """Builds a double-array trie in darts-clone's layout.

  A lookup walks from unit 0: the child of the unit at `i` for byte `b` is at
  `i ^ offset(unit[i]) ^ b`, and it is a child only when its label is `b`; a key's value sits in
  the leaf at `i ^ offset(unit[i])` of the unit `i` its last byte reaches.

  Args:
    values: dict from non-empty keys (bytes without NUL) to values in `[0, 2**31)`.

  Returns:
    The units, a uint32 numpy array whose length is a multiple of 256.
  """
  root = {}
  for key, value in values.items():
    if not key or 0 in key:
      raise ValueError(f"Key {key!r} is empty or holds a NUL byte.")
    node = root
    for byte in key:
      node = node.setdefault(byte, {})
    node[0] = value  # The leaf: label 0, which no key byte has.
  units, used, bases = [0] * 256, bytearray(256), set()
  used[0] = 1
  first_free = 1
  pending = [(0, root)]  # (unit index, children by label)
  while pending:
    index, children = pending.pop()
    labels = sorted(children)
    while first_free < len(used) and used[first_free]:
      first_free += 1
    base = _free_base(labels, used, bases, first_free)
    if base is None:  # A new block of 256 units; every base in it is free.
      base = len(used)
      units += [0] * 256
      used += bytearray(256)
      if len(used) > _MAX_UNITS:
        raise ValueError(f"The trie needs over {_MAX_UNITS} units.")
    bases.add(base)
    units[index] |= ((index ^ base) << _OFFSET_SHIFT) | (_HAS_LEAF if 0 in children else 0)
    for label in labels:
      used[base ^ label] = 1
      if label == 0:
        units[base] = _LEAF | children[0]
      else:
        units[base ^ label] = label
        pending.append((base ^ label, children[label]))
  return np.array(units, np.uint32)


def _free_base(labels, used, bases, first_free):
  """A base for children `labels` among the units in use: all `base ^ label` free, `base` not
  another node's; searched over the last blocks only, or None."""
  for position in range(max(first_free, len(used) - _SEARCH_UNITS), len(used)):
    if used[position]:
      continue
    # `base ^ label` stays in the block of 256 units of `position`, inside the array.
    base = position ^ labels[0]
    if base not in bases and not any(used[base ^ label] for label in labels[1:]):
      return base
  return None


def _flatbuffer(do_lower_case, trie, zero, pool):
  """The `FastBertNormalizerModel` table, its fields in the schema's order."""
  builder = flatbuffers.Builder(4 * len(trie) + len(pool) + 64)
  pool_vector = builder.CreateNumpyVector(np.frombuffer(pool, np.uint8))
  trie_vector = builder.CreateNumpyVector(trie)
  builder.StartObject(4)
  builder.PrependBoolSlot(0, do_lower_case, False)
  builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
  builder.PrependInt32Slot(2, zero, 0)
  builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
  builder.Finish(builder.EndObject())
  return bytes(builder.Output())
