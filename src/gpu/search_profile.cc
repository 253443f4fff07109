#include "strata/gpu/search_profile.h"

#include <cmath>

#include "strata/gpu/candidate_profiler.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/runtime_api.h"
#include "strata/gpu/variant_profile.h"

namespace strata {

Result<Json> profile_search_result(const KernelGraph& program, const SearchResult& result,
                                   const SearchProfileOptions& options) {
  if (gpu_count() == 0) return make_error("no CUDA device is available");
  STRATA_ASSIGN_OR_RETURN(DeviceInfo dev, query_device());
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> variants, normalize_variants(options.variants));
  const std::string arch = options.jit.arch.empty() ? dev.arch() : options.jit.arch;

  // Every ranked graph once per variant; emitter failures are recorded, the rest profiled.
  std::vector<VariantCandidate> candidates;
  for (const Candidate& c : result.ranked) candidates.push_back({c.graph, std::nullopt});
  std::vector<EmitterVariant> emitters;
  for (const std::string& knobs : variants)
    emitters.push_back({knobs, [&arch, knobs](const KernelGraph& g) {
                          return emit_graph_source(g, arch, knobs);
                        }});
  std::vector<VariantRun> runs = emit_variant_runs(candidates, emitters);
  ProfileOptions po;
  po.jit = options.jit;
  po.jit.arch = arch;
  po.reference = program;
  po.inputs = options.inputs;
  po.input_scale = options.input_scale;
  STRATA_RETURN_IF_ERROR(profile_variant_runs(candidates, runs, po));

  Json entries = Json::array();
  for (size_t i = 0; i < result.ranked.size(); ++i)
    entries.push_back({{"rank", i}, {"variants", Json::array()}});
  for (const VariantRun& run : runs) {
    Json ve = Json::object();
    ve["knobs"] = variants[run.variant];
    if (!run.emit_error.empty()) {
      ve["status"] = candidate_status_name(CandidateStatus::CompileError);
      ve["error"] = run.emit_error;
    } else if (run.outcome) {
      const ProfiledCandidate& pc = *run.outcome;
      ve["status"] = candidate_status_name(pc.status);
      if (!pc.error.empty()) ve["error"] = pc.error;
      if (pc.rel_l2_error >= 0 && std::isfinite(pc.rel_l2_error))
        ve["rel_l2_error"] = pc.rel_l2_error;
      if (pc.same_as >= 0 && runs[pc.same_as].candidate == run.candidate)  // knobs that
        ve["same_code_as"] = variants[runs[pc.same_as].variant];  // change nothing here
      if (pc.timing) ve["measured_us"] = pc.timing->median_us;
    }
    entries[run.candidate]["variants"].push_back(ve);
  }
  const int best = fastest_variant_run(runs);
  const int fastest = best >= 0 ? runs[best].candidate : -1;
  const int fastest_variant = best >= 0 ? runs[best].variant : -1;
  const double fastest_us = best >= 0 ? runs[best].outcome->timing->median_us : 0;
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
