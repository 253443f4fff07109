// Layout pass of the graph optimizer (docs/codegen.md, paper §6): how each block tensor is stored.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// The extent `x` of a matmul's N (step 8) or K (step 16) rounded up to the mma step, or 0
/// when that would make it more than four times as large (x < step / 4: N = 1, K < 4), where
/// the matmul keeps the SIMT path (docs/codegen.md, "Ragged tiles": padding to the mma step).
/// Above one step the padded extent is always less than twice the true one.
int64_t mma_padded_extent(int64_t x, int64_t step);

/// Whether matmul op `op` of `g` runs on tensor cores only with padding: its K is not a
/// multiple of 16 or its N not a multiple of 8.
bool matmul_needs_mma_padding(const BlockGraph& g, int op);

/// True when matmul op `op` can run on tensor cores (mma.sync m16n8k16): the kernel has a
/// 16-bit input type, tensor cores are enabled, the tiles fit (matmul_tiles_fit_mma), every
/// operand that is an input tile already has the 16-bit type (computed operands are stored in
/// it; operands that are accumulators keep f32 and make the matmul SIMT), and a matmul that
/// needs padding is in no matmul chain and has no folded column scale when N is padded.
bool tensor_core_eligible(const KernelPlan& plan, int op);

/// The elements op `op` of the plan passes over on its own, outside the matmuls: the output
/// (for a reduction, the larger of input and output) of an elementwise, reduction, norm or
/// thread-graph op that is not folded into a matmul (OpPlan::fold_into), not computed on a
/// matmul's fragments (OpPlan::host) and not evaluated where it is read (OpPlan::inline_into);
/// 0 for every other op (matmuls, layout ops, concats, accumulators, running maxima). The
/// planner sizes tensor-core blocks by the largest (docs/codegen.md, "Threads per block"); the
/// cost model counts the elements per thread (code features, "pass steps").
int64_t shared_pass_elements(const KernelPlan& plan, int op);

/// The part of tensor_core_eligible that the block graph alone decides: false when matmul op
/// `op` of `g` runs on the SIMT path whatever the plan (K or N too small to pad,
/// mma_padded_extent; an operand that is an accumulator; a padded operand read through a
/// slice). The cost model asks it before planning a kernel for its SIMT matmuls
/// (docs/cost-model.md, "SIMT matmul chains").
bool matmul_tiles_fit_mma(const BlockGraph& g, int op);

/// The extents block tensor t of `g` is stored with when every matmul that matmul_tiles_fit_mma
/// accepts pads its operands (read directly or through transposes) to the mma step: t's shape
/// with the padded dims rounded up (rows to the padded K or N, the last dim to the padded K or
/// N), and a matmul's output with its N padded. The shared-memory estimate of the search
/// (block_smem_bytes) counts these, as the plan stores them.
Shape mma_storage_shape(const BlockGraph& g, int t);

/// Chooses, for a scheduled and fused plan:
///  - the matmul path of every matmul (tensor cores when eligible, else SIMT) and the warp
///    tiling of tensor-core matmuls (all warps busy, fewest ldmatrix per k-step, output chunks
///    within PlanOptions::mma_chunk_floats);
///  - tensor homes: fused matmul results are never stored; fragment-fed accumulators live in
///    registers while PlanOptions::register_accum_floats allows, else in shared memory;
///    concat operands are stored in place inside the concat result when their type, pipeline
///    depth and alignment allow (PlanOptions::concat_views);
///  - storage types: input tiles keep the kernel input's type; computed tiles read by tensor
///    cores (or stored in such a concat) use the 16-bit type, all others f32;
///  - padding to the mma step (OpPlan::mma_n / mma_k): operand storage covering the padded
///    extents (a wider row stride, or TileLayout::pad_rows), a padded N's destination tile at a
///    row stride of the padded N, no padded operand stored in place inside a concat;
///  - layouts: 16-bit tiles read by ldmatrix or written from fragments get a 128-byte XOR
///    swizzle when rows are a multiple of 128 bytes, else 16 bytes of row padding when that
///    makes the row stride an odd number of 16-byte chunks; f32 tiles written from fragments
///    are padded to a row stride of 8 or 24 mod 32 words; stages are 128-byte aligned;
///  - the pipeline depth of per-iteration input tiles (enough stages to keep
///    PlanOptions::bytes_in_flight in flight, at most max_stages and F) and the reduction
///    scratch.
/// Ops left with nothing to do (OpPlan::in_place) are scheduled again without a level of their
/// own, which also refreshes the barrier counts.
Result<KernelPlan> choose_layouts(KernelPlan plan);

}  // namespace strata
