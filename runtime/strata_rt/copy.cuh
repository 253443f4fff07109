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

/// The bytes of a copy of BYTES bytes (elements of ESIZE bytes) that hold present elements of a
/// row whose first `present` elements from the copy's first one are present: clamp(present ·
/// ESIZE, 0, BYTES). Ragged tiles (docs/codegen.md, "Ragged tiles").
template <int BYTES, int ESIZE>
STRATA_DEVICE int present_bytes(int present) {
  return present <= 0 ? 0 : present * ESIZE >= BYTES ? BYTES : present * ESIZE;
}

/// cp_async of which only the first `src_bytes` (0 ≤ src_bytes ≤ BYTES) are read from global
/// memory; the rest of the BYTES destination bytes are zero-filled (cp.async's src-size operand).
/// With src_bytes = 0 nothing is read, but `gmem_src` should still point into the tensor.
template <int BYTES>
STRATA_DEVICE void cp_async_zfill(void* smem_dst, const void* gmem_src, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(STRATA_RT_EMULATE)
  emu::cp_async_issue(smem_dst, gmem_src, BYTES, src_bytes);
#else
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global" STRATA_RT_L2_PREFETCH
                 " [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem_dst)),
                 "l"(gmem_src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_u32(smem_dst)),
                 "l"(gmem_src), "n"(BYTES), "r"(src_bytes));
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
#if defined(STRATA_RT_EMULATE)
  emu::check_access(src, BYTES);
  emu::check_access(dst, BYTES);
  emu::check_aligned(src, BYTES);
  emu::check_aligned(dst, BYTES);
#endif
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

/// copy_sync of which only the first `src_bytes` (0 or BYTES for 2-byte copies) are read; the
/// rest of the destination is zero-filled (the synchronous counterpart of cp_async_zfill).
template <int BYTES>
STRATA_DEVICE void copy_sync_zfill(void* dst, const void* src, int src_bytes) {
  if (src_bytes >= BYTES) {
    copy_sync<BYTES>(dst, src);
    return;
  }
  unsigned char* d = static_cast<unsigned char*>(dst);
  const unsigned char* s = static_cast<const unsigned char*>(src);
#pragma unroll
  for (int i = 0; i < BYTES; ++i) d[i] = i < src_bytes ? s[i] : 0;
}

/// Writes N consecutive f32 values, narrowed to T, to global memory with 16-byte stores.
/// N * sizeof(T) must be a multiple of 16 and `dst` 16-byte aligned.
template <class T, int N>
STRATA_DEVICE void store_global_vec(T* dst, const float (&v)[N]) {
  static_assert((N * sizeof(T)) % 16 == 0, "vector store of whole 16-byte chunks");
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#if defined(STRATA_RT_EMULATE)
  emu::check_access(dst, N * static_cast<int>(sizeof(T)));
  emu::check_aligned(dst, 16);
#endif
#pragma unroll
  for (int c = 0; c < N / kPer; ++c) {
    __align__(16) T chunk[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) chunk[j] = from_f32<T>(v[c * kPer + j]);
    reinterpret_cast<uint4*>(dst)[c] = *reinterpret_cast<const uint4*>(chunk);
  }
}

}  // namespace strata_rt
