#include "strata/register_fusion.h"

#include "strata/layout.h"

namespace strata {
namespace {

/// An accumulator with one input reducing its last dim to one value per row (by the op table's
/// reduction family: sums, means, RMS, maxima).
bool is_last_dim_reducer(const BlockGraph& g, const BlockOp& op) {
  if (op_category(op.kind) != Category::Accum || !op_reduction(op.kind)) return false;
  if (op_info(op.kind).arity != 1) return false;
  const Shape& s = g.tensor(op.output).shape;
  return s.rank() >= 1 && s[s.rank() - 1] == 1;
}

}  // namespace

int matmul_operand(const KernelPlan& plan, int matmul, int k) {
  const BlockGraph& g = *plan.graph;
  const int t = g.op(matmul).inputs[k];
  const int norm = g.tensor(t).producer;
  if (plan.ops[norm].fold_into == matmul) return g.op(norm).inputs[0];
  return t;
}

Result<KernelPlan> fold_norms_into_matmuls(KernelPlan plan) {
  if (!plan.options.fold_norms || !plan.options.tensor_cores || !plan.has_mma_dtype) return plan;
  const BlockGraph& g = *plan.graph;
  for (int n = 0; n < static_cast<int>(g.ops().size()); ++n) {
    const BlockOp& op = g.op(n);
    if (op.kind != OpKind::RmsNorm || plan.ops[n].phase != Phase::Loop) continue;
    const int x = op.inputs[0];
    const BlockOp& src = g.op(g.tensor(x).producer);
    if (src.kind != OpKind::Input || plan.input_dtypes[src.attrs.input_index] != plan.mma_dtype)
      continue;
    std::vector<int> cons = tensor_consumers(g, op.output);
    if (cons.size() != 1) continue;
    const int m = cons[0];
    const BlockOp& mm = g.op(m);
    if (op_category(mm.kind) != Category::Matmul || mm.inputs[0] == mm.inputs[1]) continue;
    if (plan.ops[m].phase != Phase::Loop) continue;
    const int rank = g.tensor(x).shape.rank();
    OpPlan& mp = plan.ops[m];
    if (mm.inputs[0] == op.output && op.attrs.dim == rank - 1 && mp.scale_a < 0) {
      mp.scale_a = n;
    } else if (mm.inputs[1] == op.output && op.attrs.dim == rank - 2 && mp.scale_b < 0) {
      mp.scale_b = n;
    } else {
      continue;
    }
    plan.ops[n].fold_into = m;
  }
  return plan;
}

Result<KernelPlan> chain_matmuls(KernelPlan plan) {
  if (!plan.options.chain_matmuls) return plan;
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  for (int m1 = 0; m1 < n; ++m1) {
    const BlockOp& op = g.op(m1);
    OpPlan& p1 = plan.ops[m1];
    if (op_category(op.kind) != Category::Matmul || p1.phase != Phase::Loop) continue;
    if (p1.accumulate_into >= 0 || p1.chain_from >= 0 || p1.chain_into >= 0) continue;
    if (!tensor_core_eligible(plan, m1)) continue;
    const int e = p1.epilogue >= 0 ? g.op(p1.epilogue).output : op.output;
    int m2 = -1;
    std::vector<int> reducers;
    bool ok = true;
    for (int c : tensor_consumers(g, e)) {
      const BlockOp& user = g.op(c);
      if (op_category(user.kind) == Category::Matmul && user.inputs[0] == e &&
          user.inputs[1] != e && m2 < 0) {
        m2 = c;
      } else if (is_last_dim_reducer(g, user) && user.attrs.fmap == kReplicate &&
                 plan.ops[c].phase == Phase::Loop) {
        reducers.push_back(c);
      } else {
        ok = false;
      }
    }
    if (!ok || m2 < 0) continue;
    const OpPlan& p2 = plan.ops[m2];
    if (p2.phase != Phase::Loop || p2.accumulate_into < 0 || p2.epilogue >= 0) continue;
    if (!tensor_core_eligible(plan, m2)) continue;
    const Shape& es = g.tensor(e).shape;
    if (es[es.rank() - 1] % 16 != 0) continue;
    p1.chain_into = m2;
    plan.ops[m2].chain_from = m1;
    for (int r : reducers) plan.ops[r].rowsum_of = m1;
  }
  return plan;
}

}  // namespace strata
