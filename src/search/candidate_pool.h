// The shared pool of screened candidates (docs/search.md, "Ranking").
//
// Every complete graph the enumeration emits is fused (thread graphs), costed and offered
// here. The pool keeps the `capacity` best graphs that pass screening, best first by
// (predicted time, canonical JSON). A graph is screened only if it would enter the pool at
// the moment it is offered; one that would not is never needed, because `capacity` screened
// graphs better than it already exist and stay until replaced by better ones. So the final
// contents are the `capacity` best screen-passing graphs whatever the order of offers, which
// makes the result independent of thread count and scheduling.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "search/enumerator.h"
#include "strata/cost_model.h"
#include "strata/verifier.h"

namespace strata::search {

struct PoolEntry {
  KernelGraph graph;  ///< thread graphs fused
  GraphCost cost;
  std::string key;  ///< canonical μGraph JSON
};

class CandidatePool : public CandidateSink {
 public:
  CandidatePool(const Target& target, const EquivalenceChecker& checker, size_t capacity);

  /// Fuses, costs and (if it would enter the pool) screens a complete graph.
  void offer(KernelGraph&& graph) override;
  /// Adds a graph that passed screening in an earlier run (resume): fused, costed, kept.
  void restore(const KernelGraph& fused_graph);

  /// The pool, best first.
  std::vector<PoolEntry> entries() const;
  int64_t screened() const { return screened_.load(); }
  /// First screening error message, if any screening failed with an error.
  std::string first_error() const;

 private:
  bool better(const PoolEntry& a, const PoolEntry& b) const;
  void insert(PoolEntry e);

  const Target& target_;
  const EquivalenceChecker& checker_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::vector<PoolEntry> entries_;           // sorted best first
  std::unordered_set<std::string> decided_;  // content hashes of screened graphs
  std::atomic<int64_t> screened_{0};
  std::string first_error_;
};

}  // namespace strata::search
