// bfloat16 as the upper half of a float32's bits, for the package's C++ kernels.

#ifndef OFFICIAL_BERT_OPS_BFLOAT16_BITS_H_
#define OFFICIAL_BERT_OPS_BFLOAT16_BITS_H_

#include <cstdint>
#include <cstring>

namespace official_bert {

inline float FromBfloat16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// Rounds to nearest, ties to even, as `tf.cast` does, and keeps NaNs NaN. Without branches, so
// that loops over it vectorize.
inline uint16_t ToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  // Adding 0x7fff plus the lowest kept bit carries into the kept half exactly when the dropped
  // half is above one half, or is one half and the kept half odd.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  // A NaN would round into the sign bit or to infinity: kept a (quiet) NaN instead.
  const uint32_t nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace official_bert

#endif  // OFFICIAL_BERT_OPS_BFLOAT16_BITS_H_
