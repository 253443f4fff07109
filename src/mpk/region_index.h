// Finding the task accesses (writes, or reads) that overlap a region (the footprint queries of
// the compiler, the validator and the simulator), by tensor and row, so that a query costs the
// accesses of the rows it covers rather than every access of the tensor.
#pragma once

#include <utility>
#include <vector>

#include "strata/mpk/task_graph.h"

namespace strata::mpk {

/// Which footprint list of the tasks an index holds.
enum class Access { Writes, Reads };

class RegionIndex {
 public:
  explicit RegionIndex(const TaskGraph& g, Access a = Access::Writes)
      : g_(g), rows_(g.tensors.size()) {
    for (size_t t = 0; t < g.tasks.size(); ++t)
      for (const Region& r : a == Access::Writes ? g.tasks[t].writes : g.tasks[t].reads) {
        auto& rows = rows_[r.tensor];
        if (rows.empty()) rows.resize(static_cast<size_t>(g.tensors[r.tensor].rows));
        for (int64_t row = r.r0; row < r.r1; ++row) rows[row].push_back({static_cast<int>(t), &r});
      }
  }

  /// Calls f(task, region) for every indexed access overlapping `r`; one spanning several of
  /// the rows of `r` is reported once per row.
  template <class F>
  void for_each_overlap(const Region& r, F&& f) const {
    const auto& rows = rows_[r.tensor];
    if (rows.empty()) return;
    for (int64_t row = r.r0; row < r.r1; ++row)
      for (const auto& [t, w] : rows[row])
        if (w->overlaps(r)) f(t, *w);
  }

 private:
  const TaskGraph& g_;
  std::vector<std::vector<std::vector<std::pair<int, const Region*>>>> rows_;
};

}  // namespace strata::mpk
