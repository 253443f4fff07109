// The shared pool of candidates (docs/search.md, "Ranking").
//
// Every complete graph the enumeration emits is fused (thread graphs), costed and offered
// here. The pool keeps the `capacity` best graphs by (predicted time, canonical JSON),
// without duplicates. Its contents after all offers are the `capacity` best graphs offered,
// whatever the order of the offers, which makes the result independent of thread count and
// scheduling. Screening and verification happen afterwards, best first (search.cc), so that
// only the graphs that can reach the answer are checked.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "search/enumerator.h"
#include "strata/cost/cost_model.h"

namespace strata::search {

struct PoolEntry {
  KernelGraph graph;  ///< thread graphs fused
  GraphCost cost;
  std::string key;  ///< canonical μGraph JSON
};

class CandidatePool : public CandidateSink {
 public:
  /// `observer`, if set, sees every offered graph (fused) before ranking.
  CandidatePool(const Target& target, size_t capacity,
                std::function<void(const KernelGraph&)> observer = {});

  /// Fuses and costs a complete graph and keeps it if it is among the best.
  void offer(KernelGraph&& graph) override;
  /// Adds an already fused graph (from a checkpoint).
  void restore(const KernelGraph& fused_graph);

  /// The pool, best first.
  std::vector<PoolEntry> entries() const;

 private:
  void insert(PoolEntry e);

  const Target& target_;
  size_t capacity_;
  std::function<void(const KernelGraph&)> observer_;
  mutable std::mutex mu_;
  std::vector<PoolEntry> entries_;  // sorted best first
};

/// Best-first order of pool entries: predicted time, then canonical JSON.
bool better_candidate(const PoolEntry& a, const PoolEntry& b);

}  // namespace strata::search
