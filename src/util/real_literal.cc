#include "util/real_literal.h"

#include <charconv>
#include <system_error>

namespace strata {
namespace {

bool digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

RealLiteral parse_real_literal(std::string_view text, double& value) {
  // Validate the grammar and find the decimal magnitude of the first non-zero digit, which
  // tells an overflow from an underflow when from_chars reports the value out of range.
  size_t i = 0, n = text.size();
  if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
  long long lead = 0;  // decimal exponent of the first non-zero digit, before the exponent part
  bool nonzero = false;
  size_t int_digits = 0, frac_digits = 0;
  for (; i < n && digit(text[i]); ++i, ++int_digits) {
    if (!nonzero && text[i] != '0') nonzero = true, lead = 0;
    if (nonzero) ++lead;
  }
  if (i < n && text[i] == '.') {
    ++i;
    for (; i < n && digit(text[i]); ++i, ++frac_digits)
      if (!nonzero && text[i] != '0') nonzero = true, lead = -static_cast<long long>(frac_digits);
  }
  if (int_digits + frac_digits == 0) return RealLiteral::Malformed;
  long long exponent = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative = i < n && text[i] == '-';
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    size_t first = i;
    for (; i < n && digit(text[i]); ++i)
      if (exponent < 1000000000) exponent = exponent * 10 + (text[i] - '0');
    if (i == first) return RealLiteral::Malformed;
    if (negative) exponent = -exponent;
  }
  if (i != n) return RealLiteral::Malformed;
  // from_chars takes no leading '+'.
  size_t start = text[0] == '+' ? 1 : 0;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data() + start, text.data() + n, v);
  if (ec == std::errc::result_out_of_range) {
    // The first non-zero digit stands for 10^(lead - 1 + exponent): lead counts the digits
    // from it to the point, or is -k when it is k + 1 places after the point. Out-of-range
    // values are beyond 1e308 or below 1e-324, so the sign of that power decides.
    return lead - 1 + exponent >= 0 ? RealLiteral::Overflow : RealLiteral::Underflow;
  }
  if (ec != std::errc() || end != text.data() + n) return RealLiteral::Malformed;
  value = v;
  return RealLiteral::Ok;
}

}  // namespace strata
