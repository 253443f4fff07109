// The graph optimizer (docs/codegen.md, paper §6): the straight list of passes that turns a block
// graph into the KernelPlan the CUDA emitter follows.
#pragma once

#include <memory>
#include <vector>

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Runs, in order: schedule_block_ops, plan_layout_views, fold_norms_into_matmuls,
/// fuse_matmul_epilogues,
/// chain_matmuls, inline_elementwise_ops, schedule_block_ops (again, with the fusions),
/// choose_layouts, plan_shared_memory, plan_emission — each as `plan = pass(plan)`, followed by
/// verify_plan (plan_invariants.h; a violation is an error naming the pass). With the environment
/// variable STRATA_DUMP_PASSES=1 the plan is printed to stderr after every pass. Fails when the
/// block graph cannot fit PlanOptions::smem_limit.
/// `input_views` (one per input, or empty) are the kernel-level views the inputs read in
/// place (kernel_views.h).
Result<KernelPlan> optimize_block_graph(std::shared_ptr<const BlockGraph> graph,
                                        std::vector<DType> input_dtypes,
                                        std::vector<DType> output_dtypes,
                                        const PlanOptions& options = {},
                                        std::vector<std::optional<InputView>> input_views = {});

}  // namespace strata
