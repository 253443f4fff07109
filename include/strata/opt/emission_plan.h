// The last pass of the graph optimizer (docs/codegen.md, "The plan as contract"): the decisions
// about the shape of the emitted code that follow from the finished plan and its options —
// launch bounds, the form of chunk loops, the refill order of loop groups, the steps of the
// post-loop finalize — recorded in KernelPlan::emission, so that the emitter only reads them.
#pragma once

#include <string>

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Fills KernelPlan::emission of a plan whose layouts and shared memory are planned:
///  - launch bounds: PlanOptions::min_blocks_per_sm when set; else 1 when the grid fills at most
///    one block per SM (blocks_per_sm, loop_groups.h: every register a block of this size can
///    have), else none; the register cap they leave, min(255, 65536 / (threads · n));
///  - chunk loops: PlanOptions::split_chunk_walks; unrolled up to 32 chunks per thread when
///    split, else 16; loads as base pointer plus constant steps unless the register cap is
///    128 or less;
///  - loop groups refill early (refills_early, loop_groups.h);
///  - the finalize after the loop (post_finalize_work, finalize_in_two_steps,
///    finalize_step_two, barrier_before_post_level_one; schedule.h).
Result<KernelPlan> plan_emission(KernelPlan plan);

/// One line listing KernelPlan::emission ("" before plan_emission has run); printed with the
/// plan by STRATA_DUMP_PASSES=1.
std::string format_emission(const KernelPlan& plan);

}  // namespace strata
