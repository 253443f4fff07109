// How the dims of an op's result relate to its operands' dims: which operand dims index the
// same thing as each result dim, which operand dims an op contracts against each other, and
// along which dims the op combines different indices (contracts, reduces, normalizes, slices or
// concatenates).
//
// This is the one statement of that relation. The search's dimension classes
// (search/dim_classes.h: the dims of a program that index the same thing) link every pair it
// names; the verifier's reduced instances (docs/verifier.md §7: the dims no op combines across,
// which may shrink) join the aligned pairs and exclude every dim an op combines along.
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

namespace strata {

/// How the dims of an op's output relate to its inputs' dims. An operand dim is named by the
/// pair (input position, dim). Only operand dims of extent > 1 appear in `aligned`,
/// `combined` and `contracted`: a dim of extent 1 is broadcast, not linked.
struct DimLinks {
  /// Per output dim: the operand dims that index it (the same index), aligned with it.
  std::vector<std::vector<std::pair<int, int>>> aligned;
  /// Per output dim: the operand dims that index it although the op combines along it (a
  /// norm's dim: each result element along it reads every element of the operand's).
  std::vector<std::vector<std::pair<int, int>>> combined;
  /// Pairs of operand dims that index the same thing and that the op sums over together,
  /// making no output dim (a matmul's inner dim: A's columns with B's rows).
  std::vector<std::pair<std::pair<int, int>, std::pair<int, int>>> contracted;
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
/// (verify/block_classes.h). nullopt for any other op.
std::optional<DimLinks> dim_links(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& in,
                                  const Shape& out);

}  // namespace strata
