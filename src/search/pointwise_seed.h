// Pointwise seeds (docs/search.md, "Pointwise seeds"): a program made of elementwise work —
// unary and binary ops with broadcasting, slices and concats, RMSNorm over the last dim — gets
// one candidate built directly instead of enumerated: one customized kernel per output shape,
// its grid over the first dim of that shape that is not the last and holds more than one
// element, each block computing its rows of every output of that shape from the program's
// inputs. The enumeration finds such graphs for small programs, but its limits (block ops per
// kernel, tiles per class, blocks per grid) keep it from programs of many ops (rotary: 14 ops)
// or of many rows (a residual add + RMSNorm over 4096 tokens). The seed is verified like every
// candidate; the search only offers it.
#pragma once

#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// The seeds of complete program `program`, one per number of split-dim rows per block (1,
/// and 2, 4, 8 where they divide every output's split extent into at least `min_blocks`
/// blocks: the search passes the target's SM count, one wave); empty
/// when some op is not elementwise work as above, an op slices, concatenates or normalizes
/// along the split dim, or an input does not broadcast along it (docs/search.md, "Pointwise
/// seeds").
std::vector<KernelGraph> pointwise_seeds(const KernelGraph& program, int64_t min_blocks);

}  // namespace strata::search
