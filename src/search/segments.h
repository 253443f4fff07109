// The search of a program with collectives (all_reduce; docs/tensor-parallel.md, docs/search.md
// "Tensor parallelism"): communication splits the program into segments that no kernel spans,
// each segment is searched as a program of its own, and the best graphs of the segments are
// joined with the collectives between them.
#pragma once

#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata::search {

/// True when the program holds an op of category Collective.
bool has_collectives(const KernelGraph& program);

/// superoptimize for a program with collectives. Each segment (the ops between collectives,
/// with the tensors they read from outside as inputs and the tensors read later as outputs)
/// is searched by superoptimize with `config` (its time limit shared among the segments);
/// the i-th candidate joins the i-th best graph of every segment (the last one where a
/// segment has fewer), and each joined graph is verified against the whole program.
Result<SearchResult> search_around_collectives(const KernelGraph& program,
                                               const SearchConfig& config);

}  // namespace strata::search
