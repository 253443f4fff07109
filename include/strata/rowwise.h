// Rowwise kernels (docs/codegen.md, "Rowwise kernels"): a customized kernel with F = 1 whose
// ops are elementwise ops and reductions over the last dim (any row of the reduction family:
// sum, mean, max, rms_norm, running_max and the fused accumulators) runs with every tensor in
// registers. Each thread owns fixed chunks of `vec`
// consecutive elements of the block's full tile, loads them straight from global memory with
// vector loads, computes every op on them in registers, reduces rows with warp shuffles (and
// one barrier through shared memory when a row spans several warps) and stores vectors. No
// tile ever goes through shared memory (nTrans: two block reductions, two barriers).
#pragma once

#include <cstdint>

#include "strata/kernel_plan.h"
#include "strata/status.h"

namespace strata {

/// How a rowwise kernel's full tile [rows, cols] (all dims but the last flattened into rows) is
/// spread over the block: chunk c = tid + k·threads (k < per_thread) covers elements
/// c·vec … c·vec + vec − 1.
struct RowwiseLayout {
  Shape full;                  ///< the block's full tile shape
  int64_t rows = 1, cols = 1;  ///< full = [rows, cols] flattened
  int64_t vec = 1;             ///< elements per chunk
  int64_t chunks_per_row = 1;
  int64_t per_thread = 1;  ///< chunks per thread
  int threads = 32;
  /// true: each row spans a multiple of `threads` chunks, so chunk k of every thread lies in
  /// row k / (chunks_per_row / threads) and rows are reduced across the block (shuffles, then
  /// one barrier); false: a row is chunks_per_row (≤ 32, a power of two) consecutive lanes of
  /// one warp, reduced with shuffles only.
  bool block_rows = false;
};

/// The rowwise layout of a plan's block graph, or an Error saying why it is not rowwise:
/// F = 1; only inputs, elementwise ops, thread graphs, last-dim reductions to 1 (sum, mean, max,
/// rms_norm, running_max, the last-dim accumulators), accum and accum_rescale (with one
/// iteration: their input) and outputs; every tensor the full tile or
/// the full tile reduced over its last dim; vector-aligned rows in device memory; at most 64
/// values per thread and tensor. PlanOptions::threads is used when it fits.
Result<RowwiseLayout> rowwise_layout(const KernelPlan& plan);

/// rowwise_layout(plan).ok().
bool rowwise_eligible(const KernelPlan& plan);

/// The plan of a rowwise kernel: every tensor Owned, the block size of the layout, the
/// reduction scratch (two buffers of one float per warp and row, when rows span warps).
Result<KernelPlan> plan_rowwise(KernelPlan plan);

}  // namespace strata
