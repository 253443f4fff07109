#include "strata/opt/packed_outputs.h"

#include <algorithm>

namespace strata {
namespace {

/// The packing of kernel tensor `t` (see the header), or nullopt: its slices partition a dim
/// (slice_partition) and each is a graph output listed once, read by no op.
std::optional<PackedOutput> packing_of(const KernelGraph& g, int t,
                                       const std::vector<std::vector<int>>& readers,
                                       const std::vector<int>& output_count,
                                       const std::vector<int>& output_index,
                                       const std::vector<std::optional<KernelView>>& views,
                                       const std::vector<DType>& dtype_of) {
  const std::optional<OutputRoute> parts = slice_partition(g, t, readers, views, dtype_of);
  if (!parts) return std::nullopt;
  PackedOutput p;
  p.dim = parts->dim;
  for (const RoutePart& part : parts->parts) {
    const int u = part.tensor;
    if (output_count[u] != 1 || !readers[u].empty()) return std::nullopt;
    p.parts.push_back({part.slice_op, u, output_index[u], part.start, part.end});
  }
  return p;
}

}  // namespace

std::vector<std::optional<PackedOutput>> plan_packed_outputs(
    const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
    const std::vector<std::optional<OutputRoute>>& routes, const std::vector<DType>& dtype_of) {
  const int nt = static_cast<int>(g.tensors().size());
  std::vector<std::optional<PackedOutput>> packed(nt);
  std::vector<int> output_count(nt, 0), output_index(nt, -1);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const int t = g.outputs()[i];
    ++output_count[t];
    output_index[t] = static_cast<int>(i);
  }
  std::vector<bool> input(nt, false);
  for (int t : g.inputs()) input[t] = true;
  std::vector<std::vector<int>> readers(nt);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  for (int t = 0; t < nt; ++t) {
    if (input[t] || output_count[t] > 0 || g.tensor(t).producer < 0) continue;
    if (t < static_cast<int>(routes.size()) && routes[t]) continue;
    if (t < static_cast<int>(views.size()) && views[t]) continue;
    packed[t] = packing_of(g, t, readers, output_count, output_index, views, dtype_of);
  }
  return packed;
}

bool is_packed_slice(const KernelGraph& g, const std::vector<std::optional<PackedOutput>>& packed,
                     int op) {
  const KernelOp& k = g.op(op);
  if (k.kind != OpKind::Slice || k.inputs.empty()) return false;
  const int t = k.inputs[0];
  if (t >= static_cast<int>(packed.size()) || !packed[t]) return false;
  return std::any_of(packed[t]->parts.begin(), packed[t]->parts.end(),
                     [&](const PackedPart& p) { return p.slice_op == op; });
}

std::vector<OutputLayout> output_layouts(const KernelGraph& g,
                                         const std::vector<std::optional<PackedOutput>>& packed) {
  std::vector<OutputLayout> layouts(g.outputs().size());
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Shape& shape = g.tensor(g.outputs()[i]).shape;
    layouts[i] = {static_cast<int>(i), 0, shape.strides(), shape.numel()};
  }
  for (const std::optional<PackedOutput>& p : packed) {
    if (!p) continue;
    const int owner = p->parts.front().slice_op >= 0 ? p->parts.front().output : -1;
    const KernelOp& first = g.op(p->parts.front().slice_op);
    const Shape& whole = g.tensor(first.inputs[0]).shape;
    const std::vector<int64_t> strides = whole.strides();
    for (const PackedPart& part : p->parts) {
      OutputLayout& l = layouts[part.output];
      l.base = owner;
      l.offset = part.start * strides[p->dim];
      l.strides = strides;
      l.alloc = part.output == owner ? whole.numel() : 0;
    }
  }
  return layouts;
}

}  // namespace strata
