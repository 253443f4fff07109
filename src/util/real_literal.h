// Decimal real literals of the input formats (.strata numbers, JSON numbers) to doubles.
//
// Contract: a literal becomes the nearest double (subnormal values included) or is refused;
// it never silently becomes ±infinity or zero. Locale-independent (std::from_chars).
#pragma once

#include <string_view>

namespace strata {

enum class RealLiteral {
  Ok,         ///< `value` is the nearest double
  Overflow,   ///< beyond the largest double (about 1.8e308 in magnitude)
  Underflow,  ///< not zero, but below the smallest subnormal (about 4.9e-324): it would be 0
  Malformed,  ///< not a decimal number: [sign] digits [. digits] [e|E [sign] digits]
};

/// Parses `text` (the whole of it; a leading '+' is allowed) into `value`.
RealLiteral parse_real_literal(std::string_view text, double& value);

}  // namespace strata
