// Reduced instances: verifying a candidate on a program whose independent dims are shrunk
// (docs/verifier.md §7, "Reduced instances").
//
// A dim class of a program (the tensor dims that index the same thing: linked through
// elementwise ops, matmul batch/row/column dims, the kept dims of reductions, norms, slices
// and concats) is *independent* when no op of the program contracts, reduces, normalizes,
// slices or concatenates along it: each output element at index i along the class is then a
// function of the input elements at index i only, the same function for every i. Attention's
// heads and query rows are such classes; its head dim and keys are not.
//
// A candidate respects an independent class c when its kernel ops treat c's dims as the
// program does (elementwise, as batch, row or column dims, never contracted, reduced,
// normalized, sliced or concatenated along), and every customized op that reads a dim of c
// either
//  - splits it across the grid: one grid axis maps exactly the dims of c among its inputs and
//    outputs. A block then sees a tile of c whose extent does not depend on c's extent, and
//    the customized op computes every tile by the same function of the inputs' tiles; or
//  - computes it index by index (block_classes.h): its block graph treats c as the program
//    does, whether a grid axis splits c, the for-loop iterates over it or each block holds it
//    whole. The op then computes every index of c by the same function of the inputs at that
//    index, whatever its tiles, its grid along c and the trip count of a loop over c.
// Shrinking c to E' = E − k·L (L the least common multiple of the tiles of the ops of the
// first kind, 1 if none; their grids shrunk by k·L/tile, the last, possibly ragged, tile
// kept; the ops of the second kind rebuilt with as many blocks and iterations along c as
// divide E' evenly) gives an instance whose outputs are the same functions of their inputs,
// unit by unit, as the original's: the two graphs are equivalent on the original instance
// exactly when they are on the reduced one.
//
// The reduction is planned per (program, candidate) pair: the program's classes once
// (ProgramClasses), then for each candidate the classes it respects and the extents. Every
// condition that is not met drops the class from the reduction, never the candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::verify {

/// The independent classes of a program, by the dims of its inputs and outputs.
struct ProgramClasses {
  /// Per program tensor and dim: the class (an index into `extent`), or −1 for a dim that is
  /// not in an independent class (extent 1, reduced, contracted, …).
  std::vector<std::vector<int>> labels;
  std::vector<int64_t> extent;     ///< per class: the extent of each of its dims
  std::vector<std::string> names;  ///< per class: "Q.1", the first input dim in it
  bool empty() const { return extent.empty(); }
};

/// The program's independent classes. A program with customized ops, several ranks or an
/// all_reduce has none (it is verified on its own instance).
ProgramClasses independent_classes(const KernelGraph& program);

/// A program and a candidate shrunk along the classes the candidate respects.
struct ReducedPair {
  KernelGraph program, candidate;
  /// The reduced extents: per class, E or E′ (< E for at least one class).
  std::vector<int64_t> extents;
  /// Per class: reduced coordinates below it stand for the same coordinate of the original;
  /// from it on (the last tiles, which may be ragged) for the coordinate + E − E′.
  std::vector<int64_t> tail_start;
  /// "Q.1 16384 → 256, Q.0 8 → 2".
  std::string description;
};

/// The reduced pair for `candidate` (whose interface matches the program's), or nullopt when no
/// class can be shrunk. A shrunk class keeps two units of L (and the ragged remainder), or more
/// where a ragged split needs more blocks to keep its tile (⌈E′/g′⌉ must stay the tile); a
/// class every customized op computes index by index keeps two indices.
std::optional<ReducedPair> reduce_instance(const KernelGraph& program,
                                           const ProgramClasses& classes,
                                           const KernelGraph& candidate);

/// Maps a flat element index of output `output` of the reduced program to the index of the
/// element of the original output computed by the same function (the one the reduced
/// element stands for).
int64_t original_element(const KernelGraph& program, const ProgramClasses& classes,
                         const ReducedPair& reduced, int output, int64_t element);

}  // namespace strata::verify
