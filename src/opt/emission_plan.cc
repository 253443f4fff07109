#include "strata/opt/emission_plan.h"

#include <algorithm>
#include <sstream>

#include "strata/opt/loop_groups.h"
#include "strata/opt/schedule.h"

namespace strata {

Result<KernelPlan> plan_emission(KernelPlan plan) {
  EmissionPlan& e = plan.emission;
  const PlanOptions& o = plan.options;
  e.min_blocks_per_sm = o.min_blocks_per_sm > 0    ? o.min_blocks_per_sm
                        : blocks_per_sm(plan) == 1 ? 1
                                                   : 0;
  e.register_cap =
      std::min(255, 65536 / (std::max(1, plan.threads) * std::max(1, e.min_blocks_per_sm)));
  e.split_chunk_walks = o.split_chunk_walks;
  e.max_unrolled_chunks = o.split_chunk_walks ? 32 : 16;
  e.pointer_steps = e.register_cap > 128;
  e.early_refill = refills_early(plan);
  FinalizePlan& f = e.finalize;
  f.work = post_finalize_work(plan);
  f.two_steps = finalize_in_two_steps(plan);
  f.barrier_before_level_one = barrier_before_post_level_one(plan);
  f.step_two.assign(plan.graph->ops().size(), StepTwo::Nothing);
  for (int i = 0; i < static_cast<int>(f.step_two.size()); ++i)
    f.step_two[i] = finalize_step_two(plan, i);
  e.decided = true;
  return plan;
}

std::string format_emission(const KernelPlan& plan) {
  const EmissionPlan& e = plan.emission;
  if (!e.decided) return "";
  std::ostringstream os;
  os << "  emission: launch bounds (" << plan.threads;
  if (e.min_blocks_per_sm > 0) os << ", " << e.min_blocks_per_sm;
  os << "), register cap " << e.register_cap << ", chunk walks "
     << (e.split_chunk_walks ? "split" : "flat") << " (unrolled up to " << e.max_unrolled_chunks
     << ")" << (e.pointer_steps ? ", pointer steps" : "")
     << (e.early_refill ? ", early refill" : "");
  const FinalizePlan& f = e.finalize;
  if (f.work) {
    os << ", finalize in " << (f.two_steps ? 2 : 1) << " step(s)";
    for (size_t i = 0; i < f.step_two.size(); ++i)
      if (f.step_two[i] == StepTwo::SumPartials)
        os << ", op #" << i << " partials summed";
      else if (f.step_two[i] == StepTwo::FinalizeShared)
        os << ", op #" << i << " finalized in shared memory";
    if (f.barrier_before_level_one) os << ", barrier before post level 1";
  }
  os << "\n";
  return os.str();
}

}  // namespace strata
