#include "save_targets.h"

namespace strata::codegen {
namespace {

const OutputParts* parts_of(const KernelPlan& plan, int oi) {
  return oi < static_cast<int>(plan.output_parts.size()) && plan.output_parts[oi]
             ? &*plan.output_parts[oi]
             : nullptr;
}

ir::Expr axis(int a) {
  return ir::var(a == 0 ? "bx" : a == 1 ? "by" : "bz");
}

}  // namespace

std::vector<std::string> output_params(const KernelPlan& plan, int oi) {
  const std::string base = "gout" + std::to_string(oi);
  const OutputParts* p = parts_of(plan, oi);
  if (!p) return {base};
  std::vector<std::string> names;
  for (size_t k = 0; k < p->starts.size(); ++k) names.push_back(base + "_" + std::to_string(k));
  return names;
}

std::vector<SaveTarget> save_targets(const KernelPlan& plan, int oi) {
  const BlockGraph& g = *plan.graph;
  const BlockOp& saver = g.op(g.output_op(oi));
  const Shape& tile = g.tensor(saver.inputs[0]).shape;
  const Shape& full = g.output_shape(oi);
  const OutputParts* parts = parts_of(plan, oi);
  const std::vector<std::string> names = output_params(plan, oi);
  std::vector<SaveTarget> targets;
  for (size_t k = 0; k < names.size(); ++k) {
    SaveTarget t;
    t.pointer = names[k];
    t.shape = full;
    int64_t first_block = 0;
    if (parts) {
      std::vector<int64_t> dims = full.dims();
      dims[parts->dim] = parts->ends[k] - parts->starts[k];
      t.shape = Shape::unchecked(dims);
      first_block = parts->starts[k] / parts->tile;
      const int64_t end_block = parts->ends[k] / parts->tile;
      const ir::Expr b = axis(parts->axis);
      // The parts partition the axis: the first needs no lower bound, the last no upper one.
      ir::Expr lo = k > 0 ? (b >= ir::int_lit(first_block)) : ir::Expr{};
      ir::Expr hi = k + 1 < names.size() ? (b < ir::int_lit(end_block)) : ir::Expr{};
      t.when = lo && hi ? ir::land(lo, hi) : lo ? lo : hi;
    }
    t.strides = t.shape.strides();
    for (int a = 0; a < 3; ++a) {
      if (g.grid()[a] <= 1) continue;
      const int d = saver.attrs.omap[a];
      const ir::Expr block = parts && a == parts->axis && first_block > 0
                                 ? axis(a) - ir::int_lit(first_block)
                                 : axis(a);
      t.origin.push_back(block * ir::int_lit(tile[d] * t.strides[d]));
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

}  // namespace strata::codegen
