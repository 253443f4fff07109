#include "strata/opt/storage_types.h"

namespace strata {
namespace {

/// Which tensors are widened (see the header): all with `f32_intermediates`; else the storage
/// of every input of a customized kernel whose tiles have rows of an odd number of elements.
std::vector<bool> widened_tensors(const KernelGraph& g,
                                  const std::vector<std::optional<KernelView>>& views,
                                  bool f32_intermediates) {
  std::vector<bool> widen(g.tensors().size(), f32_intermediates);
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const BlockGraph& b = *op.body;
      const Shape& tile = b.tensor(b.op(b.input_op(static_cast<int>(k))).output).shape;
      // A transposed view's tile is copied along the rows of the tensor holding it.
      const int t = op.inputs[k], r = tile.rank();
      const int64_t row = r == 0                                           ? 1
                          : views[t] && views[t]->map.transposed && r >= 2 ? tile[r - 2]
                                                                           : tile[r - 1];
      if ((row * 2) % 4 != 0) widen[views[t] ? views[t]->storage : t] = true;
    }
  }
  return widen;
}

}  // namespace

std::vector<DType> storage_types(const KernelGraph& g,
                                 const std::vector<std::optional<KernelView>>& views,
                                 bool f32_intermediates) {
  const int nt = static_cast<int>(g.tensors().size());
  const std::vector<bool> widen = widened_tensors(g, views, f32_intermediates);
  std::vector<bool> boundary(nt, false);
  for (int t : g.inputs()) boundary[t] = true;
  for (int t : g.outputs()) boundary[t] = true;
  std::vector<DType> stored(nt);
  for (int t = 0; t < nt; ++t)
    stored[t] = boundary[t] || !widen[t] ? g.tensor(t).dtype : DType::f32;
  return stored;
}

}  // namespace strata
