// A strong 64-bit mixing function for counter-based random streams and keyed hashing.
#pragma once

#include <cstdint>

namespace strata {

/// A bijective mixer of 64-bit words: every output bit depends on every input bit (an
/// xor-shift-multiply finalizer).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

/// The golden-ratio increment that spreads consecutive counters before mixing.
inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

}  // namespace strata
