// Loop groups and pipeline depth (docs/codegen.md, "Loop groups"): how a customized kernel's
// for-loop is spread over its warps and how deep its prefetch pipeline is.
//
// With G loop groups the block's warps form G groups of group_threads threads; group g runs
// iterations g, g+G, g+2G, … with its own pipeline stages, its own copies of the loop's
// shared-memory tiles and its own partial accumulators, and synchronizes only its own warps
// (group_sync: __syncwarp or a named barrier). After the loop the partials are combined. Every
// accumulator that reduces over the iterations allows this (fmap φ accumulators are sums or
// maxima over iterations, fmap-d ones write disjoint slices), so groups change only the order
// of f32 operations. A running max and the rescaling accumulators carry their value from one
// iteration to the next: their kernels take no groups, except the online softmax of a matmul
// chain whose result does not depend on the shifts (OpPlan::shift_free), whose groups combine
// their partials rescaled by their own maxima.
#pragma once

#include <cstdint>

#include "strata/opt/kernel_plan.h"

namespace strata {

/// Shared-memory needs of a plan whose storage is chosen, in bytes (kSmemAlign-rounded tiles).
struct SmemNeeds {
  int64_t per_stage = 0;       ///< one stage of the per-iteration input tiles
  int64_t per_group = 0;       ///< other loop tiles and partial accumulators (one group's copy)
  int64_t shared = 0;          ///< tiles live during the loop that groups share (loop-invariant)
  int64_t post = 0;            ///< tiles of the post-loop phase (reusing the loop's space)
  int64_t post_per_group = 0;  ///< post-loop copies of register accumulators (one per group)
  /// Estimated total for g groups with s stages each (an upper bound of the planned total up
  /// to alignment: the planner may reuse more).
  int64_t total(int g, int s) const;
};

/// The estimate for a plan after choose_layouts' storage decisions (homes, layouts, dtypes).
SmemNeeds smem_needs(const KernelPlan& plan);

/// Whether loop groups can run the plan's loop: F ≥ 2, not rowwise, and no running max or
/// rescaling accumulator (whose value carries from one iteration to the next).
bool loop_groups_allowed(const KernelPlan& plan);

/// Whether the plan's loop groups refill early (PlanOptions::early_refill): groups, asked for,
/// and two or more stages (S − 1 ≥ 1 stages ahead).
bool refills_early(const KernelPlan& plan);

/// Blocks of this kernel that should share one SM: ⌈grid blocks / SMs⌉, at most 8.
int blocks_per_sm(const KernelPlan& plan);

/// The shared memory one block should use at most: PlanOptions::smem_limit, lowered so that
/// blocks_per_sm blocks fit one SM (PlanOptions::sm_smem).
int64_t smem_budget(const KernelPlan& plan);

/// Chooses the number of loop groups (given group_threads) and the stages per group:
///  - groups: PlanOptions::loop_groups when set (at most F; 1 = off; fewer when two stages per
///    group do not fit the shared-memory limit); else the most that keep ≈ 16 warps per SM
///    across blocks_per_sm blocks and fit smem_budget with two stages each, then the fewest
///    that need as many rounds of iterations. Always at most F, 15 groups when a group has
///    several warps (named barriers), and max_threads threads (512 with tensor cores, whose
///    register use the caller estimates);
///  - stages: PlanOptions::forced_stages, else enough to keep PlanOptions::bytes_in_flight per
///    SM in flight, between 2 and max_stages, at most the group's iterations, within the budget.
/// Sets KernelPlan::groups and pipeline_stages.
void choose_groups_and_stages(KernelPlan& plan, const SmemNeeds& needs, int max_threads);

}  // namespace strata
