#include "elementwise_access.h"

#include <algorithm>

namespace strata::codegen {

ElementwiseAccess elementwise_access(const Shape& out, int out_size, const std::vector<Shape>& in,
                                     const std::vector<int>& in_sizes) {
  const int r = out.rank();
  const size_t n_in = in.size();
  // Extent of operand k along output dim d (right-aligned; a missing leading dim is 1).
  auto extent = [&](size_t k, int d) -> int64_t {
    const int dk = d - (r - in[k].rank());
    return dk >= 0 ? in[k][dk] : 1;
  };
  std::vector<int64_t> dims;             // coalesced output extents
  std::vector<std::vector<bool>> reads;  // per coalesced dim: which operands are read along it
  for (int d = 0; d < r; ++d) {
    if (out[d] == 1) continue;  // every operand has extent 1 there too
    std::vector<bool> rd(n_in);
    for (size_t k = 0; k < n_in; ++k) rd[k] = extent(k, d) != 1;
    if (!dims.empty() && reads.back() == rd) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      reads.push_back(std::move(rd));
    }
  }
  if (dims.empty()) {  // a single element
    dims.push_back(1);
    reads.emplace_back(n_in, false);
  }
  ElementwiseAccess a;
  a.out = Shape::unchecked(dims);
  int smallest = out_size;
  for (size_t k = 0; k < n_in; ++k) {
    std::vector<int64_t> od(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) od[i] = reads[i][k] ? dims[i] : 1;
    a.operands.push_back(Shape::unchecked(od));
    if (reads.back()[k]) smallest = std::min(smallest, in_sizes[k]);
  }
  const int64_t inner = dims.back();
  a.vector = 16 / std::max(1, smallest);
  while (a.vector > 1 && inner % a.vector != 0) a.vector /= 2;
  return a;
}

bool index_fits_int32(int64_t work, int64_t stride, int64_t max_elements) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  return max_elements <= kLimit && work <= kLimit - stride;
}

}  // namespace strata::codegen
