#include "strata/search/search_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "search/cost_ties.h"
#include "strata/cost/cost_json.h"

namespace strata {
namespace {

constexpr const char* kFormat = "strata-search-result";
constexpr int kVersion = 1;

Json number_or_null(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

Json verification_json(const VerifyResult& v) {
  Json j;
  j["equivalent"] = v.equivalent;
  j["trials"] = v.trials;
  j["log2_bound"] = number_or_null(v.log2_bound);
  j["detail"] = v.detail;
  return j;
}

/// The fields a whole search and each of its forms share (SearchStats, FormStats): states,
/// candidates, tasks, the time and the stop reason. A rule's rewrites go in as given.
template <class Stats>
void put_run_fields(const Stats& s, Json& j) {
  j["states"] = s.states;
  Json rw = Json::object();
  for (const auto& [rule, n] : s.rewrites_by_rule) rw[rule] = n;
  j["rewrites_by_rule"] = rw;
  j["candidates_found"] = s.candidates_found;
  j["candidates_verified"] = s.candidates_verified;
  j["tasks_total"] = s.tasks_total;
  j["tasks_done"] = s.tasks_done;
  j["elapsed_s"] = s.elapsed_s;
  j["stop"] = std::string(stop_reason_name(s.stop));
  j["stop_phase"] = std::string(search_phase_name(s.stop_phase));
}

Json stats_json(const SearchStats& s) {
  Json j;
  put_run_fields(s, j);
  Json p = Json::object();
  int64_t total = 0;
  for (const auto& [rule, n] : s.prunes_by_rule) {
    p[rule] = n;
    total += n;
  }
  j["pruned"] = total;
  j["prunes_by_rule"] = p;
  j["candidates_screened"] = s.candidates_screened;
  j["setup_s"] = s.setup_s;
  j["screen_s"] = s.screen_s;
  j["verify_s"] = s.verify_s;
  j["verification_complete"] = s.verification_complete;
  Json forms = Json::array();
  for (const FormStats& f : s.forms) {
    Json e;
    e["name"] = f.name;
    put_run_fields(f, e);
    e["searched"] = f.searched;
    if (!f.note.empty()) e["note"] = f.note;
    e["ranked"] = f.ranked;
    e["start_s"] = f.start_s;
    e["checks_s"] = f.checks_s;
    forms.push_back(e);
  }
  j["forms"] = forms;
  return j;
}

/// The rule counts of an object member `key` of j; entries that are not counts are left out.
std::map<std::string, int64_t> rule_counts(const Json& j, const char* key) {
  std::map<std::string, int64_t> out;
  auto rw = j.find(key);
  if (rw != j.end() && rw->is_object())
    for (auto it = rw->begin(); it != rw->end(); ++it)
      if (auto n = json_int(it.value(), it.key(), 0, std::numeric_limits<int64_t>::max()); n.ok())
        out[it.key()] = *n;
  return out;
}

StopReason stop_reason_from(const std::string& name) {
  for (StopReason r : {StopReason::Exhausted, StopReason::TimeLimit, StopReason::StateLimit,
                       StopReason::Interrupted, StopReason::CacheHit})
    if (stop_reason_name(r) == name) return r;
  return StopReason::Exhausted;
}

SearchPhase search_phase_from(const std::string& name) {
  for (SearchPhase p : {SearchPhase::None, SearchPhase::Enumeration, SearchPhase::Verification})
    if (search_phase_name(p) == name) return p;
  return SearchPhase::None;
}

/// The member `key` of `j` as a T, or `fallback` when it is absent, null, of another type or
/// (integers) outside the range of T: an informational field never stops a result from loading,
/// and is never truncated.
template <class T>
T get_or(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    auto v = json_int(*it, key, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    return v.ok() ? static_cast<T>(*v) : fallback;
  } else {
    try {
      return it->get<T>();
    } catch (const nlohmann::json::exception&) {
      return fallback;
    }
  }
}

}  // namespace

void sort_candidates(std::vector<Candidate>& ranked, const Target& target) {
  std::vector<std::pair<std::string, size_t>> keys;
  for (size_t i = 0; i < ranked.size(); ++i)
    keys.emplace_back(kernel_graph_to_json(ranked[i].graph).dump(), i);
  std::vector<size_t> order(ranked.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double ta = ranked[a].cost.predicted_us, tb = ranked[b].cost.predicted_us;
    if (ta != tb) return ta < tb;
    return keys[a].first < keys[b].first;
  });
  std::vector<double> predicted;
  for (size_t i : order) predicted.push_back(ranked[i].cost.predicted_us);
  const std::vector<size_t> tied = search::break_cost_ties(predicted, [&](size_t i) {
    return search::loop_barriers_per_sm(ranked[order[i]].graph, target);
  });
  std::vector<Candidate> out;
  for (size_t i : tied) out.push_back(std::move(ranked[order[i]]));
  ranked = std::move(out);
}

Json search_result_to_json(const SearchResult& r, const SearchConfig& config) {
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["strata_version"] = STRATA_VERSION;
  const int prog = r.program_index();
  Json c;
  c["target"] = config.target;
  c["max_kernel_ops"] = config.max_kernel_ops;
  // The limit the search used: 0 stands for the program's (SearchConfig::auto_max_block_ops).
  c["max_block_ops"] = config.max_block_ops == 0 && prog >= 0
                           ? SearchConfig::auto_max_block_ops(r.ranked[prog].graph)
                           : config.max_block_ops;
  c["max_customized_ops"] = config.max_customized_ops;
  c["max_block_inputs"] = config.max_block_inputs;
  c["max_block_outputs"] = config.max_block_outputs;
  c["abstract_pruning"] = config.abstract_pruning;
  c["top_k"] = config.top_k;
  c["canonicalize"] = config.canonicalize;
  c["alternative_forms"] = config.alternative_forms;
  c["split_layers"] = config.split_layers;
  j["config"] = c;
  double program_us = prog >= 0 ? r.ranked[prog].cost.predicted_us : 0;
  j["best"] = r.ranked.empty() ? Json(nullptr) : Json(0);
  j["program_index"] = prog;
  Json ranked = Json::array();
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& cand = r.ranked[i];
    Json e;
    e["rank"] = i;
    e["is_program"] = cand.is_program;
    if (!cand.derived.empty()) e["derived"] = cand.derived;
    if (!cand.form.empty()) e["form"] = cand.form;
    e["predicted_us"] = cand.cost.predicted_us;
    e["speedup_vs_program"] =
        cand.cost.predicted_us > 0 ? program_us / cand.cost.predicted_us : 0.0;
    e["kernels"] = cand.graph.ops().size() - cand.graph.inputs().size();
    e["customized_kernels"] = cand.graph.num_customized();
    Json costs = Json::array();
    for (const KernelCost& k : cand.cost.kernels) costs.push_back(kernel_cost_to_json(k));
    e["cost"] = costs;
    e["verification"] = verification_json(cand.verification);
    e["graph"] = kernel_graph_to_json(cand.graph);
    ranked.push_back(e);
  }
  j["ranked"] = ranked;
  j["stats"] = stats_json(r.stats);
  j["cache_key"] = r.cache_key;
  j["from_cache"] = r.from_cache;
  j["notes"] = r.notes;
  return j;
}

Result<SearchResult> search_result_from_json(const Json& doc, const Target& target) {
  if (!doc.is_object() || get_or<std::string>(doc, "format", "") != kFormat)
    return make_error("not a " + std::string(kFormat) + " document");
  auto ranked = doc.find("ranked");
  if (ranked == doc.end() || !ranked->is_array())
    return make_error(std::string(kFormat) + ": missing \"ranked\"");
  SearchResult r;
  for (size_t i = 0; i < ranked->size(); ++i) {
    const Json& e = (*ranked)[i];
    std::string where = "ranked[" + std::to_string(i) + "]";
    auto g = e.find("graph");
    if (!e.is_object() || g == e.end()) return make_error(where + ": missing \"graph\"");
    STRATA_ASSIGN_OR_RETURN(KernelGraph graph, kernel_graph_from_json(*g, where + ".graph"));
    Candidate c{std::move(graph), {}, {}, get_or<bool>(e, "is_program", false),
                get_or<std::string>(e, "derived", ""), get_or<std::string>(e, "form", "")};
    c.cost = estimate_cost(c.graph, target);
    auto v = e.find("verification");
    if (v != e.end() && v->is_object()) {
      c.verification.equivalent = get_or<bool>(*v, "equivalent", false);
      c.verification.trials = get_or<int>(*v, "trials", 0);
      c.verification.log2_bound = get_or<double>(*v, "log2_bound", -INFINITY);
      c.verification.detail = get_or<std::string>(*v, "detail", "");
    }
    r.ranked.push_back(std::move(c));
  }
  sort_candidates(r.ranked, target);
  auto s = doc.find("stats");
  if (s != doc.end() && s->is_object()) {
    r.stats.states = get_or<int64_t>(*s, "states", 0);
    auto p = s->find("prunes_by_rule");
    if (p != s->end() && p->is_object())
      for (auto it = p->begin(); it != p->end(); ++it)
        if (auto n = json_int(it.value(), it.key(), 0, std::numeric_limits<int64_t>::max()); n.ok())
          r.stats.prunes_by_rule[it.key()] = *n;
    r.stats.rewrites_by_rule = rule_counts(*s, "rewrites_by_rule");
    r.stats.candidates_found = get_or<int64_t>(*s, "candidates_found", 0);
    r.stats.candidates_screened = get_or<int64_t>(*s, "candidates_screened", 0);
    r.stats.candidates_verified = get_or<int64_t>(*s, "candidates_verified", 0);
    r.stats.tasks_total = get_or<int64_t>(*s, "tasks_total", 0);
    r.stats.tasks_done = get_or<int64_t>(*s, "tasks_done", 0);
    r.stats.elapsed_s = get_or<double>(*s, "elapsed_s", 0.0);
    r.stats.setup_s = get_or<double>(*s, "setup_s", 0.0);
    r.stats.screen_s = get_or<double>(*s, "screen_s", 0.0);
    r.stats.verify_s = get_or<double>(*s, "verify_s", 0.0);
    r.stats.stop = stop_reason_from(get_or<std::string>(*s, "stop", ""));
    r.stats.stop_phase = search_phase_from(get_or<std::string>(*s, "stop_phase", ""));
    r.stats.verification_complete = get_or<bool>(*s, "verification_complete", true);
    auto forms = s->find("forms");
    if (forms != s->end() && forms->is_array())
      for (const Json& e : *forms) {
        if (!e.is_object()) continue;
        FormStats f;
        f.name = get_or<std::string>(e, "name", "");
        f.rewrites_by_rule = rule_counts(e, "rewrites_by_rule");
        f.searched = get_or<bool>(e, "searched", false);
        f.note = get_or<std::string>(e, "note", "");
        f.states = get_or<int64_t>(e, "states", 0);
        f.candidates_found = get_or<int64_t>(e, "candidates_found", 0);
        f.candidates_verified = get_or<int64_t>(e, "candidates_verified", 0);
        f.tasks_total = get_or<int64_t>(e, "tasks_total", 0);
        f.tasks_done = get_or<int64_t>(e, "tasks_done", 0);
        f.ranked = get_or<int64_t>(e, "ranked", 0);
        f.start_s = get_or<double>(e, "start_s", 0.0);
        f.elapsed_s = get_or<double>(e, "elapsed_s", 0.0);
        f.checks_s = get_or<double>(e, "checks_s", 0.0);
        f.stop = stop_reason_from(get_or<std::string>(e, "stop", ""));
        f.stop_phase = search_phase_from(get_or<std::string>(e, "stop_phase", ""));
        r.stats.forms.push_back(std::move(f));
      }
  }
  r.cache_key = get_or<std::string>(doc, "cache_key", "");
  auto notes = doc.find("notes");
  if (notes != doc.end() && notes->is_array())
    for (const Json& n : *notes)
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  if (r.program_index() < 0) return make_error(std::string(kFormat) + ": no program entry");
  return r;
}

}  // namespace strata
