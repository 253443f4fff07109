// validate_task_graph (docs/megakernel.md, "Invariants").
#include "strata/mpk/task_graph_check.h"

#include <algorithm>

#include "mpk/region_index.h"
#include "strata/mpk/task_schedule.h"

namespace strata::mpk {
namespace {

std::string task_name(const TaskGraph& g, int t) {
  const TaskInfo& k = g.tasks[t];
  return "task " + std::to_string(t) + " (" + g.ops[k.op].name + " [" + std::to_string(k.i0) + "," +
         std::to_string(k.i1) + "," + std::to_string(k.i2) + "])";
}

bool has_bit(const std::vector<uint64_t>& b, size_t i) {
  return (b[i / 64] >> (i % 64)) & 1;
}

}  // namespace

Status validate_task_graph(const TaskGraph& g) {
  const size_t n = g.tasks.size();
  // Ops and tasks.
  int next = 0;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const OpInfo& op = g.ops[o];
    if (op.first_task != next || op.num_tasks < 1)
      return make_error("op " + op.name + ": its tasks are not the next contiguous range");
    for (int t = op.first_task; t < op.first_task + op.num_tasks; ++t)
      if (g.tasks[t].op != static_cast<int>(o))
        return make_error(task_name(g, t) + ": belongs to another op than its range says");
    next += op.num_tasks;
  }
  if (next != static_cast<int>(n)) return make_error("the ops do not cover every task");
  // Order.
  if (g.order.size() != n) return make_error("the order does not list every task once");
  std::vector<int> pos(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const int t = g.order[i];
    if (t < 0 || static_cast<size_t>(t) >= n || pos[t] >= 0)
      return make_error("the order is not a permutation of the tasks (at position " +
                        std::to_string(i) + ")");
    pos[t] = static_cast<int>(i);
  }
  // Events: counts, producers before consumers.
  std::vector<std::vector<int>> triggered_by(g.events.size());
  for (size_t t = 0; t < n; ++t)
    for (int e : g.tasks[t].triggers) {
      if (e < 0 || static_cast<size_t>(e) >= g.events.size())
        return make_error(task_name(g, t) + " triggers a missing event " + std::to_string(e));
      triggered_by[e].push_back(static_cast<int>(t));
    }
  for (size_t e = 0; e < g.events.size(); ++e) {
    std::vector<int> p = g.events[e].producers, q = triggered_by[e];
    std::sort(q.begin(), q.end());
    if (p.empty()) return make_error("event " + std::to_string(e) + " has no producers");
    if (p != q)
      return make_error("event " + std::to_string(e) + ": count " + std::to_string(p.size()) +
                        " but " + std::to_string(q.size()) + " tasks trigger it");
  }
  for (size_t t = 0; t < n; ++t)
    for (int e : g.tasks[t].waits) {
      if (e < 0 || static_cast<size_t>(e) >= g.events.size())
        return make_error(task_name(g, t) + " waits on a missing event " + std::to_string(e));
      for (int p : g.events[e].producers)
        if (pos[p] >= pos[t])
          return make_error(task_name(g, t) + " waits on event " + std::to_string(e) +
                            " whose producer " + task_name(g, p) + " does not precede it");
    }
  // Footprints: single writer per region, every read covered by an event, and every write of
  // a region that an earlier op reads ordered after those reads. (Region tensor ids
  // are checked first: the index is built over them.)
  for (size_t t = 0; t < n; ++t)
    for (const auto* list : {&g.tasks[t].reads, &g.tasks[t].writes})
      for (const Region& r : *list)
        if (r.tensor < 0 || static_cast<size_t>(r.tensor) >= g.tensors.size() || r.r0 < 0 ||
            r.r1 > g.tensors[r.tensor].rows || r.c0 < 0 || r.c1 > g.tensors[r.tensor].cols ||
            r.r0 >= r.r1 || r.c0 >= r.c1)
          return make_error(task_name(g, t) + " has a footprint outside its tensor");
  const RegionIndex index(g);
  for (size_t t = 0; t < n; ++t)
    for (const Region& r : g.tasks[t].writes) {
      std::string clash;
      index.for_each_overlap(r, [&](int w, const Region&) {
        if (w != static_cast<int>(t) && clash.empty())
          clash = task_name(g, t) + " and " + task_name(g, w) + " write overlapping parts of " +
                  g.tensors[r.tensor].name;
      });
      if (!clash.empty()) return make_error(clash);
    }
  const RegionIndex readers(g, Access::Reads);
  for (size_t t = 0; t < n; ++t) {
    std::vector<int> direct;
    for (int e : g.tasks[t].waits)
      direct.insert(direct.end(), g.events[e].producers.begin(), g.events[e].producers.end());
    std::sort(direct.begin(), direct.end());
    std::string missing;
    auto unordered = [&](int w) {
      return missing.empty() && g.tasks[w].op < g.tasks[t].op &&
             !std::binary_search(direct.begin(), direct.end(), w);
    };
    for (const Region& r : g.tasks[t].reads)
      index.for_each_overlap(r, [&](int w, const Region&) {
        if (unordered(w))
          missing = task_name(g, t) + " reads " + g.tensors[r.tensor].name + " written by " +
                    task_name(g, w) + " without waiting for it";
      });
    for (const Region& r : g.tasks[t].writes)
      readers.for_each_overlap(r, [&](int w, const Region&) {
        if (unordered(w))
          missing = task_name(g, t) + " writes " + g.tensors[r.tensor].name + " read by " +
                    task_name(g, w) + " without waiting for it";
      });
    if (!missing.empty()) return make_error(missing);
  }
  // Worker lists.
  if (!g.worker_lists.empty()) {
    std::vector<int> seen(n, 0);
    for (size_t w = 0; w < g.worker_lists.size(); ++w) {
      int last = -1;
      for (int t : g.worker_lists[w]) {
        if (t < 0 || static_cast<size_t>(t) >= n || seen[t]++)
          return make_error("worker " + std::to_string(w) + ": task " + std::to_string(t) +
                            " is missing or listed twice");
        if (pos[t] <= last)
          return make_error("worker " + std::to_string(w) + ": its list is not in the order");
        last = pos[t];
      }
    }
    for (size_t t = 0; t < n; ++t)
      if (!seen[t]) return make_error(task_name(g, t) + " is on no worker's list");
  }
  // Memory plan.
  std::vector<int> ws;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const TensorInfo& T = g.tensors[i];
    if (T.storage != Storage::Workspace) continue;
    if (T.offset < 0 || T.offset % 256 != 0 || T.offset + T.bytes() > g.workspace_bytes)
      return make_error("tensor " + T.name + ": offset " + std::to_string(T.offset) +
                        " is unaligned or outside the workspace");
    ws.push_back(static_cast<int>(i));
  }
  std::vector<std::vector<uint64_t>> anc;
  std::vector<std::vector<int>> acc(g.tensors.size()), wr(g.tensors.size());
  for (size_t t = 0; t < n; ++t) {
    for (const Region& r : g.tasks[t].reads) acc[r.tensor].push_back(static_cast<int>(t));
    for (const Region& r : g.tasks[t].writes) {
      acc[r.tensor].push_back(static_cast<int>(t));
      wr[r.tensor].push_back(static_cast<int>(t));
    }
  }
  // All accesses of `a` happen before every write of `b`.
  auto dead_before = [&](int a, int b) {
    if (g.tensors[a].keep || g.tensors[b].keep || wr[b].empty()) return false;
    if (anc.empty()) anc = task_ancestors(g);
    for (int w : wr[b])
      for (int x : acc[a])
        if (!has_bit(anc[w], x)) return false;
    return true;
  };
  for (size_t i = 0; i < ws.size(); ++i)
    for (size_t j = i + 1; j < ws.size(); ++j) {
      const TensorInfo &A = g.tensors[ws[i]], &B = g.tensors[ws[j]];
      if (A.offset < B.offset + B.bytes() && B.offset < A.offset + A.bytes() &&
          !(g.workspace_reuse && (dead_before(ws[i], ws[j]) || dead_before(ws[j], ws[i]))))
        return make_error("tensors " + A.name + " and " + B.name +
                          " share workspace memory while both may be live");
    }
  return Status::success();
}

}  // namespace strata::mpk
