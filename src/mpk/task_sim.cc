// The simulated persistent kernel (docs/megakernel.md, "Testing").
#include "strata/mpk/task_sim.h"

#include <random>

#include "mpk/region_index.h"

namespace strata::mpk {

Result<std::vector<int>> simulate(const TaskGraph& g, SchedulePolicy policy, uint64_t seed,
                                  const SimHooks& hooks) {
  const size_t n = g.tasks.size();
  const size_t W = policy == SchedulePolicy::StaticLists ? g.worker_lists.size()
                                                         : static_cast<size_t>(g.options.workers);
  if (W == 0) return make_error("the graph has no workers");
  std::mt19937_64 rng(seed);
  std::vector<int> fired_count(g.events.size(), 0);
  std::vector<char> finished(n, 0);
  // The writes and the reads, for the direct footprint check at each start.
  const RegionIndex writers(g, Access::Writes), readers(g, Access::Reads);
  struct Worker {
    size_t next = 0;  // position in its static list
    int held = -1;    // the task it holds (waiting or running)
    bool running = false;
  };
  std::vector<Worker> workers(W);
  size_t queue = 0, done = 0;
  std::vector<int> started;
  auto ready = [&](int t) {
    for (int e : g.tasks[t].waits)
      if (fired_count[e] < static_cast<int>(g.events[e].producers.size())) return false;
    return true;
  };
  while (done < n) {
    // Workers without a task take their next one (this is not a choice: it happens at once).
    for (size_t w = 0; w < W; ++w) {
      Worker& k = workers[w];
      if (k.held >= 0) continue;
      if (policy == SchedulePolicy::StaticLists) {
        if (k.next < g.worker_lists[w].size()) k.held = g.worker_lists[w][k.next++];
      } else if (queue < n) {
        k.held = g.order[queue++];
      }
    }
    std::vector<size_t> enabled;
    for (size_t w = 0; w < W; ++w) {
      const Worker& k = workers[w];
      if (k.held >= 0 && (k.running || ready(k.held))) enabled.push_back(w);
    }
    if (enabled.empty()) {
      std::string held;
      for (size_t w = 0; w < W && held.size() < 200; ++w)
        if (workers[w].held >= 0)
          held += " worker " + std::to_string(w) + " holds task " +
                  std::to_string(workers[w].held) + ";";
      return make_error("deadlock after " + std::to_string(done) + " of " + std::to_string(n) +
                        " tasks:" + held);
    }
    Worker& k = workers[enabled[rng() % enabled.size()]];
    const int t = k.held;
    if (!k.running) {
      // An unfinished task of an earlier op that accesses (per `index`) what `regions` cover.
      auto unfinished = [&](const std::vector<Region>& regions, const RegionIndex& index) {
        int early = -1;
        for (const Region& r : regions)
          index.for_each_overlap(r, [&](int w, const Region&) {
            if (early < 0 && g.tasks[w].op < g.tasks[t].op && !finished[w]) early = w;
          });
        return early;
      };
      for (const auto& [early, what] :
           {std::pair{unfinished(g.tasks[t].reads, writers), "writes what it reads"},
            std::pair{unfinished(g.tasks[t].writes, readers), "reads what it writes"}})
        if (early >= 0)
          return make_error("task " + std::to_string(t) + " (" + g.ops[g.tasks[t].op].name +
                            ") started before task " + std::to_string(early) + " (" +
                            g.ops[g.tasks[early].op].name + ") that " + what);
      k.running = true;
      started.push_back(t);
      if (hooks.on_start) hooks.on_start(t);
    } else {
      if (hooks.on_finish) hooks.on_finish(t);
      finished[t] = 1;
      for (int e : g.tasks[t].triggers) fired_count[e]++;
      k.running = false;
      k.held = -1;
      done++;
    }
  }
  return started;
}

}  // namespace strata::mpk
