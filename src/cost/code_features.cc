#include "strata/cost/code_features.h"

#include <algorithm>
#include <memory>

#include "strata/opt/graph_optimizer.h"
#include "strata/opt/layout.h"
#include "strata/opt/matmul_lowering.h"

namespace strata {
namespace {

/// ⌈log2 n⌉ for n ≥ 1 (0 for n ≤ 1): the depth of a combining tree over n values.
int ceil_log2(int64_t n) {
  int d = 0;
  while (n > (int64_t{1} << d) && d < 62) ++d;
  return d;
}

}  // namespace

KernelCodeFeatures code_features_of_plan(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  KernelCodeFeatures f;
  f.threads = plan.threads;
  f.smem_bytes = plan.smem_bytes;
  f.loop_groups = plan.groups;
  f.loop_barriers = plan.barriers_per_iteration;
  f.once_barriers = plan.barriers_prologue + plan.barriers_post;
  f.register_loads = plan.rowwise;
  // A loop group's reductions run on its own threads.
  const int team_threads =
      plan.groups > 1 && plan.group_threads > 0 ? plan.group_threads : plan.threads;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    if (op.kind == OpKind::Input || op.kind == OpKind::Output) continue;
    const bool loop = plan.op(i).phase == Phase::Loop;
    (loop ? f.loop_ops : f.once_ops) += 1;
    if (const int64_t n = shared_pass_elements(plan, i); n > 0 && !plan.rowwise) {
      const int64_t threads = std::max(1, loop ? team_threads : plan.threads);
      (loop ? f.loop_pass_steps : f.once_pass_steps) += (n + threads - 1) / threads;
    }
    if (op_category(op.kind) == Category::Matmul && plan.op(i).matmul == MatmulPath::Simt) {
      const Shape& a = g.tensor(op.inputs[0]).shape;
      const int64_t outputs = g.tensor(op.output).shape.numel();
      // In the loop a group's matmul runs on its team; after it on the whole block.
      const int64_t threads = std::max(1, loop ? team_threads : plan.threads);
      const int64_t steps = (outputs + threads - 1) / threads * a[a.rank() - 1];
      (loop ? f.loop_simt_mm_steps : f.once_simt_mm_steps) += steps;
    }
    if (op_category(op.kind) == Category::Matmul && plan.op(i).wgmma) {
      const Shape& a = g.tensor(op.inputs[0]).shape;
      const double flops = 2.0 * static_cast<double>(g.tensor(op.output).shape.numel()) *
                           static_cast<double>(a[a.rank() - 1]);
      (loop ? f.loop_wgmma_flops : f.once_wgmma_flops) += flops;
    }
    if (!is_reduction(op) || op.inputs.empty()) continue;
    const ReductionShape r = reduction_shape(op, g.tensor(op.inputs[0]).shape);
    (loop ? f.loop_reduce_steps : f.once_reduce_steps) += ceil_log2(r.group());
    // A block-wide reduction (no team of lanes can take it) synchronizes the block twice;
    // rowwise kernels reduce rows with shuffles and one barrier counted in their plan.
    if (!plan.rowwise && reduction_team(r.group(), r.outputs(), team_threads) == 0)
      (loop ? f.loop_barriers : f.once_barriers) += 2;
  }
  return f;
}

std::optional<KernelCodeFeatures> kernel_code_features(
    const KernelGraph& g, int i, const std::vector<std::optional<KernelView>>& views,
    const PlanOptions& options) {
  std::shared_ptr<const BlockGraph> body = kernel_block_graph(g, i);
  if (!body) return std::nullopt;
  const KernelOp& op = g.op(i);
  std::vector<DType> in_t, out_t;
  std::vector<std::optional<InputView>> in_views;
  for (int t : op.inputs) {
    in_t.push_back(g.tensor(t).dtype);
    const bool view = t < static_cast<int>(views.size()) && views[t];
    in_views.push_back(
        view ? std::optional<InputView>(InputView{g.tensor(views[t]->storage).shape, views[t]->map})
             : std::nullopt);
  }
  for (int t : op.outputs) out_t.push_back(g.tensor(t).dtype);
  auto plan = optimize_block_graph(body, in_t, out_t, options, in_views);
  if (!plan.ok()) return std::nullopt;
  return code_features_of_plan(*plan);
}

}  // namespace strata
