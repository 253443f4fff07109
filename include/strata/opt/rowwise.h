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

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// (RowwiseLayout, the layout of a rowwise kernel, is defined in kernel_plan.h.)

/// The rowwise layout of a plan's block graph, or an Error saying why it is not rowwise:
/// F = 1; only inputs, elementwise ops, thread graphs, last-dim reductions to 1 (sum, mean, max,
/// rms_norm, running_max, the last-dim accumulators) of the full tile, accum and accum_rescale
/// (with one iteration: their input), slices and concats along the last dim, and outputs of
/// the full tile or of it reduced over its last dim. Every tensor's dims but the last
/// broadcast to the full tile's; its last dim is the full tile's (RowwiseForm::Chunks), 1
/// (Rows) or narrower (Gathered: a slice of an input or of a gathered tensor, a narrower input,
/// an elementwise op of gathered tensors and rows, or a concat of them; read only by such ops,
/// and evaluated where a concat of the full width reads it). The chunk width (16 bytes or less)
/// divides every device row, column offset, gathered width and slice start; at most 32 values
/// per thread and tensor. Threads: PlanOptions::threads when it fits; else, for rows inside a
/// warp, a multiple of 32 up to 256 (1024 for a grid of fewer blocks than
/// PlanOptions::sm_count, or where 256 would leave more than 32 values of a tensor, or 64 of
/// all the tensors a part holds in chunks, per thread) dividing
/// the chunks, or covering them with idle chunks; for rows across warps, the largest multiple
/// of 32 up to 512 (1024 likewise) dividing a row's chunks.
Result<RowwiseLayout> rowwise_layout(const KernelPlan& plan);

/// rowwise_layout(plan).ok().
bool rowwise_eligible(const KernelPlan& plan);

/// The plan of a rowwise kernel: every tensor Owned, the layout (KernelPlan::rowwise_layout)
/// and its block size, the reduction scratch (two buffers of one float per warp and row, when rows
/// span warps).
Result<KernelPlan> plan_rowwise(KernelPlan plan);

}  // namespace strata
