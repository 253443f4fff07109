#include "strata/opt/kernel_views.h"

namespace strata {
namespace {

/// The views of the layout ops marked in `is_view`, composed from the first op on (a view of a
/// view composes the two maps).
std::vector<std::optional<KernelView>> compose_views(const KernelGraph& g,
                                                     const std::vector<bool>& is_view) {
  std::vector<std::optional<KernelView>> views(g.tensors().size());
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
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

}  // namespace

std::vector<std::optional<KernelView>> plan_kernel_views(
    const KernelGraph& g, const LibraryMatmulReader& library_reader) {
  const int nt = static_cast<int>(g.tensors().size());
  const int nops = static_cast<int>(g.ops().size());
  std::vector<bool> output(nt, false);
  for (int t : g.outputs()) output[t] = true;
  std::vector<std::vector<int>> readers(nt);
  for (int i = 0; i < nops; ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  // Every layout op that is not an output starts as a view; a view some reader cannot read in
  // place becomes a copy, until none changes. Views only ever become copies, so this ends, with
  // the largest set of views every reader accepts (a matmul's acceptance depends on the
  // composed map, which changes when a layout op before it becomes a copy: hence the rounds).
  std::vector<bool> is_view(nops, false);
  for (int i = 0; i < nops; ++i)
    is_view[i] = op_category(g.op(i).kind) == Category::Layout && !output[g.op(i).outputs[0]];
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<std::optional<KernelView>> views = compose_views(g, is_view);
    for (int i = 0; i < nops; ++i) {
      if (!is_view[i]) continue;
      const int out = g.op(i).outputs[0];
      bool ok = true;
      for (int r : readers[out]) {
        const KernelOp& reader = g.op(r);
        ok = ok && (reader.kind == OpKind::Customized || is_view[r] ||
                    (op_category(reader.kind) == Category::Matmul && library_reader &&
                     library_reader(r) && gemm_operand(g, out, views[out]).has_value()));
      }
      if (!ok) {
        is_view[i] = false;
        changed = true;
      }
    }
  }
  return compose_views(g, is_view);
}

bool is_kernel_view(const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
                    int op) {
  const KernelOp& k = g.op(op);
  return op_category(k.kind) == Category::Layout && views[k.outputs[0]].has_value();
}

std::optional<GemmOperand> gemm_operand(const KernelGraph& g, int t,
                                        const std::optional<KernelView>& view) {
  constexpr int64_t kMaxInt = (int64_t{1} << 31) - 1;
  const Shape& shape = g.tensor(t).shape;
  const int r = shape.rank();
  if (r < 2) return std::nullopt;
  GemmOperand o;
  if (!view) {
    o.storage = t;
    o.ld = shape[r - 1];
    o.stride = shape[r - 2] * shape[r - 1];
    return o.ld <= kMaxInt ? std::optional<GemmOperand>(o) : std::nullopt;
  }
  const Shape& s = g.tensor(view->storage).shape;
  if (s.rank() != r) return std::nullopt;
  const IndexMap& m = view->map;
  // Row-major strides of the storage; the offset of the view's first element.
  std::vector<int64_t> stride(r, 1);
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * s[d + 1];
  for (int d = 0; d < r; ++d) {
    const int64_t origin = m.origin.empty() ? 0 : m.origin[d];
    // Batch dims after the first must be whole: the flattened batch then steps by one stride.
    if (d >= 1 && d + 2 < r && (origin != 0 || s[d] != shape[d])) return std::nullopt;
    o.offset += origin * stride[d];
  }
  o.storage = view->storage;
  o.ld = s[r - 1];
  o.stride = s[r - 2] * s[r - 1];
  o.transposed = m.transposed;
  return o.ld <= kMaxInt ? std::optional<GemmOperand>(o) : std::nullopt;
}

}  // namespace strata
