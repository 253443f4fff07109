// Demand-driven partial evaluation for screening (docs/verifier.md, "Screening").
//
// Rule: sample what to compare, then propagate needs backwards at block granularity.
//  1. For each graph output made by a customized op, pick up to `samples` pseudo-random blocks
//     of that op (the same blocks for all of its outputs); the compared elements are the tiles
//     those blocks write. For an output made by a predefined op (or a graph input), pick up to
//     `samples` pseudo-random single elements.
//  2. Walk the ops backwards. A predefined op computes only the union of boxes its readers need
//     and needs from its inputs the boxes those depend on (elementwise: the same box, broadcast
//     dims collapsed; sum/mean: the summed groups; rms_norm: whole fibers along its dim; matmul:
//     the box's rows of A with all of k, all of k of B with the box's columns; concat: the parts
//     falling in each operand). A customized op runs every block whose output tile (placed by
//     omap) meets a needed box, and needs from each input the part its imap selects for those
//     blocks over all iterations.
// Regions with many boxes are replaced by their bounding box (a superset: still correct).
//  3. If the plan's estimated work (multiply-adds) exceeds `budget`, sample fewer blocks, down
//     to one per op: with few large blocks (attention), one sampled block can already need many
//     blocks upstream.
#pragma once

#include <cstdint>
#include <vector>

#include "interp/value_domain.h"
#include "strata/ir/kernel_graph.h"

namespace strata::verify {

struct DemandPlan {
  interp::PartialPlan plan;     ///< what to evaluate
  std::vector<Region> compare;  ///< per graph output: the elements to compare
  std::vector<Region> inputs;   ///< per graph input: the elements the evaluation reads
};

/// Plans a partial evaluation of complete graph `g` (see the header comment).
DemandPlan plan_demand(const KernelGraph& g, uint64_t seed, int samples = 4, double budget = 5e7);

/// Plans the evaluation of complete graph `g` restricted to the given elements of its outputs
/// (compare[j] for output j; step 2 above only): to evaluate a second graph with the same
/// outputs on the elements plan_demand chose for the first.
DemandPlan plan_for_compare(const KernelGraph& g, const std::vector<Region>& compare);

}  // namespace strata::verify
