// Ragged tiles in the emitted code (docs/codegen.md, "Ragged tiles"): the present extent of a
// ragged tile dim in this block and iteration, the conditions that leave absent positions out,
// and the element counts of means over ragged dims. The plan's KernelPlan::ragged says which
// dims are ragged; nothing here is emitted for a graph without ragged tiles.
#include "block_emitter.h"

namespace strata::codegen {

std::string BlockEmitter::ragged_part(int e) const {
  const RaggedExtent& r = plan_.ragged.extents[e];
  if (r.axis < 0) return lit(r.extent);
  return "rgp" + std::to_string(e);
}

void BlockEmitter::declare_ragged_parts() {
  if (!plan_.ragged.any()) return;
  w_.line("// ragged tiles: the part of each ragged extent this block covers");
  static const char* kAxis[3] = {"bx", "by", "bz"};
  for (size_t e = 0; e < plan_.ragged.extents.size(); ++e) {
    const RaggedExtent& r = plan_.ragged.extents[e];
    if (r.axis < 0) continue;
    w_.line("const int rgp" + std::to_string(e) + " = strata_rt::imin(" + lit(r.block_tile) + ", " +
            lit(r.extent) + " - " + std::string(kAxis[r.axis]) + " * " + lit(r.block_tile) + ");");
  }
}

std::string BlockEmitter::ragged_present(int e, const std::string& iter) const {
  const RaggedExtent& r = plan_.ragged.extents[e];
  if (!r.loop) return ragged_part(e);
  return "strata_rt::imin(" + lit(r.tile) + ", " + ragged_part(e) + " - " + paren(iter) + " * " +
         lit(r.tile) + ")";
}

std::string BlockEmitter::ragged_absent(int t, const std::vector<std::string>& idx, unsigned dims,
                                        const std::string& iter) const {
  if (!plan_.ragged.any()) return "";
  std::string cond;
  for (size_t d = 0; d < idx.size(); ++d) {
    const int e = plan_.ragged.dim(t, static_cast<int>(d));
    if (e < 0 || !(dims >> d & 1u)) continue;
    if (!cond.empty()) cond += " || ";
    cond += paren(idx[d]) + " >= " + ragged_present(e, iter);
  }
  return cond;
}

std::string BlockEmitter::ragged_count(int i) const {
  const BlockOp& op = g_.op(i);
  const int e = plan_.ops[i].ragged_extent;
  const bool accum = op_category(op.kind) == Category::Accum;
  const int64_t F = accum ? g_.forloop() : 1;
  if (e < 0) return "";
  const RaggedExtent& r = plan_.ragged.extents[e];
  // A loop split of the reduced dim: the iterations together cover the block's part.
  if (accum && r.loop) return "static_cast<float>(" + ragged_part(e) + ")";
  const std::string present = ragged_present(e, in_loop_ ? "it" : "0");
  return F == 1 ? "static_cast<float>(" + present + ")"
                : "static_cast<float>(" + lit(F) + " * " + present + ")";
}

}  // namespace strata::codegen
