// Tests of the verifier's finite fields: the moduli, reduction, inverses, ω, scalars and the
// matmul fast path.
#include <gtest/gtest.h>

#include <random>

#include "verify/field.h"
#include "verify/field_arith.h"

namespace strata::ff {
namespace {

TEST(Field, ModuliArePrimeAndPIsTwoQPlusOne) {
  EXPECT_TRUE(is_prime_u64(kP));
  EXPECT_TRUE(is_prime_u64(kQ));
  EXPECT_EQ(kP, (uint64_t{1} << 62) - 10565);
  EXPECT_EQ(kQ, (kP - 1) / 2);
  // The Miller–Rabin test itself: known primes, composites and strong pseudoprimes.
  EXPECT_TRUE(is_prime_u64(2));
  EXPECT_TRUE(is_prime_u64((uint64_t{1} << 61) - 1));  // Mersenne prime
  EXPECT_TRUE(is_prime_u64(18446744073709551557ull));  // largest 64-bit prime
  EXPECT_FALSE(is_prime_u64(1));
  EXPECT_FALSE(is_prime_u64(561));                      // Carmichael number
  EXPECT_FALSE(is_prime_u64(3215031751ull));            // strong pseudoprime to 2, 3, 5, 7
  EXPECT_FALSE(is_prime_u64((uint64_t{1} << 62) - 1));  // 3 · …
  EXPECT_FALSE(is_prime_u64(uint64_t{4294967291} * 4294967279ull));  // product of two primes
}

template <class M>
void check_reduce(std::mt19937_64& rng) {
  std::vector<u128> xs = {0,
                          1,
                          M::m - 1,
                          M::m,
                          M::m + 1,
                          u128(M::m) * M::m,
                          u128(M::m - 1) * (M::m - 1),
                          ~u128(0),
                          u128(1) << 64,
                          (u128(1) << 64) - 1,
                          u128(M::mask) << 64,
                          u128(M::mask) * M::mask};
  for (int i = 0; i < 20000; ++i) {
    u128 x = (u128(rng()) << 64) | rng();
    xs.push_back(x);
    xs.push_back(x >> (rng() % 128));
  }
  for (u128 x : xs) ASSERT_EQ(M::reduce(x), static_cast<uint64_t>(x % M::m));
  for (int i = 0; i < 20000; ++i) {
    uint64_t a = rng() % M::m, b = rng() % M::m;
    ASSERT_EQ(M::mul(a, b), static_cast<uint64_t>(u128(a) * b % M::m));
    ASSERT_EQ(M::add(a, b), static_cast<uint64_t>((u128(a) + b) % M::m));
    ASSERT_EQ(M::sub(a, b), static_cast<uint64_t>((u128(a) + M::m - b) % M::m));
  }
}

TEST(Field, PseudoMersenneReductionMatchesInt128Modulo) {
  std::mt19937_64 rng(7);
  check_reduce<ModP>(rng);
  check_reduce<ModQ>(rng);
}

TEST(Field, InversesAndSignedIntegers) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    uint64_t a = 1 + rng() % (kP - 1), b = 1 + rng() % (kQ - 1);
    EXPECT_EQ(ModP::mul(a, ModP::inv(a)), 1u);
    EXPECT_EQ(ModQ::mul(b, ModQ::inv(b)), 1u);
  }
  EXPECT_EQ(ModP::inv(0), 0u);  // x/0 = 0 by definition
  EXPECT_EQ(ModP::from_int(-1), kP - 1);
  EXPECT_EQ(ModQ::from_int(-5), kQ - 5);
  EXPECT_EQ(ModP::add(ModP::from_int(INT64_MIN), ModP::from_int(INT64_MAX)), kP - 1);
}

TEST(Field, ScalarsMapToTheirExactRationalValue) {
  uint64_t half = ModP::inv(2);
  EXPECT_EQ(from_double<ModP>(0.5), half);
  EXPECT_EQ(from_double<ModP>(3.0), 3u);
  EXPECT_EQ(from_double<ModP>(-0.25), ModP::neg(ModP::inv(4)));
  EXPECT_EQ(from_double<ModQ>(0.0), 0u);
  // Exact products of doubles map to products of the mapped values.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    double a = static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000) * 0x1p-12;
    double b = static_cast<double>(static_cast<int64_t>(rng() % 4001) - 2000) * 0x1p-7;
    EXPECT_EQ(from_double<ModP>(a * b), ModP::mul(from_double<ModP>(a), from_double<ModP>(b)));
    EXPECT_EQ(from_double<ModQ>(a + b), ModQ::add(from_double<ModQ>(a), from_double<ModQ>(b)));
  }
  EXPECT_EQ(from_double<ModP>(0x1p-1074), ModP::pow(half, 1074));  // smallest subnormal
}

TEST(Field, OmegaHasOrderQ) {
  for (uint64_t trial = 0; trial < 8; ++trial) {
    verify::FieldTrial t = verify::FieldTrial::make(42, trial);
    EXPECT_NE(t.omega, 1u);
    EXPECT_EQ(ModP::pow(t.omega, kQ), 1u);  // q prime and ω ≠ 1: the order is exactly q
    std::mt19937_64 rng(trial);
    for (int i = 0; i < 100; ++i) {
      uint64_t e = rng() % kQ;
      EXPECT_EQ(t.pow_omega(e), ModP::pow(t.omega, e));
    }
  }
  EXPECT_NE(verify::FieldTrial::make(42, 0).omega, verify::FieldTrial::make(42, 1).omega);
  EXPECT_NE(verify::FieldTrial::make(42, 0).omega, verify::FieldTrial::make(43, 0).omega);
}

TEST(Field, UniformStaysInRange) {
  for (uint64_t i = 0; i < 100000; ++i) {
    ASSERT_LT(uniform<ModP>(9, i), kP);
    ASSERT_LT(uniform<ModQ>(9, i), kQ);
  }
  EXPECT_NE(uniform<ModP>(9, 0), uniform<ModP>(9, 1));
  EXPECT_EQ(uniform<ModP>(9, 5), uniform<ModP>(9, 5));
}

TEST(FieldArith, ExpOpaqueFunctionsAndZeroDivisors) {
  verify::FieldTrial t = verify::FieldTrial::make(5, 0);
  verify::FieldArith ar(t);
  F2 x(12345, 678), same_p(12345, 999), other(12346, 678);
  // exp in the Lax fragment reads the q-component: ω^b.
  EXPECT_EQ(ar.exp(x, true).p, ModP::pow(t.omega, 678));
  EXPECT_EQ(ar.exp(x, true).p, ar.exp(other, true).p);
  // Opaque functions are keyed by op kind and the argument's p-component only.
  EXPECT_EQ(ar.opaque(OpKind::Sqrt, x), ar.opaque(OpKind::Sqrt, same_p));
  EXPECT_NE(ar.opaque(OpKind::Sqrt, x).p, ar.opaque(OpKind::Sqrt, other).p);
  EXPECT_NE(ar.opaque(OpKind::Sqrt, x).p, ar.opaque(OpKind::Silu, x).p);
  EXPECT_EQ(ar.exp(x, false), ar.opaque(OpKind::Exp, x));
  EXPECT_NE(ar.opaque2(OpKind::Pow, x, other).p, ar.opaque2(OpKind::Pow, other, x).p);
  F2 h = ar.opaque(OpKind::Gelu, x);
  EXPECT_LT(h.p, kP);
  EXPECT_LT(h.q, kQ);
  // A fresh trial keys the functions differently.
  verify::FieldTrial t2 = verify::FieldTrial::make(5, 1);
  verify::FieldArith ar2(t2);
  EXPECT_NE(ar.opaque(OpKind::Sqrt, x).p, ar2.opaque(OpKind::Sqrt, x).p);
  // Division: a / b = a · b⁻¹; a zero divisor in a needed component is recorded.
  interp::ValueHints only_p;
  only_p.need_q = false;
  F2 q = ar.div_prepared(F2(10, 10), ar.prepare_divisor(F2(4, 0), only_p));
  EXPECT_EQ(q.p, ModP::mul(10, ModP::inv(4)));
  EXPECT_FALSE(ar.zero_division());
  (void)ar.prepare_divisor(F2(4, 0), interp::ValueHints{});
  EXPECT_TRUE(ar.zero_division());
}

TEST(Field, MatmulFastPathMatchesNaive) {
  std::mt19937_64 rng(5);
  struct Case {
    int64_t m, k, n;
  };
  for (Case c : {Case{1, 1, 1}, Case{5, 37, 7}, Case{16, 300, 33}, Case{33, 513, 65},
                 Case{2, 16, 2}, Case{3, 17, 1}}) {
    int64_t lda = c.k + 3, ldb = c.n + 2, ldc = c.n + 1;
    std::vector<F2> A(c.m * lda), B(c.k * ldb), C(c.m * ldc, F2{7, 7});
    for (auto& x : A) x = {rng() % kP, rng() % kQ};
    for (auto& x : B) x = {rng() % kP, rng() % kQ};
    for (int planes = 1; planes <= 3; ++planes) {
      bool np = planes & 1, nq = planes & 2;
      matmul(A.data(), lda, B.data(), ldb, C.data(), ldc, c.m, c.k, c.n, np, nq);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          uint64_t sp = 0, sq = 0;
          for (int64_t t = 0; t < c.k; ++t) {
            sp = ModP::add(sp, ModP::mul(A[i * lda + t].p, B[t * ldb + j].p));
            sq = ModQ::add(sq, ModQ::mul(A[i * lda + t].q, B[t * ldb + j].q));
          }
          ASSERT_EQ(C[i * ldc + j].p, np ? sp : 0) << c.m << "x" << c.k << "x" << c.n;
          ASSERT_EQ(C[i * ldc + j].q, nq ? sq : 0) << c.m << "x" << c.k << "x" << c.n;
        }
    }
  }
  // The dot kernel on values at the top of the range (the lazy 128-bit sums must not overflow).
  std::vector<uint64_t> a(1000, kP - 1), b(1000, kP - 1);
  uint64_t want = ModP::mul(ModP::mul(kP - 1, kP - 1), 1000);
  EXPECT_EQ(dot<ModP>(a.data(), b.data(), 1000), want);
}

}  // namespace
}  // namespace strata::ff
