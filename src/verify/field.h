// The finite fields of the verifier (docs/verifier.md).
//
// p = 2^62 − 10565 and q = (p − 1)/2 = 2^61 − 5283 are both prime (checked by field_test), so
// p = 2q + 1: the multiplicative group Z_p* has a subgroup of order q (the quadratic residues),
// whose elements ≠ 1 all have order q. A verifier value is a pair (a mod p, b mod q).
//
// Both moduli have the pseudo-Mersenne form m = 2^B − c with c < 2^14, so a 128-bit x reduces
// by folding: x = h·2^B + l ≡ h·c + l (mod m). Every function here returns canonical residues
// in [0, m) given canonical inputs; reduce() accepts any x < 2^128.
#pragma once

#include <cstdint>

#include "util/mix.h"

namespace strata::ff {

using u128 = unsigned __int128;

/// Arithmetic modulo m = 2^Bits − C (Bits ∈ {61, 62}, C < 2^14).
template <int Bits, uint64_t C>
struct Mod {
  static constexpr uint64_t m = (uint64_t{1} << Bits) - C;
  static constexpr uint64_t mask = (uint64_t{1} << Bits) - 1;
  /// 2^64 mod m = 2^(64−Bits)·C, small enough that H·k64 + L < 2^81 for 64-bit H, L.
  static constexpr uint64_t k64 = (uint64_t{1} << (64 - Bits)) * C;

  /// x mod m for any x < 2^128.
  static uint64_t reduce(u128 x) {
    uint64_t hi = static_cast<uint64_t>(x >> 64), lo = static_cast<uint64_t>(x);
    u128 t = static_cast<u128>(hi) * k64 + lo;                  // ≡ x, t < 2^81
    uint64_t t_hi = static_cast<uint64_t>(t >> Bits);           // < 2^20
    uint64_t r = t_hi * C + (static_cast<uint64_t>(t) & mask);  // < 2^Bits + 2^34 < 2m
    return r >= m ? r - m : r;
  }
  static uint64_t add(uint64_t a, uint64_t b) {
    uint64_t s = a + b;
    return s >= m ? s - m : s;
  }
  static uint64_t sub(uint64_t a, uint64_t b) { return a >= b ? a - b : a + m - b; }
  static uint64_t neg(uint64_t a) { return a == 0 ? 0 : m - a; }
  static uint64_t mul(uint64_t a, uint64_t b) { return reduce(static_cast<u128>(a) * b); }
  static uint64_t pow(uint64_t a, uint64_t e) {
    uint64_t r = 1;
    while (e) {
      if (e & 1) r = mul(r, a);
      a = mul(a, a);
      e >>= 1;
    }
    return r;
  }
  /// Multiplicative inverse by Fermat (a^(m−2)); inv(0) = 0.
  static uint64_t inv(uint64_t a) { return pow(a, m - 2); }
  /// n mod m for a signed integer.
  static uint64_t from_int(int64_t n) {
    if (n >= 0) return static_cast<uint64_t>(n) % m;
    uint64_t r = (static_cast<uint64_t>(-(n + 1)) + 1) % m;
    return neg(r);
  }
};

using ModP = Mod<62, 10565>;
using ModQ = Mod<61, 5283>;
inline constexpr uint64_t kP = ModP::m;
inline constexpr uint64_t kQ = ModQ::m;
static_assert(kP == 2 * kQ + 1, "p = 2q + 1");

/// One verifier value: a residue mod p and a residue mod q. Default construction leaves it
/// uninitialized, so that large tensors are not zero-filled (pages never written are never
/// touched); write F2(0, 0) for zero.
struct F2 {
  uint64_t p, q;
  F2() noexcept {}  // NOLINT: deliberately uninitialized
  constexpr F2(uint64_t p_, uint64_t q_) noexcept : p(p_), q(q_) {}
  bool operator==(const F2& o) const { return p == o.p && q == o.q; }
};

/// Deterministic Miller–Rabin primality test, exact for every 64-bit n.
bool is_prime_u64(uint64_t n);

/// Maps a rational scalar exactly into Z_m: a finite double c = mant·2^e (53-bit mant) becomes
/// mant·(2^e mod m). Non-finite c has no rational value and maps to a fixed hash of its bits.
template <class M>
uint64_t from_double(double c);

/// A uniformly random residue in [0, m) determined by (key, counter): rejection sampling over a
/// counter-based stream, so any element can be drawn independently of the others.
template <class M>
inline uint64_t uniform(uint64_t key, uint64_t counter) {
  uint64_t x = mix64(key + counter * kGolden);
  for (;;) {
    uint64_t r = (x >> 2) & M::mask;
    if (r < M::m) return r;
    x = mix64(x + kGolden);
  }
}

/// C[i·ldc + j] = Σ_t A[i·lda + t]·B[t·ldb + j] over the fields, for 0 ≤ i < m, 0 ≤ j < n:
/// the p-components when need_p, the q-components when need_q (the others are left as 0).
/// Single-threaded; callers split work over disjoint blocks of C.
void matmul(const F2* A, int64_t lda, const F2* B, int64_t ldb, F2* C, int64_t ldc, int64_t m,
            int64_t k, int64_t n, bool need_p, bool need_q);

/// Σ_t a[t]·b[t] mod M::m for plain residue arrays (the inner kernel of matmul, exposed for
/// tests).
template <class M>
uint64_t dot(const uint64_t* a, const uint64_t* b, int64_t n);

}  // namespace strata::ff
