// The exact constant factor of a formal value in the verifier's coefficient analysis
// (docs/verifier.md §4.2, "Coefficient sizes").
//
// The analysis writes every value as κ·Ñ/D̃ with Ñ, D̃ polynomials with integer coefficients
// and κ a positive rational kept exactly as a Content: κ = 2^e·u/v with u, v odd and coprime.
// Invariant: every prime factor of u and of v is below 2^60, because u and v only ever hold
// products of scalar mantissas (below 2^53) and of extents below 2^60. Since the verifier's
// moduli p and q are above 2^60, κ is a unit modulo both, so κ·Ñ vanishes modulo p exactly
// when Ñ does: only the integer polynomials' coefficients can be divisible by p or q, and
// their sizes are what the analysis bounds.
#pragma once

#include <cstdint>
#include <optional>

namespace strata::verify {

/// Odd parts of a scalar's mantissa below this make an exact constant (below).
inline constexpr uint64_t kExactConstantOddLimit = uint64_t{1} << 20;

/// Whether the verifier evaluates the scalar c exactly (as m·2^e in each field): 0, and finite
/// values whose odd mantissa part is below 2^20 (integers up to about a million, halves,
/// quarters, 0.125, 1.5, …). Every other scalar (0.1, 1/√128, an eps of 1e-5) is a *symbolic
/// constant*: an independent random field element per distinct value and trial, the same in
/// both graphs (docs/verifier.md, "Constants"). Equivalence is then proved for every value of
/// the symbol — a stronger statement, which needs no bound on the integers a long mantissa
/// would bring into the coefficients.
bool exact_constant(double c);

struct Content {
  int64_t e = 0;   ///< power of two
  uint64_t u = 1;  ///< odd numerator, prime factors below 2^60
  uint64_t v = 1;  ///< odd denominator, prime factors below 2^60, coprime to u

  bool operator==(const Content&) const = default;

  double log2_u() const;
  double log2_v() const;
  Content inverse() const { return {-e, v, u}; }

  /// |c| for a finite non-zero double c (exactly: its 53-bit mantissa and binary exponent);
  /// nullopt for 0 and for non-finite c.
  static std::optional<Content> of_scalar(double c);
  /// n ≥ 1 exactly; nullopt when n < 1 or the odd part of n is not below 2^60.
  static std::optional<Content> of_int(int64_t n);
  /// a·b in lowest terms; nullopt when an odd part would not fit below 2^63.
  static std::optional<Content> product(const Content& a, const Content& b);
};

}  // namespace strata::verify
