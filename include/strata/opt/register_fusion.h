// Register-level fusions of the graph optimizer beyond matmul epilogues (docs/codegen.md): folding
// rms_norm into a matmul as a row / column scale, and chaining two matmuls through registers
// (FlashAttention style). Both only change where values live, never what is computed (up to
// f32 rounding).
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Folds rms_norm ops over a matmul's contraction dim into that matmul: for
/// N = rms_norm(X, dim) whose only consumer is matmul M reading N as one operand,
///   A = rms_norm(X, last dim)      ⇒  M = diag(1/rms(X rows)) · (X · B)
///   B = rms_norm(X, dim rank − 2)  ⇒  M = (A · X) · diag(1/rms(X columns))
/// so the normalized tile is never written: the norm computes only its inverse-RMS vector
/// (home Scale) and the matmul reads X and scales its result before any epilogue. Applies when
/// X is an input tile of the kernel's 16-bit type and the norm and the matmul run in the loop.
/// Sets OpPlan::fold_into / scale_a / scale_b. Disabled by PlanOptions::fold_norms = false.
Result<KernelPlan> fold_norms_into_matmuls(KernelPlan plan);

/// Chains S = matmul(A, B) (with its fused epilogue E = e(S), if any) into a following
/// matmul(E, V) whose fragments accumulate into an `accum` (fmap φ): E stays in registers as
/// the A operand of the second matmul (the m16n8 C fragments of two adjacent column tiles are
/// the A fragment of one m16n8k16 step), and the accumulators reducing E over its last dim
/// (accum_sum_ld, accum_mean_ld, accum_rms_ld, accum_max_ld: any one-input accumulator of the
/// reduction family with one value per row) are fed from the fragments' row reductions. E must
/// have no other consumer; both matmuls must be tensor-core eligible and in the loop. Needs
/// fuse_matmul_epilogues to have run; schedule again afterwards (the chained ops share the first
/// matmul's level). Sets OpPlan::chain_into / chain_from / rowsum_of. Disabled by
/// PlanOptions::chain_matmuls = false.
Result<KernelPlan> chain_matmuls(KernelPlan plan);

/// The tensor a matmul operand is read from: the input of an rms_norm folded into it, else the
/// operand itself.
int matmul_operand(const KernelPlan& plan, int matmul, int k);

}  // namespace strata
