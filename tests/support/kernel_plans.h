// The plan the graph optimizer makes for a kernel graph's first customized kernel, for tests
// of the optimizer's passes and of what the emitter does with them.
#pragma once

#include <stdexcept>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/graph_optimizer.h"
#include "support/benchmark_graphs.h"

namespace strata::testing {

/// The plan of the first customized kernel of g (its inputs' and outputs' dtypes as in g),
/// made with `opts`; throws when g has none.
inline KernelPlan first_customized_plan(const KernelGraph& g, PlanOptions opts = {}) {
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    std::vector<DType> in, out;
    for (int t : op.inputs) in.push_back(g.tensor(t).dtype);
    for (int t : op.outputs) out.push_back(g.tensor(t).dtype);
    return must(optimize_block_graph(op.body, in, out, opts));
  }
  throw std::runtime_error("no customized op");
}

}  // namespace strata::testing
