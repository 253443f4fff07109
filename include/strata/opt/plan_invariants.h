// The invariants of a KernelPlan (kernel_plan.h, docs/codegen.md "The plan as contract"),
// checked by the graph optimizer after every pass so that a pass that breaks one is named at
// once instead of showing up as wrong emitted code.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Checks every invariant that holds for the parts of `plan` filled so far, and returns an
/// Error naming the first one violated (op / tensor ids and the values):
///  - one OpPlan per op, one TensorPlan per tensor, one dtype per kernel input and output;
///  - levels (once scheduled): every op listed once, at its own phase and level; an op of level
///    k ≥ 1 reads only tensors from an earlier phase or a lower level of its phase, except
///    those computed with it in registers (fused epilogues, fragment accumulation, chains,
///    row sums, running maxima) and inlined or in-place ones, which share their consumer's level;
///  - references between ops and tensors are in range and mutual (epilogue ↔ host,
///    chain_into ↔ chain_from, View / Alias hosts);
///  - threads = groups · group_threads, whole warps; pipeline stages ≥ 1 and every pipelined
///    input tile has them;
///  - shared memory (once planned): offsets and stage sizes kSmemAlign-aligned, every stored
///    tile and the scratch inside smem_bytes ≤ PlanOptions::smem_limit, tiles live at the same
///    time disjoint;
///  - rowwise kernels: the layout's block size is the plan's;
///  - emission decisions (once plan_emission has run): one finalize step per op, the register
///    cap the launch bounds leave, barrier counts matching the finalize decisions.
///  - ragged tiles (KernelPlan::ragged): every ragged dim names an extent split raggedly across
///    the grid (in parts of ⌈extent / grid⌉) or by the loop (tiles covering the part); such a
///    kernel is neither rowwise nor grouped, has no register accumulators or matmul chains;
///    an op's ragged extent only on a matmul or reduction, its mask only where it adds into a
///    loop state, its zeroed operands only with a ragged contraction; none of them without
///    ragged tiles.
Status verify_plan(const KernelPlan& plan);

}  // namespace strata
