#include "search/candidate_pool.h"

#include <algorithm>

#include "strata/graph_json.h"
#include "strata/search_cache.h"
#include "strata/thread_fusion.h"

namespace strata::search {

CandidatePool::CandidatePool(const Target& target, const EquivalenceChecker& checker,
                             size_t capacity)
    : target_(target), checker_(checker), capacity_(std::max<size_t>(capacity, 1)) {}

bool CandidatePool::better(const PoolEntry& a, const PoolEntry& b) const {
  if (a.cost.predicted_us != b.cost.predicted_us) return a.cost.predicted_us < b.cost.predicted_us;
  return a.key < b.key;
}

void CandidatePool::insert(PoolEntry e) {
  auto pos = std::lower_bound(entries_.begin(), entries_.end(), e,
                              [&](const PoolEntry& a, const PoolEntry& b) { return better(a, b); });
  if (pos != entries_.end() && pos->key == e.key) return;
  entries_.insert(pos, std::move(e));
  if (entries_.size() > capacity_) entries_.pop_back();
}

void CandidatePool::offer(KernelGraph&& graph) {
  PoolEntry e{fuse_thread_graphs(graph), {}, {}};
  e.cost = estimate_cost(e.graph, target_);
  e.key = kernel_graph_to_json(e.graph).dump();
  std::string hash = content_hash(e.key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (decided_.count(hash)) return;
    if (entries_.size() >= capacity_ && !better(e, entries_.back())) return;
  }
  auto ok = checker_.screen(e.graph);
  ++screened_;
  std::lock_guard<std::mutex> lock(mu_);
  decided_.insert(hash);
  if (!ok.ok()) {
    if (first_error_.empty()) first_error_ = ok.error().message;
    return;
  }
  if (*ok) insert(std::move(e));
}

void CandidatePool::restore(const KernelGraph& fused_graph) {
  PoolEntry e{fused_graph, estimate_cost(fused_graph, target_), {}};
  e.key = kernel_graph_to_json(e.graph).dump();
  std::lock_guard<std::mutex> lock(mu_);
  decided_.insert(content_hash(e.key));
  insert(std::move(e));
}

std::vector<PoolEntry> CandidatePool::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

std::string CandidatePool::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

}  // namespace strata::search
