// Ties of the cost model in the search's orders (docs/search.md, "Ranking, screening,
// verification"): among graphs predicted within kCostTieTolerance of each other, the one whose
// kernels synchronize on fewer block-level barriers in their loops goes first.
//
// Within a few percent the model's predictions do not order measured candidates
// (docs/cost-model.md, "The suite's points"), while the loop barriers do better there: a graph's
// count is Σ over its kernels of waves · F · loop_barriers (code_features.h), the barriers each
// SM waits on one after another, the feature whose fitted latency is the one code term above 0
// (docs/cost-model.md, "Code features"). Reduction steps and loop ops are not used: as
// tie-breaks they pick the slower of two measured candidates more often than the faster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "strata/cost/cost_model.h"
#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// Relative difference of predicted times within which two graphs count as a tie: chosen on the
/// calibration points (docs/search.md, "Ranking, screening, verification"), where 6 % reaches
/// the prefill attentions whose one-barrier form is predicted 4–6 % slower than the five-barrier
/// one and measures 5–9× faster.
inline constexpr double kCostTieTolerance = 0.06;

/// The block-level barriers of the loop bodies of `g`'s kernels as the code generator plans them
/// for `t` (estimate_cost with code features): Σ over the kernels of waves · F · loop_barriers.
/// A cuBLAS call counts 0. nullopt when any other kernel has no plan (a predefined op the
/// emitter writes as a generic kernel): its barriers are unknown.
std::optional<int64_t> loop_barriers_per_sm(const KernelGraph& g, const Target& t);

/// The order of items 0 … n-1 given in best-first order by (predicted time, key), with ties
/// broken by barriers: the items are split into groups, each from the first item not yet
/// grouped to the last one predicted within kCostTieTolerance of it (relative to the first);
/// within a group of two or more, each run of items whose `barriers` is known is sorted by it,
/// stably. An item with unknown barriers keeps its place and nothing moves across it, so that
/// no graph goes ahead of one with unknown barriers (the program, say) that it did not precede
/// by prediction. `predicted_us` must be non-decreasing. `barriers` is called only for items in
/// groups of two or more, once each. Returns the item indices in the new order.
std::vector<size_t> break_cost_ties(const std::vector<double>& predicted_us,
                                    const std::function<std::optional<int64_t>(size_t)>& barriers);

}  // namespace strata::search
