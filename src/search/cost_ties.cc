#include "search/cost_ties.h"

#include <algorithm>

namespace strata::search {

std::optional<int64_t> loop_barriers_per_sm(const KernelGraph& g, const Target& t) {
  CostOptions options;
  options.code_features = true;
  const GraphCost cost = estimate_cost(g, t, options);
  int64_t barriers = 0;
  for (const KernelCost& k : cost.kernels) {
    if (k.library) continue;
    if (!k.code) return std::nullopt;
    barriers += k.waves * k.forloop * k.code->loop_barriers;
  }
  return barriers;
}

std::vector<size_t> break_cost_ties(const std::vector<double>& predicted_us,
                                    const std::function<std::optional<int64_t>(size_t)>& barriers) {
  const size_t n = predicted_us.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t first = 0; first < n;) {
    size_t end = first + 1;
    const double bound = predicted_us[first] * (1.0 + kCostTieTolerance);
    while (end < n && predicted_us[end] <= bound) ++end;
    if (end - first >= 2) {
      // Runs of items with known barriers, between the items whose barriers are unknown.
      std::vector<std::pair<int64_t, size_t>> run;  // (barriers, item), in given order
      auto sort_run = [&](size_t run_end) {
        std::stable_sort(run.begin(), run.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (size_t k = 0; k < run.size(); ++k) order[run_end - run.size() + k] = run[k].second;
        run.clear();
      };
      for (size_t i = first; i < end; ++i) {
        if (std::optional<int64_t> b = barriers(i))
          run.emplace_back(*b, i);
        else
          sort_run(i);
      }
      sort_run(end);
    }
    first = end;
  }
  return order;
}

}  // namespace strata::search
