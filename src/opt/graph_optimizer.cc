#include "strata/opt/graph_optimizer.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "strata/opt/emission_plan.h"
#include "strata/opt/layout.h"
#include "strata/opt/layout_views.h"
#include "strata/opt/memory_plan.h"
#include "strata/opt/plan_invariants.h"
#include "strata/opt/ragged_tiles.h"
#include "strata/opt/register_fusion.h"
#include "strata/opt/schedule.h"
#include "strata/opt/wgmma_plan.h"

namespace strata {
namespace {

bool dump_passes() {
  const char* v = std::getenv("STRATA_DUMP_PASSES");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

}  // namespace

Result<KernelPlan> optimize_block_graph(std::shared_ptr<const BlockGraph> graph,
                                        std::vector<DType> input_dtypes,
                                        std::vector<DType> output_dtypes,
                                        const PlanOptions& options,
                                        std::vector<std::optional<InputView>> input_views) {
  using Pass = Result<KernelPlan> (*)(KernelPlan);
  struct Step {
    const char* name;
    Pass pass;
  };
  // clang-format off
  static const Step kPasses[] = {
      {"schedule_block_ops", schedule_block_ops},
      {"plan_layout_views", plan_layout_views},
      {"fold_norms_into_matmuls", fold_norms_into_matmuls},
      {"fuse_matmul_epilogues", fuse_matmul_epilogues},
      {"chain_matmuls", chain_matmuls},
      {"inline_elementwise_ops", inline_elementwise_ops},
      {"schedule_block_ops", schedule_block_ops},
      {"choose_layouts", choose_layouts},
      {"plan_ragged_tiles", plan_ragged_tiles},
      {"plan_wgmma", plan_wgmma},
      {"plan_shared_memory", plan_shared_memory},
      {"plan_emission", plan_emission},
  };
  // clang-format on
  STRATA_ASSIGN_OR_RETURN(
      KernelPlan plan, make_kernel_plan(std::move(graph), std::move(input_dtypes),
                                        std::move(output_dtypes), options, std::move(input_views)));
  const bool dump = dump_passes();
  for (const Step& step : kPasses) {
    STRATA_ASSIGN_OR_RETURN(plan, step.pass(std::move(plan)));
    if (dump)
      std::cerr << "=== after " << step.name << "\n" << format_plan(plan) << format_emission(plan);
    // A pass that breaks an invariant is a bug of the optimizer, named here.
    if (Status ok = verify_plan(plan); !ok.ok())
      return make_error("internal: the kernel plan after pass " + std::string(step.name) +
                        " breaks an invariant: " + ok.error().message);
  }
  return plan;
}

}  // namespace strata
