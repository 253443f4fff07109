#include "strata/opt/layout_views.h"

#include "strata/opt/layout.h"
#include "strata/opt/schedule.h"

namespace strata {

bool ldmatrix_addressable(const KernelPlan& plan, int matmul, int k) {
  const BlockGraph& g = *plan.graph;
  const int v = g.op(matmul).inputs[k];
  if (plan.tensors[v].home != TensorHome::Alias) return true;
  const int root = alias_root(plan, v);
  const IndexMap map = alias_map(plan, v);
  const Shape& vs = g.tensor(v).shape;
  const Shape rs = stored_shape(plan, root);
  const int r = vs.rank();
  if (rs[r - 1] % 8 != 0) return false;
  if (!map.origin.empty() && map.origin[r - 1] % 8 != 0) return false;
  if (k == 0 && map.transposed && vs[r - 2] % 16 != 0) return false;
  // The flat batch index b of the view must reach batch b at b times one stride: every batch
  // dim inside an outer one of extent > 1 keeps its full extent.
  int64_t outer = 1;
  for (int d = 0; d + 2 < r; ++d) {
    if (outer > 1 && vs[d] != rs[d]) return false;
    outer *= vs[d];
  }
  return true;
}

Result<KernelPlan> plan_layout_views(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  bool any = false;
  for (int i = 0; i < n; ++i) {
    if (op_category(g.op(i).kind) != Category::Layout) continue;
    any = true;
    plan.ops[i].in_place = true;
    TensorPlan& tp = plan.tensors[g.op(i).output];
    tp.home = TensorHome::Alias;
    tp.view_of = g.op(i).inputs[0];
  }
  if (!any) return plan;
  // Tensor-core operands that ldmatrix cannot read in place get their own copy; a copy changes
  // the storage that the layout ops above it alias, so repeat until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < n; ++i) {
      const BlockOp& op = g.op(i);
      if (op_category(op.kind) != Category::Layout || !plan.ops[i].in_place) continue;
      bool copy = false;
      for (int m : tensor_consumers(g, op.output)) {
        if (op_category(g.op(m).kind) != Category::Matmul || !tensor_core_eligible(plan, m))
          continue;
        for (int k = 0; k < 2; ++k)
          if (g.op(m).inputs[k] == op.output && !ldmatrix_addressable(plan, m, k)) copy = true;
      }
      if (!copy) continue;
      plan.ops[i].in_place = false;
      plan.tensors[op.output].home = TensorHome::Shared;
      plan.tensors[op.output].view_of = -1;
      changed = true;
    }
  }
  return schedule_block_ops(std::move(plan));
}

}  // namespace strata
