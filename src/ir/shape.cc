#include "strata/shape.h"

#include <algorithm>

namespace strata {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  if (name == "f32") return DType::f32;
  return std::nullopt;
}

int dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

Shape::Shape(std::initializer_list<int64_t> dims) {
  rank_ = static_cast<int>(std::min<size_t>(dims.size(), kMaxRank));
  std::copy_n(dims.begin(), rank_, dims_.begin());
}

Result<Shape> Shape::make(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return make_error("shape has rank " + std::to_string(dims.size()) + "; at most " +
                      std::to_string(kMaxRank) + " dimensions are supported");
  }
  Shape s;
  s.rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < s.rank_; ++i) {
    if (dims[i] < 1) {
      return make_error("shape dimension " + std::to_string(i) + " is " +
                        std::to_string(dims[i]) + "; every extent must be at least 1");
    }
    s.dims_[i] = dims[i];
  }
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::stride(int d) const {
  int64_t s = 1;
  for (int i = d + 1; i < rank_; ++i) s *= dims_[i];
  return s;
}

std::optional<int> Shape::normalize_dim(int d) const {
  if (d < 0) d += rank_;
  if (d < 0 || d >= rank_) return std::nullopt;
  return d;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  auto s = Shape::make(out);
  if (!s.ok()) return std::nullopt;
  return s.value();
}

}  // namespace strata
