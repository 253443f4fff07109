#include "search/segments.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "strata/cost/cost_model.h"
#include "strata/search/search_report.h"
#include "strata/verify/verifier.h"

namespace strata::search {
namespace {

bool is_collective(const KernelOp& op) {
  return op_category(op.kind) == Category::Collective;
}

/// Splits `p` at its collectives: an op's segment is the number of collectives on its longest
/// path from the inputs; collectives[k] are those whose input is computed in segment k.
void split(const KernelGraph& p, std::vector<Segment>& segs,
           std::vector<std::vector<int>>& collectives) {
  const int nt = static_cast<int>(p.tensors().size());
  std::vector<int> after(nt, 0);  // segment from which tensor t is available
  std::vector<int> seg_of(p.ops().size(), -1);
  std::vector<int> coll_of(p.ops().size(), -1);
  int nseg = 1;
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const KernelOp& op = p.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) continue;
    int s = 0;
    for (int t : op.inputs) s = std::max(s, after[t]);
    (is_collective(op) ? coll_of : seg_of)[i] = s;
    for (int t : op.outputs) after[t] = is_collective(op) ? s + 1 : s;
    nseg = std::max(nseg, s + 2);
  }
  segs = make_segments(p, seg_of, nseg);
  collectives.assign(nseg, {});
  for (size_t i = 0; i < p.ops().size(); ++i)
    if (coll_of[i] >= 0) collectives[coll_of[i]].push_back(static_cast<int>(i));
}

}  // namespace

std::vector<Segment> make_segments(const KernelGraph& p, const std::vector<int>& seg_of, int nseg) {
  const int nt = static_cast<int>(p.tensors().size());
  std::vector<Segment> segs(nseg);
  for (size_t i = 0; i < p.ops().size(); ++i)
    if (seg_of[i] >= 0) segs[seg_of[i]].ops.push_back(static_cast<int>(i));
  std::vector<int> producer_seg(nt, -1);  // segment of a tensor's producing op (-1: other)
  for (size_t k = 0; k < segs.size(); ++k)
    for (int i : segs[k].ops)
      for (int t : p.op(i).outputs) producer_seg[t] = static_cast<int>(k);
  std::vector<bool> is_out(nt, false);
  for (int t : p.outputs()) is_out[t] = true;
  for (size_t k = 0; k < segs.size(); ++k) {
    Segment& s = segs[k];
    for (int i : s.ops)
      for (int t : p.op(i).inputs)
        if (producer_seg[t] != static_cast<int>(k) &&
            std::find(s.inputs.begin(), s.inputs.end(), t) == s.inputs.end())
          s.inputs.push_back(t);
    for (int i : s.ops)
      for (int t : p.op(i).outputs) {
        bool read_later = is_out[t];
        for (size_t j = 0; j < p.ops().size() && !read_later; ++j) {
          const KernelOp& r = p.op(static_cast<int>(j));
          if (std::find(r.inputs.begin(), r.inputs.end(), t) == r.inputs.end()) continue;
          read_later = seg_of[j] != static_cast<int>(k);
        }
        if (read_later) s.outputs.push_back(t);
      }
  }
  return segs;
}

Result<KernelGraph> segment_program(const KernelGraph& p, const Segment& s) {
  KernelGraph g;
  std::vector<int> map(p.tensors().size(), -1);
  for (int t : s.inputs) {
    STRATA_ASSIGN_OR_RETURN(map[t],
                            g.add_input(p.tensor_name(t), p.tensor(t).shape, p.tensor(t).dtype));
  }
  for (int i : s.ops) {
    const KernelOp& op = p.op(i);
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(map[t]);
    STRATA_ASSIGN_OR_RETURN(map[op.outputs[0]],
                            g.add_op(op.kind, ins, op.attrs, p.tensor(op.outputs[0]).name));
  }
  for (int t : s.outputs) STRATA_RETURN_IF_ERROR(g.mark_output(map[t]));
  return g;
}

Result<KernelGraph> join_start(const KernelGraph& program, std::vector<int>& map) {
  KernelGraph out;
  map.assign(program.tensors().size(), -1);
  for (int t : program.inputs()) {
    STRATA_ASSIGN_OR_RETURN(map[t], out.add_input(program.tensor_name(t), program.tensor(t).shape,
                                                  program.tensor(t).dtype));
  }
  return out;
}

Status append_segment(const KernelGraph& c, const Segment& s, KernelGraph& out,
                      std::vector<int>& map) {
  std::vector<int> local(c.tensors().size(), -1);
  for (size_t i = 0; i < c.inputs().size(); ++i) local[c.inputs()[i]] = map[s.inputs[i]];
  for (const KernelOp& op : c.ops()) {
    if (op.kind == OpKind::Input) continue;
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(local[t]);
    if (op.kind == OpKind::Customized) {
      STRATA_ASSIGN_OR_RETURN(std::vector<int> outs, out.add_customized(ins, *op.body));
      for (size_t k = 0; k < outs.size(); ++k) local[op.outputs[k]] = outs[k];
    } else {
      STRATA_ASSIGN_OR_RETURN(local[op.outputs[0]], out.add_op(op.kind, ins, op.attrs));
    }
  }
  for (size_t o = 0; o < s.outputs.size(); ++o) map[s.outputs[o]] = local[c.outputs()[o]];
  return Status::success();
}

void add_part_stats(SearchStats& into, const SearchStats& st) {
  into.states += st.states;
  for (const auto& [rule, n] : st.prunes_by_rule) into.prunes_by_rule[rule] += n;
  for (const auto& [rule, n] : st.rewrites_by_rule) into.rewrites_by_rule[rule] += n;
  into.candidates_found += st.candidates_found;
  into.candidates_screened += st.candidates_screened;
  into.candidates_verified += st.candidates_verified;
  into.tasks_total += st.tasks_total;
  into.tasks_done += st.tasks_done;
  into.setup_s += st.setup_s;
  into.screen_s += st.screen_s;
  into.verify_s += st.verify_s;
  const auto stopped = [](StopReason r) {
    return r != StopReason::Exhausted && r != StopReason::CacheHit;
  };
  if (stopped(st.stop) && !stopped(into.stop)) {
    into.stop = st.stop;
    into.stop_phase = st.stop_phase;
  }
  into.verification_complete = into.verification_complete && st.verification_complete;
}

bool has_collectives(const KernelGraph& program) {
  return std::any_of(program.ops().begin(), program.ops().end(), is_collective);
}

Result<SearchResult> search_around_collectives(const KernelGraph& program,
                                               const SearchConfig& config) {
  const auto t0 = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(Target target, Target::by_name(config.target));
  std::vector<Segment> segs;
  std::vector<std::vector<int>> collectives;
  split(program, segs, collectives);
  int searched = 0;
  for (const Segment& s : segs) searched += s.ops.empty() ? 0 : 1;

  SearchResult result;
  std::vector<SearchResult> parts(segs.size());
  SearchConfig sub = config;
  sub.observer = nullptr;
  if (searched > 1) {  // the limits are shared among the segments
    if (sub.time_limit_s > 0) sub.time_limit_s /= searched;
    if (sub.enum_time_limit_s > 0) sub.enum_time_limit_s /= searched;
    if (sub.max_states > 0) sub.max_states = std::max<int64_t>(1, sub.max_states / searched);
  }
  size_t width = 1;  // candidates to join: the most any segment has
  for (size_t k = 0; k < segs.size(); ++k) {
    if (segs[k].ops.empty()) continue;
    STRATA_ASSIGN_OR_RETURN(segs[k].program, segment_program(program, segs[k]));
    auto r = superoptimize(segs[k].program, sub);
    if (!r.ok()) {  // a segment the search cannot take (too large, …) is kept as written
      result.notes.push_back(
          "segment " + std::to_string(k) +
          " (the ops between all_reduce ops) is kept as written: " + r.error().message);
      VerifyResult identity;
      identity.equivalent = true;
      identity.log2_bound = -INFINITY;
      identity.detail = "the input program itself";
      parts[k].ranked.push_back(
          {segs[k].program, estimate_cost(segs[k].program, target), identity, true, {}});
      continue;
    }
    parts[k] = std::move(*r);
    width = std::max(width, parts[k].ranked.size());
    add_part_stats(result.stats, parts[k].stats);
    for (const std::string& n : parts[k].notes) result.notes.push_back(n);
    result.cache_key += (result.cache_key.empty() ? "" : "+") + parts[k].cache_key;
  }
  result.from_cache = std::all_of(parts.begin(), parts.end(), [](const SearchResult& r) {
    return r.ranked.empty() || r.from_cache;
  });

  STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker,
                          EquivalenceChecker::make(program, VerifyOptions{}));
  // Join the i-th graph of every segment; the all-program join is the program itself.
  for (size_t i = 0; i < width; ++i) {
    std::vector<int> map;
    STRATA_ASSIGN_OR_RETURN(KernelGraph out, join_start(program, map));
    bool all_program = true;
    for (size_t k = 0; k < segs.size(); ++k) {
      if (!segs[k].ops.empty()) {
        const std::vector<Candidate>& ranked = parts[k].ranked;
        const Candidate& c = ranked[std::min(i, ranked.size() - 1)];
        all_program = all_program && c.is_program;
        STRATA_RETURN_IF_ERROR(append_segment(c.graph, segs[k], out, map));
      }
      for (int op_id : collectives[k]) {
        const KernelOp& op = program.op(op_id);
        STRATA_ASSIGN_OR_RETURN(map[op.outputs[0]],
                                out.add_op(op.kind, {map[op.inputs[0]]}, op.attrs));
      }
    }
    if (all_program) continue;  // the program is added below
    for (int t : program.outputs()) {
      const std::string& name = program.tensor(t).name;
      const bool free = !name.empty() && out.find_tensor(name) < 0;
      STRATA_RETURN_IF_ERROR(out.mark_output(map[t], free ? name : ""));
    }
    out.copy_parallel_interface(program);
    STRATA_ASSIGN_OR_RETURN(VerifyResult v, checker.verify(out));
    ++result.stats.candidates_verified;
    if (!v.equivalent) continue;  // each part was proved: a join that is not is dropped
    GraphCost cost = estimate_cost(out, target);
    result.ranked.push_back({std::move(out), cost, v, false, {}});
  }
  VerifyResult identity;
  identity.equivalent = true;
  identity.log2_bound = -INFINITY;
  identity.detail = "the input program itself";
  result.ranked.push_back({program, estimate_cost(program, target), identity, true, {}});
  sort_candidates(result.ranked, target);
  result.stats.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace strata::search
