#include "strata/opt/kernel_views.h"

namespace strata {

std::vector<std::optional<KernelView>> plan_kernel_views(const KernelGraph& g) {
  const int nt = static_cast<int>(g.tensors().size());
  const int nops = static_cast<int>(g.ops().size());
  std::vector<std::optional<KernelView>> views(nt);
  std::vector<bool> output(nt, false);
  for (int t : g.outputs()) output[t] = true;
  std::vector<std::vector<int>> readers(nt);
  for (int i = 0; i < nops; ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  // A layout op is a view when each reader is a customized kernel or a view: decide from the
  // last op back, so every reader is decided first.
  std::vector<bool> is_view(nops, false);
  for (int i = nops - 1; i >= 0; --i) {
    const KernelOp& op = g.op(i);
    if (op_category(op.kind) != Category::Layout || output[op.outputs[0]]) continue;
    bool ok = true;
    for (int r : readers[op.outputs[0]])
      ok = ok && (g.op(r).kind == OpKind::Customized || is_view[r]);
    is_view[i] = ok;
  }
  // Maps, from the first op on: a view of a view composes the two.
  for (int i = 0; i < nops; ++i) {
    if (!is_view[i]) continue;
    const KernelOp& op = g.op(i);
    const int in = op.inputs[0], out = op.outputs[0];
    KernelView v = views[in] ? *views[in] : KernelView{in, IndexMap{}};
    const BlockOp as_block{op.kind, {in}, out, op.attrs, {}};
    v.map = compose_layout(v.map, as_block, g.tensor(out).shape.rank());
    views[out] = v;
  }
  return views;
}

bool is_kernel_view(const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
                    int op) {
  const KernelOp& k = g.op(op);
  return op_category(k.kind) == Category::Layout && views[k.outputs[0]].has_value();
}

}  // namespace strata
