#include "strata/search_profile.h"

#include <cmath>

#include "strata/candidate_profiler.h"
#include "strata/gpu_device.h"
#include "strata/runtime_api.h"

namespace strata {

Result<Json> profile_search_result(const KernelGraph& program, const SearchResult& result,
                                   const SearchProfileOptions& options) {
  if (gpu_count() == 0) return make_error("no CUDA device is available");
  STRATA_ASSIGN_OR_RETURN(DeviceInfo dev, query_device());
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> variants, normalize_variants(options.variants));
  const std::string arch = options.jit.arch.empty() ? dev.arch() : options.jit.arch;

  // Emit every (candidate, variant); emitter failures are recorded, the rest profiled.
  std::vector<KernelGraph> graphs;
  std::vector<std::string> sources;
  std::vector<std::pair<int, int>> slot_of;  // profiled index → (rank, variant)
  Json entries = Json::array();
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    Json e = Json::object();
    e["rank"] = i;
    e["variants"] = Json::array();
    for (size_t v = 0; v < variants.size(); ++v) {
      Json ve = Json::object();
      ve["knobs"] = variants[v];
      auto source = emit_graph_source(result.ranked[i].graph, arch, variants[v]);
      if (!source.ok()) {
        ve["status"] = candidate_status_name(CandidateStatus::CompileError);
        ve["error"] = "CUDA emitter: " + source.error().message;
      } else {
        graphs.push_back(result.ranked[i].graph);
        sources.push_back(*source);
        slot_of.emplace_back(static_cast<int>(i), static_cast<int>(v));
      }
      e["variants"].push_back(ve);
    }
    entries.push_back(e);
  }
  ProfileOptions po;
  po.jit = options.jit;
  po.jit.arch = arch;
  po.reference = program;
  po.inputs = options.inputs;
  po.input_scale = options.input_scale;
  STRATA_ASSIGN_OR_RETURN(std::vector<ProfiledCandidate> profiled,
                          profile_candidates(graphs, sources, po));

  int fastest = -1, fastest_variant = -1;
  double fastest_us = 0;
  for (const ProfiledCandidate& pc : profiled) {
    const auto [rank, v] = slot_of[pc.index];
    Json& ve = entries[rank]["variants"][v];
    ve["status"] = candidate_status_name(pc.status);
    if (!pc.error.empty()) ve["error"] = pc.error;
    if (pc.rel_l2_error >= 0 && std::isfinite(pc.rel_l2_error))
      ve["rel_l2_error"] = pc.rel_l2_error;
    if (pc.same_as >= 0 && slot_of[pc.same_as].first == rank)  // knobs that change nothing here
      ve["same_code_as"] = variants[slot_of[pc.same_as].second];
    if (pc.timing) {
      ve["measured_us"] = pc.timing->median_us;
      if (fastest < 0 || pc.timing->median_us < fastest_us) {
        fastest = rank;
        fastest_variant = v;
        fastest_us = pc.timing->median_us;
      }
    }
  }
  // Per candidate: the status and time of its fastest correct variant (else of the first).
  // (A copy: inserting into an ordered_json object may move its members.)
  for (Json& e : entries) {
    Json best = e["variants"][0];
    for (const Json& ve : e["variants"])
      if (ve.contains("measured_us") &&
          (!best.contains("measured_us") ||
           ve["measured_us"].get<double>() < best["measured_us"].get<double>()))
        best = ve;
    for (const char* key : {"status", "knobs", "measured_us", "error"})
      if (best.contains(key)) e[key] = best[key];
  }
  std::string inputs = options.inputs_description;
  if (inputs.empty()) inputs = "uniform(±" + std::to_string(options.input_scale) + ")";
  Json report = {{"device", dev.name},
                 {"arch", arch},
                 {"variants", variants},
                 {"inputs", inputs},
                 {"fastest", fastest >= 0 ? Json(fastest) : Json(nullptr)},
                 {"candidates", entries}};
  if (fastest >= 0) {
    report["fastest_variant"] = variants[fastest_variant];
    report["fastest_us"] = fastest_us;
  }
  return report;
}

}  // namespace strata
