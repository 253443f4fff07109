#include "search/layered_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "search/layers.h"
#include "search/search_monitor.h"
#include "search/segments.h"
#include "strata/cost/cost_model.h"
#include "strata/search/search_report.h"
#include "strata/verify/verifier.h"

namespace strata::search {
namespace {

/// The smallest time share a search is started with: a search whose share is spent still
/// sets up and returns the program, so that every segment has an entry to join.
constexpr double kMinShare = 0.05;

/// The entry of a segment the search could not take: the segment as written.
Candidate as_written(const KernelGraph& g, const Target& target) {
  VerifyResult identity;
  identity.equivalent = true;
  identity.log2_bound = -INFINITY;
  identity.detail = "the input program itself";
  return {g, estimate_cost(g, target), identity, true, {}};
}

/// "segment 2 of 3 (matmul, silu, matmul, mul → M): best 1 kernel(s), 79.4 µs against 89.6 µs
/// as written, 434 states, stop exhausted, at 7.6 s": what the user sees of each segment.
std::string segment_note(const std::string& which, const KernelGraph& seg, const SearchResult& r,
                         double at_s) {
  std::string ops, outs;
  for (const KernelOp& op : seg.ops()) {
    if (op.kind == OpKind::Input) continue;
    ops += (ops.empty() ? "" : ", ") + std::string(op_name(op.kind));
  }
  for (int t : seg.outputs()) outs += (outs.empty() ? "" : ", ") + seg.tensor_name(t);
  const Candidate& best = r.ranked.front();
  const Candidate& as_is = r.ranked[r.program_index()];
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "): best %zu kernel(s), %.2f µs against %.2f µs as written, %lld states, stop %s, "
                "at %.1f s",
                best.cost.kernels.size(), best.cost.predicted_us, as_is.cost.predicted_us,
                static_cast<long long>(r.stats.states),
                std::string(stop_reason_name(r.stats.stop)).c_str(), at_s);
  return which + " (" + ops + " -> " + outs + buf;
}

}  // namespace

VerifyResult composed_verification(const std::vector<const Candidate*>& parts) {
  VerifyResult v;
  v.equivalent = true;
  v.log2_bound = -INFINITY;
  v.trials = 0;
  double top = -INFINITY;
  for (const Candidate* c : parts)
    if (!c->is_program) top = std::max(top, c->verification.log2_bound);
  double sum = 0;
  bool first = true;
  for (const Candidate* c : parts) {
    if (c->is_program) continue;
    sum += std::exp2(c->verification.log2_bound - top);
    v.trials = first ? c->verification.trials : std::min(v.trials, c->verification.trials);
    first = false;
  }
  if (!first) v.log2_bound = top + std::log2(sum);
  v.detail = "joined from " + std::to_string(parts.size()) +
             " weight-layer segments, each proved equivalent to its part of the program";
  return v;
}

bool searched_by_layers(const KernelGraph& program, const SearchConfig& config) {
  return config.split_layers &&
         split_weight_layers(program).layers > std::max(config.max_customized_ops, 1);
}

Result<SearchResult> search_by_layers(const KernelGraph& program, const SearchConfig& config) {
  const auto t0 = Clock::now();
  STRATA_ASSIGN_OR_RETURN(Target target, Target::by_name(config.target));
  const LayerSplit split = split_weight_layers(program);
  std::vector<Segment> segs = make_segments(program, split.segment_of, std::max(split.layers, 1));
  const int n = static_cast<int>(segs.size());

  SearchResult result;
  result.notes.push_back("searched in " + std::to_string(n) +
                         " segments, one per weight layer, then as a whole with the time left "
                         "(docs/search.md, \"Layers\")");
  SearchConfig sub = config;
  sub.observer = nullptr;
  sub.split_layers = false;
  const auto share = [&](double limit, int shares) {
    return std::max(kMinShare, (limit - seconds_since(t0)) / shares);
  };
  const auto interrupted = [&] { return config.interrupt && config.interrupt->load(); };
  std::vector<std::vector<Candidate>> parts(n);
  std::vector<bool> from_cache(n + 1, true);
  size_t width = 1;  // candidates to join: the most any segment has
  for (int k = 0; k < n; ++k) {
    Segment& s = segs[k];
    STRATA_ASSIGN_OR_RETURN(s.program, segment_program(program, s));
    SearchConfig c = sub;
    const int shares = n - k + 1;  // this segment, the later ones and the whole program
    if (config.time_limit_s > 0) c.time_limit_s = share(config.time_limit_s, shares);
    if (config.enum_time_limit_s > 0) c.enum_time_limit_s = share(config.enum_time_limit_s, shares);
    if (config.max_states > 0) c.max_states = std::max<int64_t>(1, config.max_states / (n + 1));
    if (!config.checkpoint_path.empty())
      c.checkpoint_path = config.checkpoint_path + ".segment" + std::to_string(k + 1);
    const std::string which = "segment " + std::to_string(k + 1) + " of " + std::to_string(n);
    if (interrupted()) {
      parts[k].push_back(as_written(s.program, target));
      continue;
    }
    auto r = superoptimize(s.program, c);
    if (!r.ok()) {  // a segment the search cannot take is kept as written
      result.notes.push_back(which + " is kept as written: " + r.error().message);
      parts[k].push_back(as_written(s.program, target));
      continue;
    }
    add_part_stats(result.stats, r->stats);
    result.notes.push_back(segment_note(which, s.program, *r, seconds_since(t0)));
    from_cache[k] = r->from_cache;
    for (const std::string& note : r->notes) result.notes.push_back(which + ": " + note);
    result.cache_key += (result.cache_key.empty() ? "" : "+") + r->cache_key;
    parts[k] = std::move(r->ranked);
    width = std::max(width, parts[k].size());
  }

  // Join the i-th graph of every segment; the join of the segments as written is the program.
  std::optional<EquivalenceChecker> checker;
  const VerifyOptions verify_options;  // the bound target, 2^-60
  std::vector<Candidate> joined;
  for (size_t i = 0; i < width; ++i) {
    std::vector<int> map;
    STRATA_ASSIGN_OR_RETURN(KernelGraph out, join_start(program, map));
    std::vector<const Candidate*> used;
    for (int k = 0; k < n; ++k) {
      const Candidate& c = parts[k][std::min(i, parts[k].size() - 1)];
      used.push_back(&c);
      STRATA_RETURN_IF_ERROR(append_segment(c.graph, segs[k], out, map));
    }
    if (std::all_of(used.begin(), used.end(), [](const Candidate* c) { return c->is_program; }))
      continue;
    for (int t : program.outputs()) {
      const std::string& name = program.tensor(t).name;
      const bool free = !name.empty() && out.find_tensor(name) < 0;
      STRATA_RETURN_IF_ERROR(out.mark_output(map[t], free ? name : ""));
    }
    if (std::any_of(joined.begin(), joined.end(),
                    [&](const Candidate& c) { return c.graph.structurally_equal(out); }))
      continue;
    VerifyResult v = composed_verification(used);
    if (v.log2_bound > verify_options.target_log2_bound) {
      const bool out_of_time = config.time_limit_s > 0 && seconds_since(t0) >= config.time_limit_s;
      if (out_of_time || interrupted()) continue;
      if (!checker) {
        STRATA_ASSIGN_OR_RETURN(EquivalenceChecker made,
                                EquivalenceChecker::make(program, VerifyOptions{}));
        checker.emplace(std::move(made));
      }
      STRATA_ASSIGN_OR_RETURN(v, checker->verify(out));
      ++result.stats.candidates_verified;
      if (!v.equivalent || v.unknown || v.log2_bound > verify_options.target_log2_bound) continue;
    }
    GraphCost cost = estimate_cost(out, target);
    joined.push_back({std::move(out), cost, v, false, {}});
  }

  // The whole program, with what is left: fusions across layers are found only here.
  bool whole_searched = false;
  const bool time_left = config.time_limit_s <= 0 || seconds_since(t0) < config.time_limit_s;
  if (time_left && !interrupted()) {
    SearchConfig c = sub;
    c.observer = config.observer;
    if (config.time_limit_s > 0) c.time_limit_s = share(config.time_limit_s, 1);
    if (config.enum_time_limit_s > 0) c.enum_time_limit_s = share(config.enum_time_limit_s, 1);
    if (config.max_states > 0)
      c.max_states = std::max<int64_t>(1, config.max_states - result.stats.states);
    Result<SearchResult> searched = superoptimize(program, c);
    // Nothing joined and the whole program refused (no tiling fits, …): the search's error,
    // as for any program. Otherwise the joins stand and the refusal is a note.
    if (!searched.ok() && joined.empty()) return searched.error();
    if (!searched.ok()) {
      result.notes.push_back("the whole program could not be searched: " +
                             searched.error().message);
    } else {
      whole_searched = true;
      SearchResult& whole = *searched;
      add_part_stats(result.stats, whole.stats);
      from_cache[n] = whole.from_cache;
      for (const std::string& note : whole.notes) result.notes.push_back("whole program: " + note);
      result.cache_key += "+" + whole.cache_key;
      for (Candidate& c : whole.ranked)
        if (!c.is_program && std::none_of(joined.begin(), joined.end(), [&](const Candidate& j) {
              return j.graph.structurally_equal(c.graph);
            }))
          joined.push_back(std::move(c));
    }
  } else {
    result.notes.push_back(interrupted() ? "the whole program was not searched: interrupted"
                                         : "the whole program was not searched: the segments "
                                           "used up the time limit");
    if (result.stats.stop == StopReason::Exhausted) {
      result.stats.stop = interrupted() ? StopReason::Interrupted : StopReason::TimeLimit;
      result.stats.stop_phase = SearchPhase::Enumeration;
    }
  }
  result.from_cache =
      whole_searched && std::all_of(from_cache.begin(), from_cache.end(), [](bool b) { return b; });

  sort_candidates(joined, target);
  if (joined.size() > static_cast<size_t>(config.top_k)) joined.resize(config.top_k);
  result.ranked = std::move(joined);
  result.ranked.push_back(as_written(program, target));
  sort_candidates(result.ranked, target);
  result.stats.elapsed_s = seconds_since(t0);
  return result;
}

}  // namespace strata::search
