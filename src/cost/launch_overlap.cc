#include "cost/launch_overlap.h"

#include <algorithm>

#include "strata/opt/launch_streams.h"

namespace strata {

double concurrent_graph_seconds(const KernelGraph& g,
                                const std::vector<std::optional<KernelView>>& views,
                                const std::vector<std::optional<OutputRoute>>& routes,
                                const std::vector<KernelCost>& kernels, const Target& t,
                                int max_side_streams) {
  // The storage each tensor lives in: a view's or a routed slice's is its source's.
  std::vector<int> storage(g.tensors().size());
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<int>(i);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (is_kernel_view(g, views, i))
      storage[op.outputs[0]] = storage[views[op.outputs[0]]->storage];
    else if (is_routed_slice(g, routes, i))
      storage[op.outputs[0]] = storage[op.inputs[0]];
  }
  std::vector<LaunchAccess> acc;
  for (const KernelCost& k : kernels) {
    const KernelOp& op = g.op(k.op_id);
    LaunchAccess a;
    for (int x : op.inputs) a.reads.push_back(storage[x]);
    for (int x : op.outputs) a.writes.push_back(storage[x]);
    a.barrier = op_category(op.kind) == Category::Collective;
    acc.push_back(std::move(a));
  }
  const LaunchStreamPlan plan = plan_launch_streams(acc, max_side_streams);
  const int L = static_cast<int>(kernels.size());
  auto meets = [](const std::vector<int>& x, const std::vector<int>& y) {
    for (int s : x)
      if (std::find(y.begin(), y.end(), s) != y.end()) return true;
    return false;
  };
  std::vector<double> end(L, 0.0);
  std::vector<double> stream_end(plan.side_streams + 1, 0.0);
  double makespan = 0.0, occupied = 0.0;
  for (int j = 0; j < L; ++j) {
    double start = stream_end[plan.stream[j]];
    for (int i = 0; i < j; ++i)
      if (acc[i].barrier || acc[j].barrier || meets(acc[i].writes, acc[j].reads) ||
          meets(acc[i].reads, acc[j].writes) || meets(acc[i].writes, acc[j].writes))
        start = std::max(start, end[i]);
    const KernelCost& k = kernels[j];
    end[j] = start + k.predicted_s;
    stream_end[plan.stream[j]] = end[j];
    makespan = std::max(makespan, end[j]);
    double share = 1.0;
    if (k.library) {
      const Shape& c = g.tensor(g.op(k.op_id).outputs[0]).shape;
      const int r = c.rank();
      int64_t tiles = (c[r - 2] + 127) / 128 * ((c[r - 1] + 127) / 128);
      for (int d = 0; d + 2 < r; ++d) tiles *= c[d];
      share = std::min(1.0, static_cast<double>(tiles) / t.sm_count);
    } else if (k.waves <= 1) {
      share = std::min(1.0,
                       static_cast<double>(k.blocks) /
                           static_cast<double>(t.sm_count * std::max<int64_t>(1, k.blocks_per_sm)));
    }
    occupied += share * k.predicted_s;
  }
  return std::max(makespan, occupied);
}

}  // namespace strata
