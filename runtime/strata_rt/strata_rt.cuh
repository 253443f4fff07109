// strata device runtime: the one header generated code includes.
//
// Layout of the runtime (all under runtime/strata_rt/, included with -I <repo>/runtime):
//   core.cuh    element types, f32 conversions, the XOR swizzle
//   math.cuh    the scalar arithmetic of every elementwise op
//   copy.cuh    cp.async tile copies, commit/wait groups, vector global stores
//   mma.cuh     ldmatrix + mma.sync m16n8k16 block matmul with f32 fragment accumulators
//   reduce.cuh  team (warp-shuffle) and block-wide sums
//   sync.cuh    barriers of loop groups (named barriers, __syncwarp), shared atomics
//   vec.cuh     vector loads of 2–8 elements widened to f32
//   host.cuh    host-side launch helpers (not for NVRTC)
//   emulate.h   a CPU emulator of the CUDA execution model, for tests only
#pragma once

#include "strata_rt/copy.cuh"
#include "strata_rt/core.cuh"
#include "strata_rt/math.cuh"
#include "strata_rt/mma.cuh"
#include "strata_rt/reduce.cuh"
#include "strata_rt/sync.cuh"
#include "strata_rt/vec.cuh"
