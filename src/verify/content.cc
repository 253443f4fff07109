#include "verify/content.h"

#include <cmath>
#include <numeric>

namespace strata::verify {
namespace {

/// Splits n > 0 into 2^e·odd.
std::pair<int64_t, uint64_t> split_two(uint64_t n) {
  int64_t e = 0;
  while ((n & 1) == 0) {
    n >>= 1;
    ++e;
  }
  return {e, n};
}

constexpr uint64_t kOddLimit = uint64_t{1} << 60;  // prime factors of u, v stay below this
constexpr uint64_t kProductLimit = uint64_t{1} << 63;

}  // namespace

double Content::log2_u() const {
  return std::log2(static_cast<double>(u));
}

double Content::log2_v() const {
  return std::log2(static_cast<double>(v));
}

bool exact_constant(double c) {
  if (c == 0) return true;
  if (!std::isfinite(c)) return false;
  int exp2 = 0;
  double f = std::frexp(std::fabs(c), &exp2);
  auto mant = static_cast<uint64_t>(std::ldexp(f, 53));
  return split_two(mant).second < kExactConstantOddLimit && exp2 > -900 && exp2 < 900;
}

std::optional<Content> Content::of_scalar(double c) {
  if (!std::isfinite(c) || c == 0) return std::nullopt;
  int exp2 = 0;
  double f = std::frexp(std::fabs(c), &exp2);            // |c| = f·2^exp2, 0.5 ≤ f < 1
  auto mant = static_cast<uint64_t>(std::ldexp(f, 53));  // exact: 53 significant bits
  auto [e, odd] = split_two(mant);
  return Content{e + exp2 - 53, odd, 1};
}

std::optional<Content> Content::of_int(int64_t n) {
  if (n < 1) return std::nullopt;
  auto [e, odd] = split_two(static_cast<uint64_t>(n));
  if (odd >= kOddLimit) return std::nullopt;
  return Content{e, odd, 1};
}

std::optional<Content> Content::product(const Content& a, const Content& b) {
  // Cross-cancel first, so that the result is in lowest terms.
  uint64_t g1 = std::gcd(a.u, b.v), g2 = std::gcd(b.u, a.v);
  uint64_t u1 = a.u / g1, v2 = b.v / g1, u2 = b.u / g2, v1 = a.v / g2;
  unsigned __int128 u = static_cast<unsigned __int128>(u1) * u2;
  unsigned __int128 v = static_cast<unsigned __int128>(v1) * v2;
  if (u >= kProductLimit || v >= kProductLimit) return std::nullopt;
  return Content{a.e + b.e, static_cast<uint64_t>(u), static_cast<uint64_t>(v)};
}

}  // namespace strata::verify
