#include "verify/field.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace strata::ff {
namespace {

uint64_t mulmod_any(uint64_t a, uint64_t b, uint64_t n) {
  return static_cast<uint64_t>(static_cast<u128>(a) * b % n);
}

uint64_t powmod_any(uint64_t a, uint64_t e, uint64_t n) {
  uint64_t r = 1 % n;
  a %= n;
  while (e) {
    if (e & 1) r = mulmod_any(r, a, n);
    a = mulmod_any(a, a, n);
    e >>= 1;
  }
  return r;
}

// ---- matmul ------------------------------------------------------------------------------
//
// Vectorization note: AVX2 has no 64×64→128-bit multiply (vpmuludq is 32×32→64), so a 62-bit
// modular product would take four vector multiplies plus carries per lane, which is no faster
// than the scalar 64×64→128 `mul`/`mulx` that retires one per cycle. The fast path is therefore
// scalar: products of residues < 2^62 fit in 124 bits, so up to 16 of them are summed in a raw
// 128-bit accumulator before one pseudo-Mersenne reduction, and a 2×2 register block keeps four
// independent accumulators in flight (instruction-level parallelism instead of SIMD lanes).
// Operands are packed into contiguous k-major panels (B transposed) for unit-stride loads.

constexpr int64_t kKBlock = 256;  // reduction-dimension block (panels stay in L1/L2)
constexpr int64_t kNBlock = 32;   // columns of B packed at a time (even)
constexpr int64_t kMBlock = 32;   // rows of A packed at a time (even)
constexpr int64_t kLazy = 16;     // products summed before a reduction (16 · 2^124 ≤ 2^128)

/// Σ_t a[t]·b[t] mod M::m over n terms for plain arrays.
template <class M>
uint64_t dot1(const uint64_t* a, const uint64_t* b, int64_t n) {
  uint64_t r = 0;
  for (int64_t t0 = 0; t0 < n; t0 += kLazy) {
    int64_t t1 = std::min(n, t0 + kLazy);
    u128 s = 0;
    for (int64_t t = t0; t < t1; ++t) s += static_cast<u128>(a[t]) * b[t];
    r = M::add(r, M::reduce(s));
  }
  return r;
}

/// The 2×2 register block: out = [a0·b0, a0·b1, a1·b0, a1·b1] over n terms, where a holds two
/// rows interleaved (a0[t] = a[2t], a1[t] = a[2t+1]) and b two columns likewise.
template <class M>
inline void dot2x2(const uint64_t* a, const uint64_t* b, int64_t n, uint64_t* out) {
  uint64_t r00 = 0, r01 = 0, r10 = 0, r11 = 0;
  for (int64_t t0 = 0; t0 < n; t0 += kLazy) {
    int64_t t1 = std::min(n, t0 + kLazy);
    u128 s00 = 0, s01 = 0, s10 = 0, s11 = 0;
    for (int64_t t = t0; t < t1; ++t) {
      uint64_t x0 = a[2 * t], x1 = a[2 * t + 1], y0 = b[2 * t], y1 = b[2 * t + 1];
      s00 += static_cast<u128>(x0) * y0;
      s01 += static_cast<u128>(x0) * y1;
      s10 += static_cast<u128>(x1) * y0;
      s11 += static_cast<u128>(x1) * y1;
    }
    r00 = M::add(r00, M::reduce(s00));
    r01 = M::add(r01, M::reduce(s01));
    r10 = M::add(r10, M::reduce(s10));
    r11 = M::add(r11, M::reduce(s11));
  }
  out[0] = r00;
  out[1] = r01;
  out[2] = r10;
  out[3] = r11;
}

/// One component plane of C = A·B (C's plane must start at zero).
template <class M>
void plane_matmul(const F2* A, int64_t lda, const F2* B, int64_t ldb, F2* C, int64_t ldc, int64_t m,
                  int64_t k, int64_t n, uint64_t F2::*comp) {
  // Packed panels hold pairs of rows (of A) or columns (of B) interleaved along k; an odd last
  // row or column is paired with zeros.
  thread_local std::vector<uint64_t> apack, bpack;
  apack.resize(kMBlock * kKBlock);
  bpack.resize(kNBlock * kKBlock);
  for (int64_t kb = 0; kb < k; kb += kKBlock) {
    int64_t kl = std::min(kKBlock, k - kb);
    for (int64_t ib = 0; ib < m; ib += kMBlock) {
      int64_t ml = std::min(kMBlock, m - ib);
      for (int64_t i = 0; i < ml; i += 2) {
        const F2* r0 = A + (ib + i) * lda + kb;
        const F2* r1 = i + 1 < ml ? r0 + lda : nullptr;
        uint64_t* dst = apack.data() + i * kl;
        for (int64_t t = 0; t < kl; ++t) {
          dst[2 * t] = r0[t].*comp;
          dst[2 * t + 1] = r1 ? r1[t].*comp : 0;
        }
      }
      for (int64_t jb = 0; jb < n; jb += kNBlock) {
        int64_t nl = std::min(kNBlock, n - jb);
        for (int64_t t = 0; t < kl; ++t) {
          const F2* row = B + (kb + t) * ldb + jb;
          for (int64_t j = 0; j < nl; j += 2) {
            uint64_t* dst = bpack.data() + j * kl + 2 * t;
            dst[0] = row[j].*comp;
            dst[1] = j + 1 < nl ? row[j + 1].*comp : 0;
          }
        }
        for (int64_t i = 0; i < ml; i += 2)
          for (int64_t j = 0; j < nl; j += 2) {
            uint64_t out[4];
            dot2x2<M>(apack.data() + i * kl, bpack.data() + j * kl, kl, out);
            for (int r = 0; r < 2 && i + r < ml; ++r)
              for (int c = 0; c < 2 && j + c < nl; ++c) {
                uint64_t& dst = C[(ib + i + r) * ldc + jb + j + c].*comp;
                dst = M::add(dst, out[2 * r + c]);
              }
          }
      }
    }
  }
}

}  // namespace

bool is_prime_u64(uint64_t n) {
  if (n < 2) return false;
  static const uint64_t small[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (uint64_t s : small) {
    if (n == s) return true;
    if (n % s == 0) return false;
  }
  uint64_t d = n - 1;
  int r = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++r;
  }
  // These twelve bases are a deterministic witness set for every n < 3.3·10^24 > 2^64.
  for (uint64_t a : small) {
    uint64_t x = powmod_any(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r; ++i) {
      x = mulmod_any(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

template <class M>
uint64_t from_double(double c) {
  if (!std::isfinite(c)) {
    uint64_t bits;
    std::memcpy(&bits, &c, sizeof bits);
    return mix64(bits) % M::m;
  }
  if (c == 0) return 0;
  int e = 0;
  double f = std::frexp(c, &e);                         // c = f·2^e with 0.5 ≤ |f| < 1
  auto mant = static_cast<int64_t>(std::ldexp(f, 53));  // exact: f has 53 significant bits
  e -= 53;
  uint64_t r = M::from_int(mant);
  uint64_t scale = e >= 0 ? M::pow(2, static_cast<uint64_t>(e))
                          : M::pow(M::inv(2), static_cast<uint64_t>(-static_cast<int64_t>(e)));
  return M::mul(r, scale);
}

template uint64_t from_double<ModP>(double);
template uint64_t from_double<ModQ>(double);

template <class M>
uint64_t dot(const uint64_t* a, const uint64_t* b, int64_t n) {
  return dot1<M>(a, b, n);
}

template uint64_t dot<ModP>(const uint64_t*, const uint64_t*, int64_t);
template uint64_t dot<ModQ>(const uint64_t*, const uint64_t*, int64_t);

void matmul(const F2* A, int64_t lda, const F2* B, int64_t ldb, F2* C, int64_t ldc, int64_t m,
            int64_t k, int64_t n, bool need_p, bool need_q) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) C[i * ldc + j] = F2(0, 0);
  if (need_p) plane_matmul<ModP>(A, lda, B, ldb, C, ldc, m, k, n, &F2::p);
  if (need_q) plane_matmul<ModQ>(A, lda, B, ldb, C, ldc, m, k, n, &F2::q);
}

}  // namespace strata::ff
