// Tensor shapes and element types shared by every level of a μGraph (docs/mugraph-semantics.md).
//
// A Shape has rank 0..kMaxRank; every extent is ≥ 1. Tensors are stored row-major: the last
// dimension is contiguous.
//
// Size bound: a tensor of a graph has at most kMaxElements elements. Shape::make and
// Shape::check enforce it, and every graph constructor (kernel and block graph inputs, shape
// inference, output savers) checks the shapes it builds, so every loader (the .strata parser,
// the μGraph JSON reader, the C++ API) rejects larger tensors with the same message. Within the
// bound, element counts, strides and byte sizes of one tensor fit easily in int64_t; products
// of several of them (trip counts × tile bytes in the cost model) use saturating_mul.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata {

inline constexpr int kMaxRank = 4;
/// Largest tensor, in elements (2^48): far beyond any GPU, small enough that element counts
/// and byte sizes of a tensor never overflow 64-bit arithmetic.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

/// a·b for a, b ≥ 0, saturated at INT64_MAX instead of overflowing.
int64_t saturating_mul(int64_t a, int64_t b);
/// a + b for a, b ≥ 0, saturated at INT64_MAX instead of overflowing.
int64_t saturating_add(int64_t a, int64_t b);

/// Element type of a device tensor. Search and verification ignore it; codegen uses it.
enum class DType : uint8_t { f16, bf16, f32 };

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
int dtype_size(DType t);

/// A checked, fixed-capacity shape. Build with Shape::make (checks) or the unchecked
/// initializer-list constructor for literals known to be valid.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  /// Validates rank ≤ kMaxRank, every extent ≥ 1 and at most kMaxElements elements.
  static Result<Shape> make(const std::vector<int64_t>& dims);
  /// A shape of the first kMaxRank of `dims`, unchecked (for results that a caller checks
  /// with check() before use).
  static Shape unchecked(const std::vector<int64_t>& dims);
  /// The checks of make() on this shape (which may have been built or changed unchecked).
  Status check() const;

  int rank() const { return rank_; }
  int64_t operator[](int d) const { return dims_[d]; }
  int64_t& operator[](int d) { return dims_[d]; }
  /// Element count (saturated at INT64_MAX for an unchecked shape beyond the bound).
  int64_t numel() const;
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  /// Row-major stride of dimension d (product of the extents after it).
  int64_t stride(int d) const;
  /// Every dimension's row-major stride, outermost first.
  std::vector<int64_t> strides() const;

  /// Normalizes a possibly negative dimension index; nullopt if out of range.
  std::optional<int> normalize_dim(int d) const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[16, 4096]".
  std::string str() const;

 private:
  std::array<int64_t, kMaxRank> dims_{1, 1, 1, 1};
  int rank_ = 0;
};

/// NumPy broadcasting of two shapes (size-1 or missing leading dims); nullopt if incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace strata
