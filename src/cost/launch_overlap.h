// The prediction of a kernel graph whose launches that do not depend on each other run at the
// same time (CostOptions::concurrent_launches; docs/cost-model.md, "Concurrent launches").
#pragma once

#include <optional>
#include <vector>

#include "strata/cost/cost_model.h"
#include "strata/opt/kernel_views.h"
#include "strata/opt/output_routes.h"

namespace strata {

/// The graph's time in seconds when its kernels (`kernels`, in op order, each with its
/// predicted_s) run on the streams of the emitter's launch plan (plan_launch_streams with
/// `max_side_streams`): the larger of
///  - the critical path: each kernel starts when the last launch on its stream and every
///    kernel it depends on (it reads what they write, writes what they read or write; an
///    all_reduce depends on all before it and all after it on it) have ended;
///  - the occupancy bound: Σ share_k · predicted_s of the kernels, share_k the part of the SMs
///    kernel k holds while it runs: 1 for a launch of several waves, else its blocks over the
///    blocks the SMs hold at once; a cuBLAS call's share is its output's 128 × 128 tiles over
///    the SMs (cuBLAS picks its own grid; the tile is an assumption, not measured).
/// Views read in place and routed slices are no kernels: their readers depend on the writer of
/// the tensor they view. For a chain both bounds are at most the sum of the kernels, and the
/// critical path is that sum.
double concurrent_graph_seconds(const KernelGraph& g,
                                const std::vector<std::optional<KernelView>>& views,
                                const std::vector<std::optional<OutputRoute>>& routes,
                                const std::vector<KernelCost>& kernels, const Target& t,
                                int max_side_streams);

}  // namespace strata
