// The independent classes a block graph computes index by index (docs/verifier.md §7,
// "Classes a block graph keeps whole, loops over or computes row by row").
//
// A customized op sees a class of its operands' dims (instance_reduction.h) through its
// block graph: a grid axis may split it into tiles, the for-loop may cut each block's part
// into iterations, or the block may hold it whole. The block graph is *uniform* along the
// class when its ops treat the class's tile dims as the program's ops treat the class —
// aligned, never contracted, reduced, normalized, sliced or concatenated along (ir/dim_links.h)
// — and the loop and the savers keep every index in its place:
//
//  - the grid: one grid axis maps the class's dims in every operand, or none does; an output
//    saver places the class's tile dim by that axis (or, with none, by no axis), and the
//    axis places nothing else;
//  - the loop: either no for-loop split cuts the class (the iterations run over something
//    else, and every accumulator combines iterations index by index along the class), or the
//    for-loop iterates over the class: every for-loop split of every operand is along the
//    class's dim, every operand with the class is cut by it, the loop divides each block's
//    part evenly, no running op carries values across iterations, and every accumulator is
//    `accum` concatenating the iterations along the class's dim (iteration i's tile lands at
//    its own indices);
//  - every tile dim of the class has the extent of the class's part in one block (in one
//    iteration, for loop tiles of a loop over the class), and that extent is ≥ 2 (a dim of
//    extent 1 would broadcast).
//
// Then the op computes the element at index x along the class from its operands' elements at
// index x (and from elements without the class) by the same computation for every x, whatever
// the class's extent, the grid's extent along the class's axis and the number of iterations
// of a loop over the class. The reduction may therefore change all three.
#pragma once

#include <vector>

#include "strata/ir/block_graph.h"

namespace strata::verify {

/// How one block graph treats the classes of its operands.
struct BlockClasses {
  /// Per block tensor and dim: the class it carries, or −1.
  std::vector<std::vector<int>> labels;
  /// Per class: the block graph is uniform along it (vacuously for a class no operand has).
  std::vector<bool> uniform;
  /// Per class: the grid axis that splits it, −1 none (or not known: not uniform).
  std::vector<int> axis;
  /// The class the for-loop iterates over, or −1.
  int loop_class = -1;
};

/// The classes of block graph `b`, given per operand and dim its class (−1: none) in
/// `operands`, for `classes` classes.
BlockClasses block_classes(const BlockGraph& b, const std::vector<std::vector<int>>& operands,
                           int classes);

}  // namespace strata::verify
