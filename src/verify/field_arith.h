// The finite-field value domain of the executor (docs/verifier.md): an Arith (see
// src/interp/elementwise.h) over pairs (a mod p, b mod q), one instance per random trial.
//
//  - add, sub, mul: componentwise; division multiplies by the Fermat inverse, with x/0 = 0 in
//    each field (a zero divisor in a needed component is recorded: see zero_division());
//  - exp in the Lax fragment: ω^b mod p for the trial's ω of order q; its q-component carries
//    no meaning and is left 0. An exp outside the fragment is opaque;
//  - opaque ops (algebra Opaque: sqrt, silu, gelu, relu, pow, the sqrt of rms_norm and
//    accum_rms_ld, and exp outside the fragment): a keyed pseudo-random function of the
//    p-component(s) of the argument(s), producing both components, so equal arguments give
//    equal results;
//  - scalars c = m·2^e (exact binary expansion) map to m·2^e in each field.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

#include "interp/value_domain.h"
#include "verify/content.h"
#include "verify/field.h"

namespace strata::verify {

/// The randomness of one trial: the key of the opaque functions and input streams, and ω.
struct FieldTrial {
  uint64_t key = 0;
  uint64_t omega = 1;  ///< a uniformly random element of order q in Z_p*
  /// pow_table[i][d] = ω^(d·256^i), so ω^e is a product of 8 table entries.
  std::array<std::array<uint64_t, 256>, 8> pow_table{};

  /// The trial `trial` of a verification seeded with `seed`; `attempt` > 0 draws fresh
  /// randomness for a trial that had to be repeated.
  static FieldTrial make(uint64_t seed, uint64_t trial, uint64_t attempt = 0);
  /// ω^e mod p.
  uint64_t pow_omega(uint64_t e) const {
    uint64_t r = 1;
    for (int i = 0; e != 0; ++i, e >>= 8)
      if (e & 0xff) r = ff::ModP::mul(r, pow_table[i][e & 0xff]);
    return r;
  }
  /// The key of the random stream of graph input `input` (element i is uniform(key, i)).
  uint64_t input_key(int input, bool q_component) const {
    return mix64(key ^ mix64(0x1000 + 2 * static_cast<uint64_t>(input) + (q_component ? 1 : 0)));
  }
};

class FieldArith {
 public:
  using Value = ff::F2;

  explicit FieldArith(const FieldTrial& trial) : t_(trial) {}

  Value zero() const { return {0, 0}; }
  Value from_int(int64_t n) const { return {ff::ModP::from_int(n), ff::ModQ::from_int(n)}; }
  /// An exact constant as m·2^e in each field; any other scalar as its symbol: a random
  /// field element keyed by the trial and the scalar's bits (content.h, exact_constant).
  Value from_scalar(double c) const {
    if (exact_constant(c)) return {ff::from_double<ff::ModP>(c), ff::from_double<ff::ModQ>(c)};
    return keyed(OpKind::MulScalar, std::bit_cast<uint64_t>(c), kSymbolSalt);
  }
  Value add(Value a, Value b) const { return {ff::ModP::add(a.p, b.p), ff::ModQ::add(a.q, b.q)}; }
  Value sub(Value a, Value b) const { return {ff::ModP::sub(a.p, b.p), ff::ModQ::sub(a.q, b.q)}; }
  Value mul(Value a, Value b) const { return {ff::ModP::mul(a.p, b.p), ff::ModQ::mul(a.q, b.q)}; }
  Value prepare_divisor(Value b, const interp::ValueHints& h) const {
    Value r(0, 0);
    if (h.need_p) {
      if (b.p == 0) zero_division_.store(true, std::memory_order_relaxed);
      r.p = ff::ModP::inv(b.p);
    }
    if (h.need_q) {
      if (b.q == 0) zero_division_.store(true, std::memory_order_relaxed);
      r.q = ff::ModQ::inv(b.q);
    }
    return r;
  }
  Value div_prepared(Value a, Value b) const { return mul(a, b); }
  Value exp(Value x, bool lax) const {
    if (!lax) return opaque(OpKind::Exp, x);
    return {t_.pow_omega(x.q), 0};
  }
  /// A keyed function of the p-component; an op's scalar attributes (clamp's bounds) are part
  /// of the key, so different bounds give different functions.
  Value opaque(OpKind kind, Value x, const OpAttrs& a = OpAttrs{}) const {
    uint64_t k = kind == OpKind::Clamp ? mix64(std::bit_cast<uint64_t>(a.scalar)) ^
                                             mix64(std::bit_cast<uint64_t>(a.scalar2) + 1)
                                       : 0;
    return keyed(kind, x.p, k);
  }
  Value opaque2(OpKind kind, Value a, Value b) const { return keyed(kind, a.p, mix64(b.p) + 1); }
  /// Max reductions: max(x_1..x_n) = G(Σ_j F(x_j)) with F and G keyed functions of the
  /// p-component — a keyed symmetric function of the multiset {x_j}: equal multisets give
  /// equal results, different ones collide with probability about 1/p (docs/verifier.md).
  Value max_identity() const { return {0, 0}; }
  Value max_premap(Value x) const { return keyed(OpKind::Max, x.p, kMaxPremapSalt); }
  Value max_combine(Value a, Value b) const { return add(a, b); }
  Value max_finish(Value s) const { return keyed(OpKind::Max, s.p, kMaxFinishSalt); }
  void matmul(const Value* A, int64_t lda, const Value* B, int64_t ldb, Value* C, int64_t ldc,
              int64_t m, int64_t k, int64_t n, const interp::ValueHints& h) const {
    ff::matmul(A, lda, B, ldb, C, ldc, m, k, n, h.need_p, h.need_q);
  }

  /// True if some needed component of a divisor was 0 (so x/0 = 0 was used) since construction.
  bool zero_division() const { return zero_division_.load(std::memory_order_relaxed); }

 private:
  Value keyed(OpKind kind, uint64_t a, uint64_t b) const {
    uint64_t salt = mix64(t_.key + kGolden * (static_cast<uint64_t>(kind) + 1));
    uint64_t h1 = mix64(salt ^ mix64(a ^ mix64(b ^ salt)));
    uint64_t h2 = mix64(h1 + kGolden);
    uint64_t p = h1 >> 2, q = h2 >> 3;
    return {p >= ff::kP ? p - ff::kP : p, q >= ff::kQ ? q - ff::kQ : q};
  }

  static constexpr uint64_t kSymbolSalt = 0x73796d626f6c2d63ull;
  static constexpr uint64_t kMaxPremapSalt = 0x6d61785f70726531ull;
  static constexpr uint64_t kMaxFinishSalt = 0x6d61785f66696e31ull;

  const FieldTrial& t_;
  mutable std::atomic<bool> zero_division_{false};
};

}  // namespace strata::verify
