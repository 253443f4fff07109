// Pointwise seeds (docs/search.md, "Pointwise seeds"): a program made of elementwise work —
// unary and binary ops with broadcasting, slices and concats, RMSNorm and the reductions
// (sum, mean, max) along a dim that is not split — gets one candidate built directly instead of
// enumerated: one customized kernel per split extent (the outputs of one rank whose split dim —
// the first dim that is not the last and holds more than one element — has the same place and
// extent: rotary's Q [T, H, D] and K [T, KVH, D] share a kernel), its grid over the split dim,
// each block computing its rows of every output of the kernel from the program's inputs; when
// that kernel cannot be built, one kernel per output shape. The enumeration finds such graphs
// for small programs, but its limits (block ops per kernel, tiles per class, blocks per grid)
// keep it from programs of many ops (rotary: 14 ops) or of many rows (a residual add + RMSNorm
// over 4096 tokens). The seed is verified like every candidate; the search only offers it. The same
// builder makes the kernels of the elementwise regions of a library form (library_form.h),
// each region handed to it as a program of its own.
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// The numbers of split-dim rows per block that seeds of `program` take: 1, and 2, 4, 8 where
/// they divide every output's split extent into at least `min_blocks` blocks (the search passes
/// the target's SM count: one wave). Which is fastest depends on the row length; the GPU
/// profile picks (docs/search.md, "Pointwise seeds").
std::vector<int64_t> pointwise_seed_rows(const KernelGraph& program, int64_t min_blocks);

/// The seed of complete program `program` with `rows` rows of the split dim per block: its
/// inputs are the program's (same ids, names, shapes), then its customized kernels, its outputs
/// the program's (same order and names). nullopt when some op is not elementwise work as above,
/// an op slices, concatenates, normalizes or reduces along the split dim, an input does not
/// broadcast along it, or `rows` does not divide a split extent.
std::optional<KernelGraph> pointwise_seed(const KernelGraph& program, int64_t rows);

/// The seeds of `program`, one per row count of pointwise_seed_rows that pointwise_seed builds.
std::vector<KernelGraph> pointwise_seeds(const KernelGraph& program, int64_t min_blocks);

}  // namespace strata::search
