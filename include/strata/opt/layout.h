// Layout pass of the graph optimizer (docs/codegen.md, paper §6): how each block tensor is stored.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// True when matmul op `op` can run on tensor cores (mma.sync m16n8k16): the kernel has a
/// 16-bit input type, tensor cores are enabled, K % 16 == 0 and N % 8 == 0, and every operand
/// that is an input tile already has the 16-bit type (computed operands are stored in it; operands
/// that are accumulators keep f32 and make the matmul SIMT).
bool tensor_core_eligible(const KernelPlan& plan, int op);

/// The part of tensor_core_eligible that the block graph alone decides: false when matmul op
/// `op` of `g` runs on the SIMT path whatever the plan (K % 16 != 0, N % 8 != 0, or an operand
/// that is an accumulator). The cost model asks it before planning a kernel for its SIMT
/// matmuls (docs/cost-model.md, "SIMT matmul chains").
bool matmul_tiles_fit_mma(const BlockGraph& g, int op);

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
