#include "strata/opt/launch_streams.h"

#include <algorithm>
#include <functional>
#include <set>

namespace strata {
namespace {

/// Node 0 is the entry (stream 0 as strata_launch finds it); node j + 1 is launch j.
bool conflicts(const LaunchAccess& a, const LaunchAccess& b) {
  if (a.barrier || b.barrier) return true;
  auto meets = [](const std::vector<int>& x, const std::vector<int>& y) {
    for (int s : x)
      if (std::find(y.begin(), y.end(), s) != y.end()) return true;
    return false;
  };
  return meets(a.writes, b.reads) || meets(a.reads, b.writes) || meets(a.writes, b.writes);
}

/// deps[n]: the nodes node n depends on directly (the entry included), for nodes 1 … L.
std::vector<std::vector<int>> direct_deps(const std::vector<LaunchAccess>& launches) {
  const int L = static_cast<int>(launches.size());
  std::vector<std::vector<int>> deps(L + 1);
  for (int j = 0; j < L; ++j) {
    deps[j + 1].push_back(0);
    for (int i = 0; i < j; ++i)
      if (conflicts(launches[i], launches[j])) deps[j + 1].push_back(i + 1);
  }
  return deps;
}

}  // namespace

LaunchStreamPlan plan_launch_streams(const std::vector<LaunchAccess>& launches,
                                     int max_side_streams) {
  const int L = static_cast<int>(launches.size());
  LaunchStreamPlan plan;
  plan.stream.assign(L, 0);
  plan.waits.assign(L, {});
  plan.records.assign(L, -1);
  if (max_side_streams <= 0 || L == 0) return plan;
  const int S = max_side_streams + 1;
  const std::vector<std::vector<int>> deps = direct_deps(launches);
  // anc[n][m]: node m happens before node n through dependencies (transitively).
  std::vector<std::vector<bool>> anc(L + 1, std::vector<bool>(L + 1, false));
  for (int n = 1; n <= L; ++n)
    for (int d : deps[n]) {
      anc[n][d] = true;
      for (int m = 0; m <= L; ++m)
        if (anc[d][m]) anc[n][m] = true;
    }
  std::vector<int> node_stream(L + 1, 0);
  std::vector<int> tail(S, -1);  // last node on each stream (-1: stream not used yet)
  tail[0] = 0;
  int used = 1;  // streams in use: 0 … used - 1
  // known[s][t]: the latest node of stream t ordered before the next operation on stream s;
  // at[n]: the same for the point right after node n (what an event recorded there brings).
  std::vector<std::vector<int>> known(S, std::vector<int>(S, -1));
  known[0][0] = 0;
  std::vector<std::vector<int>> at(L + 1);
  at[0] = known[0];
  std::vector<bool> waited(L + 1, false);  // nodes whose event some stream waits on
  std::vector<std::vector<int>> wait_nodes(L + 1);
  for (int n = 1; n <= L; ++n) {
    int s = -1;
    if (launches[n - 1].barrier) {
      s = 0;
    } else if (anc[n][tail[0]]) {
      s = 0;
    } else {
      for (int t = 1; t < used; ++t)
        if (anc[n][tail[t]] && (s < 0 || tail[t] > tail[s])) s = t;
      if (s < 0 && used < S) s = used++;
      if (s < 0) {
        s = 0;
        for (int t = 1; t < used; ++t)
          if (tail[t] < tail[s]) s = t;
      }
    }
    // A barrier depends on every earlier launch; the others on their direct producers. The
    // nodes are taken latest first: an event recorded after node d brings at[d], which holds
    // only nodes before d, so no later wait can make an earlier one redundant.
    std::vector<int> need = deps[n];
    if (launches[n - 1].barrier) {
      need.clear();
      for (int t = 0; t < used; ++t)
        if (tail[t] >= 0) need.push_back(tail[t]);
    }
    std::sort(need.rbegin(), need.rend());
    std::vector<int> K = known[s];
    for (int d : need) {
      if (K[node_stream[d]] >= d) continue;
      wait_nodes[n].push_back(d);
      waited[d] = true;
      for (int t = 0; t < S; ++t) K[t] = std::max(K[t], at[d][t]);
    }
    K[s] = n;
    known[s] = K;
    at[n] = K;
    node_stream[n] = s;
    tail[s] = n;
  }
  // The join: stream 0 waits on every side stream's last launch it is not yet ordered after.
  std::vector<int> tails;
  for (int t = 1; t < used; ++t) tails.push_back(tail[t]);
  std::sort(tails.rbegin(), tails.rend());
  std::vector<int> join_nodes;
  for (int d : tails) {
    if (known[0][node_stream[d]] >= d) continue;
    join_nodes.push_back(d);
    waited[d] = true;
    for (int t = 0; t < S; ++t) known[0][t] = std::max(known[0][t], at[d][t]);
  }
  // Events numbered in the order they are recorded (node order).
  std::vector<int> event(L + 1, -1);
  for (int n = 0; n <= L; ++n)
    if (waited[n]) event[n] = plan.events++;
  plan.side_streams = used - 1;
  plan.entry_event = event[0];
  for (int j = 0; j < L; ++j) {
    plan.stream[j] = node_stream[j + 1];
    plan.records[j] = event[j + 1];
    for (int d : wait_nodes[j + 1]) plan.waits[j].push_back(event[d]);
  }
  for (int d : join_nodes) plan.joins.push_back(event[d]);
  return plan;
}

std::string check_launch_streams(const std::vector<LaunchAccess>& launches,
                                 const LaunchStreamPlan& plan) {
  const int L = static_cast<int>(launches.size());
  if (static_cast<int>(plan.stream.size()) != L || static_cast<int>(plan.waits.size()) != L ||
      static_cast<int>(plan.records.size()) != L)
    return "the plan has " + std::to_string(plan.stream.size()) + " streams, " +
           std::to_string(plan.waits.size()) + " wait lists, " +
           std::to_string(plan.records.size()) + " records for " + std::to_string(L) + " launches";
  // Nodes: 0 the entry, j + 1 launch j, L + 1 the end of stream 0. Edges: program order on
  // each stream, an event's record point to each of its waits.
  const int N = L + 2;
  std::vector<std::vector<int>> succ(N);
  std::vector<int> record_node(plan.events, -2);
  auto record = [&](int e, int n) -> std::string {
    if (e < 0) return "";
    if (e >= plan.events) return "event " + std::to_string(e) + " out of range";
    if (record_node[e] != -2) return "event " + std::to_string(e) + " recorded twice";
    record_node[e] = n;
    return "";
  };
  if (std::string err = record(plan.entry_event, 0); !err.empty()) return err;
  std::vector<int> last(plan.side_streams + 1, -1);
  last[0] = 0;
  // wait_edges: (event, consumer node) in the order they occur.
  std::vector<std::pair<int, int>> wait_edges;
  for (int j = 0; j < L; ++j) {
    const int s = plan.stream[j], n = j + 1;
    if (s < 0 || s > plan.side_streams)
      return "launch " + std::to_string(j) + " on stream " + std::to_string(s) + " of " +
             std::to_string(plan.side_streams) + " side streams";
    if (launches[j].barrier && s != 0)
      return "barrier launch " + std::to_string(j) + " off the caller's stream";
    for (int e : plan.waits[j]) {
      if (e < 0 || e >= plan.events || record_node[e] == -2)
        return "launch " + std::to_string(j) + " waits on event " + std::to_string(e) +
               " before it is recorded";
      wait_edges.push_back({e, n});
    }
    if (last[s] >= 0) succ[last[s]].push_back(n);
    last[s] = n;
    if (std::string err = record(plan.records[j], n); !err.empty()) return err;
  }
  succ[last[0]].push_back(L + 1);
  for (int e : plan.joins) {
    if (e < 0 || e >= plan.events || record_node[e] == -2)
      return "the join waits on event " + std::to_string(e) + " never recorded";
    wait_edges.push_back({e, L + 1});
  }
  for (int e = 0; e < plan.events; ++e)
    if (record_node[e] == -2) return "event " + std::to_string(e) + " never recorded";
  // reach(a, b, skip): b reachable from a, the wait edge `skip` left out.
  auto reach = [&](int a, int b, int skip) {
    std::vector<std::vector<int>> out = succ;
    for (int k = 0; k < static_cast<int>(wait_edges.size()); ++k)
      if (k != skip) out[record_node[wait_edges[k].first]].push_back(wait_edges[k].second);
    std::vector<bool> seen(N, false);
    std::vector<int> todo = {a};
    seen[a] = true;
    while (!todo.empty()) {
      const int x = todo.back();
      todo.pop_back();
      if (x == b) return true;
      for (int y : out[x])
        if (!seen[y]) seen[y] = true, todo.push_back(y);
    }
    return false;
  };
  const std::vector<std::vector<int>> deps = direct_deps(launches);
  for (int n = 1; n <= L; ++n)
    for (int d : deps[n])
      if (!reach(d, n, -1))
        return "launch " + std::to_string(n - 1) + " depends on " +
               (d == 0 ? std::string("the entry") : "launch " + std::to_string(d - 1)) +
               " but is not ordered after it";
  for (int s = 1; s <= plan.side_streams; ++s) {
    if (last[s] < 0) return "side stream " + std::to_string(s) + " has no launch";
    if (!reach(last[s], L + 1, -1))
      return "side stream " + std::to_string(s) + " is not joined to the caller's stream";
  }
  for (int k = 0; k < static_cast<int>(wait_edges.size()); ++k) {
    const int from = record_node[wait_edges[k].first], to = wait_edges[k].second;
    if (reach(from, to, k))
      return "the wait on event " + std::to_string(wait_edges[k].first) + " before " +
             (to == L + 1 ? std::string("the end") : "launch " + std::to_string(to - 1)) +
             " is redundant";
  }
  return "";
}

}  // namespace strata
