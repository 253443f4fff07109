// strata device runtime: warp-shuffle and block-wide reductions (sums and maxima: the two
// combines of the reduction family, op_table.def).
//
// A "team" is an aligned group of L consecutive lanes of one warp (L a power of two ≤ 32).
// All 32 lanes of a warp must call team_sum together (the shuffles use the full mask); lanes
// with nothing to contribute pass 0.
#pragma once

#include "strata_rt/core.cuh"
#include "strata_rt/math.cuh"
#include "strata_rt/sync.cuh"

namespace strata_rt {

/// v from lane (this lane XOR mask) of the same warp.
STRATA_DEVICE float shfl_xor(float v, int mask) {
#if defined(STRATA_RT_EMULATE)
  return emu::shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

/// Sum of v over the team of L lanes containing this lane; every lane of the team gets it.
template <int L>
STRATA_DEVICE float team_sum(float v) {
  static_assert(L >= 1 && L <= 32 && (L & (L - 1)) == 0, "team size is a power of two ≤ 32");
#pragma unroll
  for (int m = L / 2; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}

/// Max of v over the team of L lanes containing this lane; every lane of the team gets it.
template <int L>
STRATA_DEVICE float team_max(float v) {
  static_assert(L >= 1 && L <= 32 && (L & (L - 1)) == 0, "team size is a power of two ≤ 32");
#pragma unroll
  for (int m = L / 2; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}

/// Sum of v over all THREADS threads of the block; every thread gets it. `scratch` holds
/// THREADS/32 floats of shared memory. Contains two block barriers (block_barrier<THREADS,
/// BAR>: __syncthreads, or in a task entry a named barrier over the first THREADS threads):
/// every one of the THREADS threads must call it, and scratch is free again when it returns.
template <int THREADS, int BAR = 0>
STRATA_DEVICE float block_sum(float v, float* scratch) {
  v = team_sum<32>(v);
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  block_barrier<THREADS, BAR>();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) total += scratch[w];
  block_barrier<THREADS, BAR>();
  return total;
}

/// Max of v over all THREADS threads of the block; every thread gets it. The contract of
/// block_sum.
template <int THREADS, int BAR = 0>
STRATA_DEVICE float block_max(float v, float* scratch) {
  v = team_max<32>(v);
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  block_barrier<THREADS, BAR>();
  float total = scratch[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) total = fmaxf(total, scratch[w]);
  block_barrier<THREADS, BAR>();
  return total;
}

/// The factor e^(prev − cur) that re-expresses a sum kept in the shift `prev` in the shift `cur`
/// (the rescaling accumulators and the online softmax, docs/mugraph-semantics.md §3.3); exactly
/// 1 when the shift did not change, so that equal infinite shifts (rows of −∞ scores) give 1,
/// not NaN.
STRATA_DEVICE float rescale_factor(float prev, float cur) {
  return prev == cur ? 1.0f : op_exp(prev - cur);
}

}  // namespace strata_rt
