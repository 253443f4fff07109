// The search of a program with many weight layers (docs/search.md, "Layers"): one segment
// per layer of weight matmuls is searched as a program of its own, the best graphs of the
// segments are joined, and the whole program is searched with the time left.
#pragma once

#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata::search {

/// True when `config` lets the search split `program` into layers (split_layers) and the
/// program has more weight layers (split_weight_layers) than customized kernels per graph
/// (max_customized_ops): then no graph within the limits holds a customized kernel per layer.
bool searched_by_layers(const KernelGraph& program, const SearchConfig& config);

/// The verification of a graph joined from `parts` (one graph per segment; a part that is the
/// segment as written counts as proved exactly): equivalent, with the bound log2(Σ 2^b) of the
/// parts' bounds b (a union bound: each part was proved equivalent to its segment) and the
/// fewest trials among the proved parts.
VerifyResult composed_verification(const std::vector<const Candidate*>& parts);

/// superoptimize for such a program (already checked: check_config, check_program). Each
/// segment is searched with split_layers off and an equal share of the time left (the whole
/// program's search counting as one more share); the i-th candidate joins the i-th best graph
/// of every segment (the last one where a segment has fewer). A join is proved by its parts:
/// each segment graph was proved equivalent to its segment, so the join is equivalent to the
/// program with a bound of at most the sum of theirs; only where that sum misses 2^-60 is the
/// join verified against the whole program. Then the whole program is searched (split_layers
/// off) with the time left, and the verified graphs of both are ranked together: the best
/// top_k and the program. The notes name every segment and its outcome.
Result<SearchResult> search_by_layers(const KernelGraph& program, const SearchConfig& config);

}  // namespace strata::search
