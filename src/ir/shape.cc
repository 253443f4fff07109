#include "strata/ir/shape.h"

#include <algorithm>
#include <limits>

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

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  rank_ = static_cast<int>(std::min<size_t>(dims.size(), kMaxRank));
  std::copy_n(dims.begin(), rank_, dims_.begin());
}

Shape Shape::unchecked(const std::vector<int64_t>& dims) {
  Shape s;
  s.rank_ = static_cast<int>(std::min<size_t>(dims.size(), kMaxRank));
  std::copy_n(dims.begin(), s.rank_, s.dims_.begin());
  return s;
}

Result<Shape> Shape::make(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return make_error("shape has rank " + std::to_string(dims.size()) + "; at most " +
                      std::to_string(kMaxRank) + " dimensions are supported");
  }
  Shape s;
  s.rank_ = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), s.dims_.begin());
  STRATA_RETURN_IF_ERROR(s.check());
  return s;
}

Status Shape::check() const {
  if (rank_ < 0 || rank_ > kMaxRank)
    return make_error("shape has rank " + std::to_string(rank_) + "; at most " +
                      std::to_string(kMaxRank) + " dimensions are supported");
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 1) {
      return make_error("shape dimension " + std::to_string(i) + " is " + std::to_string(dims_[i]) +
                        "; every extent must be at least 1");
    }
    n = saturating_mul(n, dims_[i]);
  }
  if (n > kMaxElements)
    return make_error("shape " + str() +
                      " has more than 2^48 elements; expected a tensor that fits in GPU memory");
  return Status::success();
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n = saturating_mul(n, dims_[i]);
  return n;
}

int64_t Shape::stride(int d) const {
  int64_t s = 1;
  for (int i = d + 1; i < rank_; ++i) s = saturating_mul(s, dims_[i]);
  return s;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(rank_);
  for (int d = 0; d < rank_; ++d) s[d] = stride(d);
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
  // Unchecked: the result may exceed kMaxElements; shape inference checks it (Shape::check).
  return Shape::unchecked(out);
}

}  // namespace strata
