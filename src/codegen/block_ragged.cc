// Ragged tiles in the emitted code (docs/codegen.md, "Ragged tiles"): the present extent of a
// ragged tile dim in this block and iteration, the conditions that leave absent positions out,
// and the element counts of means over ragged dims, all as IR expressions. The plan's
// KernelPlan::ragged says which dims are ragged (OpPlan::ragged_* what each op does about
// them); nothing here is emitted for a graph without ragged tiles.
#include "block_emitter.h"

namespace strata::codegen {

ir::Expr BlockEmitter::ragged_part(int e) const {
  const RaggedExtent& r = plan_.ragged.extents[e];
  if (r.axis < 0) return ir::int_lit(r.extent);
  return ir::var("rgp" + std::to_string(e));
}

void BlockEmitter::declare_ragged_parts() {
  if (!plan_.ragged.any()) return;
  w_.comment("ragged tiles: the part of each ragged extent this block covers");
  static const char* kAxis[3] = {"bx", "by", "bz"};
  for (size_t e = 0; e < plan_.ragged.extents.size(); ++e) {
    const RaggedExtent& r = plan_.ragged.extents[e];
    if (r.axis < 0) continue;
    w_.add(ir::decl("const int", "rgp" + std::to_string(e),
                    ir::call("strata_rt::imin",
                             {ir::int_lit(r.block_tile),
                              ir::int_lit(r.extent) - ir::var(kAxis[r.axis]) * r.block_tile})));
  }
}

ir::Expr BlockEmitter::ragged_iteration() const {
  return in_loop_ ? ir::var("it") : ir::Expr(0);
}

ir::Expr BlockEmitter::ragged_present(int e, const ir::Expr& iter) const {
  const RaggedExtent& r = plan_.ragged.extents[e];
  if (!r.loop) return ragged_part(e);
  return ir::call("strata_rt::imin", {ir::int_lit(r.tile), ragged_part(e) - iter * r.tile});
}

ir::Expr BlockEmitter::ragged_absent(int t, const std::vector<ir::Expr>& idx, unsigned dims,
                                     const ir::Expr& iter) const {
  ir::Expr cond;
  if (!plan_.ragged.any()) return cond;
  for (size_t d = 0; d < idx.size(); ++d) {
    const int e = plan_.ragged.dim(t, static_cast<int>(d));
    if (e < 0 || !(dims >> d & 1u)) continue;
    const ir::Expr absent = idx[d] >= ragged_present(e, iter);
    cond = cond ? ir::lor(cond, absent) : absent;
  }
  return cond;
}

ir::Expr BlockEmitter::ragged_count(int i) const {
  const BlockOp& op = g_.op(i);
  const int e = plan_.ops[i].ragged_extent;
  if (e < 0) return {};
  const bool accum = op_category(op.kind) == Category::Accum;
  const int64_t F = accum ? g_.forloop() : 1;
  const RaggedExtent& r = plan_.ragged.extents[e];
  // A loop split of the reduced dim: the iterations together cover the block's part.
  if (accum && r.loop) return ir::static_cast_to("float", ragged_part(e));
  return ir::static_cast_to("float", ir::Expr(F) * ragged_present(e, ragged_iteration()));
}

}  // namespace strata::codegen
