#include "search/candidate_pool.h"

#include <algorithm>

#include "strata/ir/graph_json.h"
#include "strata/opt/thread_fusion.h"

namespace strata::search {

bool better_candidate(const PoolEntry& a, const PoolEntry& b) {
  if (a.cost.predicted_us != b.cost.predicted_us) return a.cost.predicted_us < b.cost.predicted_us;
  return a.key < b.key;
}

CandidatePool::CandidatePool(const Target& target, size_t capacity,
                             std::function<void(const KernelGraph&)> observer)
    : target_(target), capacity_(std::max<size_t>(capacity, 1)), observer_(std::move(observer)) {}

void CandidatePool::insert(PoolEntry e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= capacity_ && !better_candidate(e, entries_.back())) return;
  auto pos = std::lower_bound(entries_.begin(), entries_.end(), e, better_candidate);
  if (pos != entries_.end() && pos->key == e.key) return;
  entries_.insert(pos, std::move(e));
  if (entries_.size() > capacity_) entries_.pop_back();
}

void CandidatePool::offer(KernelGraph&& graph) {
  PoolEntry e{fuse_thread_graphs(graph), {}, {}};
  if (observer_) observer_(e.graph);
  e.cost = estimate_cost(e.graph, target_);
  {
    // Cheap rejection before the canonical JSON is built.
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= capacity_ && e.cost.predicted_us > entries_.back().cost.predicted_us)
      return;
  }
  e.key = kernel_graph_to_json(e.graph).dump();
  insert(std::move(e));
}

void CandidatePool::restore(const KernelGraph& fused_graph) {
  PoolEntry e{fused_graph, estimate_cost(fused_graph, target_), {}};
  e.key = kernel_graph_to_json(e.graph).dump();
  insert(std::move(e));
}

std::vector<PoolEntry> CandidatePool::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

}  // namespace strata::search
