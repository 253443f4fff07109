#include "strata/opt/output_routes.h"

#include <algorithm>

namespace strata {
namespace {

/// The route of output `oi` of customized op `op` (result `t`), or nullopt (see the header).
std::optional<OutputRoute> route_of(const KernelGraph& g, const KernelOp& op, int oi, int t,
                                    const std::vector<std::vector<int>>& readers,
                                    const std::vector<std::optional<KernelView>>& views,
                                    const std::vector<DType>& dtype_of) {
  std::optional<OutputRoute> route = slice_partition(g, t, readers, views, dtype_of);
  if (!route) return std::nullopt;
  const Shape& shape = g.tensor(t).shape;
  const int d = route->dim;
  // The kernel saves the tensor in tiles the grid splits exactly along d, and every boundary
  // is a multiple of the tile: each block's tile lies in one part.
  const BlockGraph& b = *op.body;
  const BlockOp& saver = b.op(b.output_op(oi));
  const int64_t tile = b.tensor(saver.inputs[0]).shape[d];
  int axis = -1;
  for (int a = 0; a < 3; ++a)
    if (b.grid()[a] > 1 && saver.attrs.omap[a] == d) axis = a;
  if (axis < 0 || tile < 1 || tile * b.grid()[axis] != shape[d]) return std::nullopt;
  if (b.output_shape(oi) != shape) return std::nullopt;
  for (const RoutePart& p : route->parts)
    if (p.start % tile != 0 || p.end % tile != 0) return std::nullopt;
  return route;
}

}  // namespace

std::optional<OutputRoute> slice_partition(const KernelGraph& g, int t,
                                           const std::vector<std::vector<int>>& readers,
                                           const std::vector<std::optional<KernelView>>& views,
                                           const std::vector<DType>& dtype_of) {
  if (readers[t].empty()) return std::nullopt;
  OutputRoute p;
  for (int r : readers[t]) {
    const KernelOp& s = g.op(r);
    if (s.kind != OpKind::Slice || s.inputs.size() != 1 || s.outputs.size() != 1)
      return std::nullopt;
    const int u = s.outputs[0];
    if (u < static_cast<int>(views.size()) && views[u]) return std::nullopt;  // read in place
    if (!dtype_of.empty() && dtype_of[u] != dtype_of[t]) return std::nullopt;
    if (p.dim < 0) p.dim = s.attrs.dim;
    if (s.attrs.dim != p.dim) return std::nullopt;
    p.parts.push_back({r, u, s.attrs.start, s.attrs.end});
  }
  const Shape& shape = g.tensor(t).shape;
  if (p.dim < 0 || p.dim >= shape.rank()) return std::nullopt;
  std::sort(p.parts.begin(), p.parts.end(),
            [](const RoutePart& a, const RoutePart& b) { return a.start < b.start; });
  int64_t next = 0;
  for (const RoutePart& part : p.parts) {
    if (part.start != next || part.end <= part.start) return std::nullopt;
    next = part.end;
  }
  if (next != shape[p.dim]) return std::nullopt;
  return p;
}

std::vector<std::optional<OutputRoute>> plan_output_routes(
    const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
    const std::vector<DType>& dtype_of) {
  const int nt = static_cast<int>(g.tensors().size());
  std::vector<std::optional<OutputRoute>> routes(nt);
  std::vector<bool> boundary(nt, false);
  for (int t : g.outputs()) boundary[t] = true;
  for (int t : g.inputs()) boundary[t] = true;
  std::vector<std::vector<int>> readers(nt);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized || !op.body) continue;
    for (size_t oi = 0; oi < op.outputs.size(); ++oi) {
      const int t = op.outputs[oi];
      if (boundary[t]) continue;
      routes[t] = route_of(g, op, static_cast<int>(oi), t, readers, views, dtype_of);
    }
  }
  return routes;
}

OutputParts output_parts(const KernelOp& op, int oi, const OutputRoute& route) {
  const BlockGraph& b = *op.body;
  const BlockOp& saver = b.op(b.output_op(oi));
  OutputParts p;
  p.dim = route.dim;
  p.tile = b.tensor(saver.inputs[0]).shape[route.dim];
  for (int a = 0; a < 3; ++a)
    if (b.grid()[a] > 1 && saver.attrs.omap[a] == route.dim) p.axis = a;
  for (const RoutePart& part : route.parts) {
    p.starts.push_back(part.start);
    p.ends.push_back(part.end);
  }
  return p;
}

bool is_routed_slice(const KernelGraph& g, const std::vector<std::optional<OutputRoute>>& routes,
                     int op) {
  const KernelOp& k = g.op(op);
  if (k.kind != OpKind::Slice || k.inputs.empty()) return false;
  const std::optional<OutputRoute>& r = routes[k.inputs[0]];
  if (!r) return false;
  return std::any_of(r->parts.begin(), r->parts.end(),
                     [&](const RoutePart& p) { return p.slice_op == op; });
}

}  // namespace strata
