// How the dims of an op's result relate to its operands' dims, for the reduced instances
// (docs/verifier.md §7): which operand dims index the same thing as each result dim, and
// along which dims the op combines different indices (contracts, reduces, normalizes,
// slices or concatenates).
//
// The relation is the same for an op of a kernel graph and the same op on tiles in a block
// graph (docs/mugraph-semantics.md §3.2), so one function serves both levels. A result dim is
// *aligned* with an operand dim when the result's element at index i along it is computed
// from the operand's elements at index i only, by a computation that does not depend on i.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "strata/ir/op.h"
#include "strata/ir/shape.h"

namespace strata::verify {

/// How the dims of an op's output relate to its inputs' dims.
struct DimLinks {
  /// Per output dim: the (input, dim) pairs of extent > 1 that index it (the same index).
  /// Operand dims of extent 1 are broadcast, not aligned.
  std::vector<std::vector<std::pair<int, int>>> aligned;
  /// Input dims the op contracts, reduces, normalizes, slices or concatenates along.
  std::vector<std::pair<int, int>> forbidden_in;
  /// Output dims such an op makes (a reduced, sliced or concatenated dim).
  std::vector<int> forbidden_out;
};

/// The dim relation of an op with input shapes `in` and output shape `out`: the predefined
/// ops (categories Unary, Binary, Matmul, Reduce, Norm, Concat, Layout, Collective), and the
/// block-level running ops, thread graphs and accumulators. An accumulator is described
/// within one iteration (its tile against its result); accum's concatenation of the
/// iterations along its fmap dim counts as a concatenation along that dim, and what
/// accumulating over the iterations means for a class is the caller's to judge
/// (block_classes.h). nullopt for any other op.
std::optional<DimLinks> dim_links(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in,
                                  const Shape& out);

}  // namespace strata::verify
