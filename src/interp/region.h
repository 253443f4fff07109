// Boxes and regions of tensor elements, for evaluating part of a graph (docs/mugraph-semantics.md;
// used by the
// verifier's demand-driven screening).
//
// Interpreter ops view every shape as rank 4 by prepending extents of 1 ("padded" shapes), so a
// Box always has four half-open ranges [lo, hi); dimension d of a rank-r shape is padded
// dimension d + 4 − r.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "strata/ir/shape.h"

namespace strata {

/// Extents of `s` padded to rank 4 with leading 1s.
inline std::array<int64_t, 4> padded_dims(const Shape& s) {
  std::array<int64_t, 4> d{1, 1, 1, 1};
  for (int i = 0; i < s.rank(); ++i) d[4 - s.rank() + i] = s[i];
  return d;
}

/// Row-major strides of padded dims.
inline std::array<int64_t, 4> padded_strides(const std::array<int64_t, 4>& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

/// A product of four half-open index ranges over padded dimensions.
struct Box {
  std::array<int64_t, 4> lo{0, 0, 0, 0};
  std::array<int64_t, 4> hi{1, 1, 1, 1};

  /// Every element of a tensor of shape `s`.
  static Box full(const Shape& s) {
    Box b;
    b.hi = padded_dims(s);
    return b;
  }
  bool empty() const {
    for (int d = 0; d < 4; ++d)
      if (hi[d] <= lo[d]) return true;
    return false;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) n *= std::max<int64_t>(0, hi[d] - lo[d]);
    return n;
  }
  Box intersect(const Box& o) const {
    Box r;
    for (int d = 0; d < 4; ++d) {
      r.lo[d] = std::max(lo[d], o.lo[d]);
      r.hi[d] = std::min(hi[d], o.hi[d]);
    }
    return r;
  }
  bool intersects(const Box& o) const { return !intersect(o).empty(); }
  bool contains(const std::array<int64_t, 4>& idx) const {
    for (int d = 0; d < 4; ++d)
      if (idx[d] < lo[d] || idx[d] >= hi[d]) return false;
    return true;
  }
  bool operator==(const Box&) const = default;
};

/// A union of boxes (possibly overlapping).
using Region = std::vector<Box>;

/// The smallest box containing every box of a non-empty region.
inline Box bounding_box(const Region& r) {
  Box b = r.front();
  for (const Box& x : r)
    for (int d = 0; d < 4; ++d) {
      b.lo[d] = std::min(b.lo[d], x.lo[d]);
      b.hi[d] = std::max(b.hi[d], x.hi[d]);
    }
  return b;
}

}  // namespace strata
