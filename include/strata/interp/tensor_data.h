// Dense tensor values, as the interpreters compute them (docs/mugraph-semantics.md).
//
// A TensorData<V> holds one value per element of its shape, row-major (the last dimension is
// contiguous), so element [i0, …, ir-1] lives at Σ i_d · shape.stride(d). V is the value domain:
// double for the reference interpreter, a pair of field elements for the verifier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/ir/shape.h"

namespace strata {

template <class V>
struct TensorData {
  Shape shape;
  std::vector<V> data;  ///< shape.numel() values, row-major

  TensorData() = default;
  /// A tensor of the given shape with value-initialized elements (zero for double).
  explicit TensorData(const Shape& s) : shape(s), data(static_cast<size_t>(s.numel())) {}
  /// A tensor of the given shape with every element set to `fill`.
  TensorData(const Shape& s, V fill) : shape(s), data(static_cast<size_t>(s.numel()), fill) {}
  TensorData(const Shape& s, std::vector<V> values) : shape(s), data(std::move(values)) {}

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  V& operator[](int64_t flat) { return data[static_cast<size_t>(flat)]; }
  const V& operator[](int64_t flat) const { return data[static_cast<size_t>(flat)]; }
};

/// The multi-index of flat element `flat` of a tensor of shape `s` (row-major).
std::vector<int64_t> unflatten_index(const Shape& s, int64_t flat);
/// "[3, 17]": the multi-index of flat element `flat`, as printed in diagnostics.
std::string index_str(const Shape& s, int64_t flat);

}  // namespace strata
