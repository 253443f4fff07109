#include "strata/interp/tensor_data.h"

namespace strata {

std::vector<int64_t> unflatten_index(const Shape& s, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

std::string index_str(const Shape& s, int64_t flat) {
  std::string out = "[";
  std::vector<int64_t> idx = unflatten_index(s, flat);
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(idx[i]);
  }
  return out + "]";
}

}  // namespace strata
