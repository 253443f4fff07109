// strata device runtime: vector loads and stores of N consecutive elements converted from / to
// f32, for shared or global memory.
//
// Preconditions: p is aligned to min(16, N * sizeof(T)) bytes and N * sizeof(T) is 2, 4, 8 or
// a multiple of 16 (each access moves at most 16 bytes).
#pragma once

#include "strata_rt/copy.cuh"
#include "strata_rt/core.cuh"

namespace strata_rt {

/// Bytes moved by one access of load_f32 / store_f32.
template <int N, class T>
struct VecChunk {
  static constexpr int kBytes =
      N * static_cast<int>(sizeof(T)) >= 16 ? 16 : N * static_cast<int>(sizeof(T));
  static constexpr int kPer = kBytes / static_cast<int>(sizeof(T));
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16, "2 to 16 bytes");
  static_assert(N % kPer == 0, "whole chunks");
};

/// v[j] = p[j] widened to f32, j < N.
template <int N, class T>
STRATA_DEVICE void load_f32(const T* p, float (&v)[N]) {
  using C = VecChunk<N, T>;
#pragma unroll
  for (int c = 0; c < N / C::kPer; ++c) {
    __align__(16) T chunk[C::kPer];
    copy_sync<C::kBytes>(chunk, p + c * C::kPer);
#pragma unroll
    for (int j = 0; j < C::kPer; ++j) v[c * C::kPer + j] = to_f32(chunk[j]);
  }
}

/// p[j] = v[j] narrowed to T, j < N.
template <int N, class T>
STRATA_DEVICE void store_f32(T* p, const float (&v)[N]) {
  using C = VecChunk<N, T>;
#pragma unroll
  for (int c = 0; c < N / C::kPer; ++c) {
    __align__(16) T chunk[C::kPer];
#pragma unroll
    for (int j = 0; j < C::kPer; ++j) chunk[j] = from_f32<T>(v[c * C::kPer + j]);
    copy_sync<C::kBytes>(p + c * C::kPer, chunk);
  }
}

}  // namespace strata_rt
