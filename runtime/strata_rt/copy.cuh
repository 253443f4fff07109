// strata device runtime: global ↔ shared memory copies.
//
// Tile loads use cp.async (sm_80+): each thread issues copies of 4, 8 or 16 bytes, groups them
// with cp_async_commit(), and cp_async_wait<N>() blocks until at most the N most recently
// committed groups of *this thread* are still in flight. A __syncthreads() after the wait makes
// every thread's landed copies visible to the block. Multi-stage pipelines keep S-1 groups in
// flight: see docs/codegen.md, "Pipelined input iterators".
//
// Preconditions: source and destination addresses are aligned to the copy size; sources are
// global memory, destinations shared memory.
#pragma once

#include "strata_rt/core.cuh"

// The L2 prefetch-size qualifier of the 16-byte copies (".L2::128B": a miss fetches the whole
// 128-byte line, which a tile's neighbouring chunks read anyway). Overridable for experiments
// (bench/ablate.py).
#ifndef STRATA_RT_L2_PREFETCH
#define STRATA_RT_L2_PREFETCH ".L2::128B"
#endif

namespace strata_rt {

/// Shared-state-space address of a generic pointer into shared memory.
STRATA_DEVICE u32 smem_u32(const void* p) {
#if defined(STRATA_RT_EMULATE)
  return 0;
#else
  return static_cast<u32>(__cvta_generic_to_shared(p));
#endif
}

/// Asynchronous copy of BYTES ∈ {4, 8, 16} bytes from global to shared memory. 16-byte copies
/// bypass L1 (.cg); smaller ones go through it (.ca), the only form PTX allows for them.
template <int BYTES>
STRATA_DEVICE void cp_async(void* smem_dst, const void* gmem_src) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(STRATA_RT_EMULATE)
  emu::cp_async_issue(smem_dst, gmem_src, BYTES);
#else
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global" STRATA_RT_L2_PREFETCH
                 " [%0], [%1], 16;\n" ::"r"(smem_u32(smem_dst)),
                 "l"(gmem_src));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_u32(smem_dst)),
                 "l"(gmem_src), "n"(BYTES));
  }
#endif
}

/// Closes the group of cp.async copies issued by this thread since the last commit (an empty
/// group is allowed and completes at once).
STRATA_DEVICE void cp_async_commit() {
#if defined(STRATA_RT_EMULATE)
  emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most N of this thread's committed cp.async groups are still pending.
template <int N>
STRATA_DEVICE void cp_async_wait() {
#if defined(STRATA_RT_EMULATE)
  emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/// A synchronous copy of BYTES ∈ {2, 4, 8, 16} bytes (for tiles whose alignment rules out
/// cp.async). Both addresses must be aligned to BYTES.
template <int BYTES>
STRATA_DEVICE void copy_sync(void* dst, const void* src) {
  if constexpr (BYTES == 16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (BYTES == 4) {
    *reinterpret_cast<u32*>(dst) = *reinterpret_cast<const u32*>(src);
  } else {
    static_assert(BYTES == 2, "copy_sync copies 2, 4, 8 or 16 bytes");
    *reinterpret_cast<unsigned short*>(dst) = *reinterpret_cast<const unsigned short*>(src);
  }
}

/// Writes N consecutive f32 values, narrowed to T, to global memory with 16-byte stores.
/// N * sizeof(T) must be a multiple of 16 and `dst` 16-byte aligned.
template <class T, int N>
STRATA_DEVICE void store_global_vec(T* dst, const float (&v)[N]) {
  static_assert((N * sizeof(T)) % 16 == 0, "vector store of whole 16-byte chunks");
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int c = 0; c < N / kPer; ++c) {
    __align__(16) T chunk[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) chunk[j] = from_f32<T>(v[c * kPer + j]);
    reinterpret_cast<uint4*>(dst)[c] = *reinterpret_cast<const uint4*>(chunk);
  }
}

}  // namespace strata_rt
