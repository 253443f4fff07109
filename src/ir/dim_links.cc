#include "strata/ir/dim_links.h"

namespace strata {

std::optional<DimLinks> dim_links(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in,
                                  const Shape& out) {
  DimLinks l;
  const int r = out.rank();
  l.aligned.resize(r);
  l.combined.resize(r);
  auto linked = [&](int i, int di) { return di >= 0 && di < in[i].rank() && in[i][di] > 1; };
  auto align = [&](int d, int i, int di) {
    if (linked(i, di)) l.aligned[d].push_back({i, di});
  };
  // Every operand aligned with the result from the right (NumPy broadcasting).
  auto broadcast = [&] {
    for (int d = 0; d < r; ++d)
      for (int i = 0; i < static_cast<int>(in.size()); ++i) align(d, i, in[i].rank() - r + d);
  };
  // The last dim reduced (to 1 or to groups): every other dim aligned, the last forbidden.
  auto last_reduced = [&] {
    for (int d = 0; d + 1 < r; ++d)
      for (int i = 0; i < static_cast<int>(in.size()); ++i) align(d, i, in[i].rank() - r + d);
    for (int i = 0; i < static_cast<int>(in.size()); ++i)
      if (in[i].rank() == r) l.forbidden_in.push_back({i, r - 1});
    l.forbidden_out.push_back(r - 1);
  };
  const int dim = attrs.dim;
  switch (op_category(kind)) {
    case Category::Unary:
    case Category::Collective:
      for (int d = 0; d < r; ++d) align(d, 0, d);
      return l;
    case Category::Binary:  // broadcasting aligns dims from the right
    case Category::Fused:   // a thread graph: elementwise steps with broadcasting
      broadcast();
      return l;
    case Category::Matmul:
      for (int d = 0; d < r - 2; ++d) {
        align(d, 0, d);
        align(d, 1, d);
      }
      align(r - 2, 0, r - 2);
      align(r - 1, 1, r - 1);
      if (linked(0, r - 1) && linked(1, r - 2)) l.contracted.push_back({{0, r - 1}, {1, r - 2}});
      l.forbidden_in = {{0, r - 1}, {1, r - 2}};
      return l;
    case Category::Reduce:
    case Category::Norm:
    case Category::Concat:
      for (int d = 0; d < r; ++d) {
        if (d == dim) continue;
        for (int i = 0; i < static_cast<int>(in.size()); ++i) align(d, i, d);
      }
      if (op_category(kind) == Category::Norm && dim >= 0 && dim < r)  // the same index
        for (int i = 0; i < static_cast<int>(in.size()); ++i)
          if (linked(i, dim)) l.combined[dim].push_back({i, dim});
      for (int i = 0; i < static_cast<int>(in.size()); ++i) l.forbidden_in.push_back({i, dim});
      l.forbidden_out.push_back(dim);
      return l;
    case Category::Layout:
      if (kind == OpKind::Transpose) {
        for (int d = 0; d < r; ++d) align(d, 0, d < r - 2 ? d : (d == r - 1 ? r - 2 : r - 1));
        return l;
      }
      for (int d = 0; d < r; ++d)  // slice
        if (d != dim) align(d, 0, d);
      l.forbidden_in.push_back({0, dim});
      l.forbidden_out.push_back(dim);
      return l;
    case Category::Scan:  // running_max: the last dim reduced to 1
      last_reduced();
      return l;
    case Category::Accum:
      if (kind == OpKind::AccumSum) {
        for (int d = 0; d < r; ++d)
          if (d != attrs.fmap) align(d, 0, d);
        if (attrs.fmap != kReplicate) {  // the iterations concatenated along fmap
          l.forbidden_in.push_back({0, attrs.fmap});
          l.forbidden_out.push_back(attrs.fmap);
        }
        return l;
      }
      if (kind == OpKind::AccumRescale) {  // y's shape, the shift m broadcast to it
        broadcast();
        return l;
      }
      last_reduced();  // the _ld accumulators and accum_sum_to_dimx
      return l;
    default:
      return std::nullopt;
  }
}

}  // namespace strata
