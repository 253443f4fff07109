#include "strata/opt/matmul_lowering.h"

#include <initializer_list>

namespace strata {

std::optional<BlockGraph> lower_matmul_to_block_graph(const Shape& a, const Shape& b) {
  const int r = a.rank();
  const int64_t m = a[r - 2], k = a[r - 1], n = b[r - 1];
  auto pick = [](int64_t extent, std::initializer_list<int64_t> sizes) -> int64_t {
    for (int64_t s : sizes)
      if (extent % s == 0) return s;
    return 0;
  };
  const int64_t tn = pick(n, {64, 32, 16, 8});
  const int64_t tk = pick(k, {64, 32, 16});
  const int64_t tm = m <= 64 ? m : pick(m, {64, 32, 16});
  if (tn == 0 || tk == 0 || tm == 0) return std::nullopt;
  const int64_t batch0 = r >= 3 ? a[0] : 1;
  if (n / tn > (int64_t{1} << 31) - 1 || m / tm > 65535 || batch0 > 65535) return std::nullopt;
  Dim3 grid{static_cast<int>(n / tn), static_cast<int>(m / tm), static_cast<int>(batch0)};
  auto bg = BlockGraph::make(grid, 128, static_cast<int>(k / tk));
  if (!bg.ok()) return std::nullopt;
  BlockGraph g = std::move(bg).value();
  const int zdim = grid.z > 1 ? 0 : kReplicate;
  auto xa = g.add_input(a, {kReplicate, grid.y > 1 ? r - 2 : kReplicate, zdim}, r - 1);
  if (!xa.ok()) return std::nullopt;
  auto xb = g.add_input(b, {grid.x > 1 ? r - 1 : kReplicate, kReplicate, zdim}, r - 2);
  if (!xb.ok()) return std::nullopt;
  auto mm = g.add_op(OpKind::Matmul, {*xa, *xb});
  if (!mm.ok()) return std::nullopt;
  auto acc = g.add_op(OpKind::AccumSum, {*mm});
  if (!acc.ok()) return std::nullopt;
  if (!g.add_output(*acc, {grid.x > 1 ? r - 1 : kReplicate, grid.y > 1 ? r - 2 : kReplicate, zdim})
           .ok())
    return std::nullopt;
  return g;
}

bool library_matmul_supported(const Shape& a, const Shape& b, DType ta, DType tb, DType tc) {
  if (ta != tb || ta == DType::f32 || (tc != ta && tc != DType::f32)) return false;
  const int r = a.rank();
  if (r < 2 || b.rank() != r) return false;
  constexpr int64_t kMaxInt = (int64_t{1} << 31) - 1;
  const int64_t m = a[r - 2], k = a[r - 1], n = b[r - 1];
  int64_t batch = 1;
  for (int d = 0; d + 2 < r; ++d) batch *= a[d];
  return m <= kMaxInt && n <= kMaxInt && k <= kMaxInt && batch <= kMaxInt;
}

std::shared_ptr<const BlockGraph> kernel_block_graph(const KernelGraph& g, int i) {
  const KernelOp& op = g.op(i);
  if (op.kind == OpKind::Customized) return op.body;
  if (op.kind != OpKind::Matmul) return nullptr;
  auto lowered =
      lower_matmul_to_block_graph(g.tensor(op.inputs[0]).shape, g.tensor(op.inputs[1]).shape);
  return lowered ? std::make_shared<const BlockGraph>(std::move(*lowered)) : nullptr;
}

}  // namespace strata
