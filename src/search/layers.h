// Weight layers of a program (docs/search.md, "Layers"): the seams at which a long program is
// searched in segments, one segment per layer of weight matmuls.
#pragma once

#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// The assignment of a program's ops to weight layers.
struct LayerSplit {
  /// Weight matmuls on the longest path through the program: 0 when it has none.
  int layers = 0;
  /// Per op id: its segment, 0 to max(layers, 1) - 1; -1 for the program's inputs.
  std::vector<int> segment_of;
};

/// True when tensor t of `p` is a program input or a view (a Layout op: transpose, slice) of
/// one: a weight, when a matmul reads it.
bool is_program_operand(const KernelGraph& p, int t);

/// Splits `p` into weight layers. A *weight matmul* is a matmul that reads a program input (or
/// a view of one) as an operand. An op's layer is the largest layer of the ops whose results it
/// reads, plus one if it is a weight matmul: so an op after a weight matmul (the residual add,
/// the norm, the activation, the product of a gated pair) lies in that matmul's layer, its
/// epilogue. Ops before the first weight matmul (layer 0, on program inputs only: a norm of the
/// input, a view of a weight) lie in the earliest segment that reads them, their prologue.
/// Segment k holds layer k + 1. Along every edge the segment does not decrease, so the
/// segments in order are a valid order of the program and each is convex.
LayerSplit split_weight_layers(const KernelGraph& p);

}  // namespace strata::search
