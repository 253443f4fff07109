// The schedule and the activation memory plan of a task graph (docs/megakernel.md, "Schedule
// and memory").
#include "strata/mpk/task_schedule.h"

#include <algorithm>
#include <limits>

namespace strata::mpk {
namespace {

// Above this many tasks the ancestor bitsets (tasks²/8 bytes) are not built: the workspace is
// planned without reuse, which is always safe.
constexpr size_t kMaxTasksForReuse = 32768;

// Time model of the static schedule: a task takes its cost (bytes) plus this fixed overhead
// (waiting, event updates, the task's prologue), in the same unit.
constexpr double kTaskOverhead = 16384;

using Bits = std::vector<uint64_t>;

void set_bit(Bits& b, size_t i) {
  b[i / 64] |= uint64_t{1} << (i % 64);
}
void or_into(Bits& dst, const Bits& src) {
  for (size_t i = 0; i < dst.size(); ++i) dst[i] |= src[i];
}
bool subset(const Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] & ~b[i]) return false;
  return true;
}

}  // namespace

std::vector<std::vector<uint64_t>> task_ancestors(const TaskGraph& g) {
  const size_t n = g.tasks.size(), words = (n + 63) / 64;
  std::vector<Bits> anc(n, Bits(words, 0));
  std::vector<Bits> ev(g.events.size());
  for (int t : g.order) {
    for (int e : g.tasks[t].waits) {
      if (ev[e].empty()) {
        ev[e].assign(words, 0);
        for (int p : g.events[e].producers) {
          or_into(ev[e], anc[p]);
          set_bit(ev[e], p);
        }
      }
      or_into(anc[t], ev[e]);
    }
  }
  return anc;
}

void plan_workspace(TaskGraph& g) {
  const size_t n = g.tasks.size(), words = (n + 63) / 64;
  g.workspace_reuse = n <= kMaxTasksForReuse;
  std::vector<Bits> anc;
  if (g.workspace_reuse) anc = task_ancestors(g);
  // Writers and accessors of every tensor.
  std::vector<std::vector<int>> writers(g.tensors.size());
  std::vector<Bits> access(g.tensors.size());
  for (size_t t = 0; t < n; ++t) {
    auto note = [&](const Region& r, bool write) {
      if (write) writers[r.tensor].push_back(static_cast<int>(t));
      if (!g.workspace_reuse) return;
      if (access[r.tensor].empty()) access[r.tensor].assign(words, 0);
      set_bit(access[r.tensor], t);
    };
    for (const Region& r : g.tasks[t].reads) note(r, false);
    for (const Region& r : g.tasks[t].writes) note(r, true);
  }
  struct Placed {
    int tensor;
    int64_t begin, end;
  };
  std::vector<Placed> placed;
  int64_t top = 0;
  for (size_t ti = 0; ti < g.tensors.size(); ++ti) {
    TensorInfo& T = g.tensors[ti];
    if (T.storage != Storage::Workspace) continue;
    const int64_t size = (T.bytes() + 255) / 256 * 256;
    // The tasks that happen before every writer of T: tensors accessed only by them are dead.
    Bits before;
    if (g.workspace_reuse && !T.keep && !writers[ti].empty()) {
      before.assign(words, ~uint64_t{0});
      for (int w : writers[ti])
        for (size_t i = 0; i < words; ++i) before[i] &= anc[w][i];
    }
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed) {
      const TensorInfo& P = g.tensors[p.tensor];
      const bool dead = !before.empty() && !P.keep &&
                        (access[p.tensor].empty() || subset(access[p.tensor], before));
      if (!dead) busy.push_back({p.begin, p.end});
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    T.offset = off;
    placed.push_back({static_cast<int>(ti), off, off + size});
    top = std::max(top, off + size);
  }
  g.workspace_bytes = top;
}

void assign_workers(TaskGraph& g) {
  const size_t W = static_cast<size_t>(g.options.workers);
  std::vector<double> avail(W, 0), finish(g.tasks.size(), 0), fired(g.events.size(), -1);
  g.worker_lists.assign(W, {});
  double makespan = 0;
  for (int t : g.order) {
    double ready = 0;
    for (int e : g.tasks[t].waits) {
      if (fired[e] < 0) {
        fired[e] = 0;
        for (int p : g.events[e].producers) fired[e] = std::max(fired[e], finish[p]);
      }
      ready = std::max(ready, fired[e]);
    }
    size_t best = 0;
    double best_start = std::numeric_limits<double>::infinity();
    for (size_t w = 0; w < W; ++w) {
      const double s = std::max(avail[w], ready);
      if (s < best_start) {
        best_start = s;
        best = w;
      }
    }
    finish[t] = best_start + g.tasks[t].cost + kTaskOverhead;
    avail[best] = finish[t];
    g.worker_lists[best].push_back(t);
    makespan = std::max(makespan, finish[t]);
  }
  g.makespan_estimate = makespan;
}

}  // namespace strata::mpk
