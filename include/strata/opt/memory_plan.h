// Shared-memory planning pass of the graph optimizer (docs/codegen.md, paper §6).
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Assigns every tensor stored in shared memory (home Shared, and Registers accumulators for
/// their post-loop copy) a byte offset, reusing the space of tiles that are dead.
///
/// Live intervals are taken on the timeline of KernelPlan::position: a tile is live from the
/// level that writes it to the last level that reads it; pipelined input tiles and tiles that
/// loop ops read from the prologue stay live through the whole loop; accumulators in shared
/// memory are live from before the loop (where they are zeroed) to their last post-loop use;
/// a View extends its host's interval. Tiles with intersecting intervals get disjoint,
/// kSmemAlign-aligned byte ranges (first fit, largest first); the reduction scratch is live
/// throughout. When the total exceeds PlanOptions::smem_limit the pipeline depth is reduced
/// (down to 2); if it still does not fit, the error names the total and the largest tiles.
Result<KernelPlan> plan_shared_memory(KernelPlan plan);

}  // namespace strata
