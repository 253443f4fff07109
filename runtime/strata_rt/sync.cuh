// strata device runtime: barriers of part of a block, shared-memory atomics (add, max).
//
// Loop groups (docs/codegen.md, "Loop groups") split a block's warps into groups that run
// different iterations of the for-loop; a group synchronizes only its own threads:
//   group_sync<THREADS>(id): THREADS == 32 is one warp (__syncwarp); otherwise the named
//   barrier `id` (1..15; 0 is __syncthreads) over THREADS threads (a multiple of 32).
// Like __syncthreads, both order the shared-memory accesses of the participating threads, and
// every thread of the group must call them (all 32 lanes of each of its warps).
//   block_barrier<THREADS, BAR>(): the barrier of a block's first THREADS threads (task entries).
#pragma once

#include "strata_rt/core.cuh"

namespace strata_rt {

/// Barrier of the THREADS threads of one loop group (named barrier `id`, or the warp).
template <int THREADS>
STRATA_DEVICE void group_sync(int id) {
  static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024,
                "a group is a whole number of warps");
#if defined(STRATA_RT_EMULATE)
  if constexpr (THREADS == 32) {
    (void)id;
    emu::syncwarp();
  } else {
    emu::named_barrier(id, THREADS);
  }
#else
  if constexpr (THREADS == 32) {
    (void)id;
    __syncwarp();
  } else {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
  }
#endif
}

/// The barrier of the block's first THREADS threads: __syncthreads when BAR is 0 (a kernel,
/// whose block is those threads), else the named barrier BAR over THREADS threads (a task
/// entry, docs/codegen.md "Task entries": the calling block may have more threads, which do
/// not take part). Every one of the THREADS threads must call it.
template <int THREADS, int BAR>
STRATA_DEVICE void block_barrier() {
  if constexpr (BAR == 0) {
    __syncthreads();
  } else {
    static_assert(BAR >= 1 && BAR <= 15, "named barriers are 1..15");
    group_sync<THREADS>(BAR);
  }
}

/// *p += v atomically (p in shared memory).
STRATA_DEVICE void atomic_add_shared(float* p, float v) {
#if defined(STRATA_RT_EMULATE)
  *p += v;  // fibers never interleave inside this statement
#else
  atomicAdd(p, v);
#endif
}

/// *p = max(*p, v) atomically (p in shared memory; NaNs are not ordered). Non-negative floats
/// order like their bits as signed integers, negative ones in reverse like unsigned integers.
STRATA_DEVICE void atomic_max_shared(float* p, float v) {
#if defined(STRATA_RT_EMULATE)
  *p = fmaxf(*p, v);  // fibers never interleave inside this statement
#else
  if (v >= 0.0f)
    atomicMax(reinterpret_cast<int*>(p), __float_as_int(v));
  else
    atomicMin(reinterpret_cast<unsigned int*>(p), __float_as_uint(v));
#endif
}

}  // namespace strata_rt
