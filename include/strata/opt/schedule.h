// Scheduling passes of the graph optimizer (docs/codegen.md, paper §6): when each block op runs.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Assigns every op a phase and a level so that one __syncthreads between consecutive levels
/// orders every producer before its consumers (paper §6: schedule by depth).
///
/// Phases: input iterators with fmap φ and the loop-body ops computed only from them are
/// loop-invariant and run once in the Prologue (when PlanOptions::hoist_invariants); other
/// loop-body ops and accumulators run in the Loop; post-loop ops and output savers in Post.
/// Levels: loads are level 0; an op's level is 1 + the highest level of a same-phase producer
/// of its inputs (tensors from an earlier phase count as level 0). An op evaluated in a
/// matmul's epilogue, or an accumulator fed from a matmul's fragments, takes the matmul's
/// level. Fills KernelPlan::ops[*].phase/level, levels and the barrier counts.
Result<KernelPlan> schedule_block_ops(KernelPlan plan);

/// Marks register-level fusions of matmul results; needs a scheduled plan, and the plan must be
/// scheduled again afterwards (levels change).
///
///  - Epilogue: a matmul whose only consumer is an elementwise op (unary, binary or thread
///    graph) of the same output shape, all of whose other operands are ready before the
///    matmul's level, computes that op on its output fragments; the matmul result is never
///    stored (OpPlan::epilogue / host).
///  - Accumulation: a loop-phase matmul whose only consumer is an `accum` with fmap φ adds its
///    fragments straight into the accumulator (OpPlan::accumulate_into).
/// Disabled by PlanOptions::fuse_epilogues = false.
Result<KernelPlan> fuse_matmul_epilogues(KernelPlan plan);

/// Marks elementwise ops (unary, binary, thread graphs) whose only consumer is an elementwise
/// op of the same shape, an output saver, an `accum` or the summed operand of a rescaling
/// accumulator in the same phase: the consumer
/// evaluates them per element where it reads them, so they are never stored and cost no level
/// (OpPlan::inline_into; the tensor's home becomes Inline). Register-level fusion of elementwise
/// chains, like a thread graph (docs/mugraph-semantics.md §4). Needs a scheduled plan; schedule
/// again afterwards.
/// Disabled by PlanOptions::inline_elementwise = false.
Result<KernelPlan> inline_elementwise_ops(KernelPlan plan);

/// True when post level 0 has work: accumulators to finalize (mean, rms), to copy from
/// registers to shared memory, or partials of loop groups. It then gets its own barrier before
/// and after.
bool post_finalize_work(const KernelPlan& plan);

/// True when post level 0 runs in two steps separated by a barrier: every thread first writes
/// its register partials (fragments, per-thread sums, each loop group's copy), then the
/// partials of loop groups are summed and means / RMS values taken.
bool finalize_in_two_steps(const KernelPlan& plan);

/// Whether an accumulator of this kind rescales its sum by a shift (accum_rescale,
/// accum_rescale_ld: the accumulators with a second input, docs/mugraph-semantics.md §3.3).
bool rescales(OpKind kind);

/// Whether an accumulator of this kind is finalized after the loop: its reduction (the op
/// table's reduction family) ends with a finalize (a mean or an RMS).
bool accum_finalizes(OpKind kind);

/// What post level 0's second step does for accumulator op `op` (StepTwo, kernel_plan.h).
StepTwo finalize_step_two(const KernelPlan& plan, int op);

/// True when the second finalize step has work for some accumulator: loop groups' copies
/// summed in place (those not summed at read, TensorPlan::summed_at_read) or a mean / RMS
/// taken in shared memory.
bool finalize_step_two_work(const KernelPlan& plan);

/// True when post level 1 needs its own barrier after post level 0: the finalize wrote what it
/// reads in one step, or its second step wrote (sums, means). With two steps whose second one
/// is empty, the barrier between the steps already orders the partials before level 1.
bool barrier_before_post_level_one(const KernelPlan& plan);

/// Sets the barrier counts of a scheduled plan: one __syncthreads before every prologue level
/// ≥ 1; per iteration one before every loop level ≥ 1 (the first is the top-of-iteration
/// barrier after the pipeline wait; at least one; with loop groups these are group barriers,
/// plus one before a stage is refilled); after the loop one right away, one more when post
/// level 0 runs in two steps (finalize_in_two_steps), one before post level 1 when
/// barrier_before_post_level_one says so, and one before every post level ≥ 2. Rowwise kernels
/// count one barrier per block-wide row reduction.
void count_barriers(KernelPlan& plan);

}  // namespace strata
