#include "strata/gpu/variant_profile.h"

namespace strata {

std::vector<VariantRun> emit_variant_runs(const std::vector<VariantCandidate>& candidates,
                                          const std::vector<EmitterVariant>& variants,
                                          const std::function<bool(size_t)>& select) {
  std::vector<VariantRun> runs;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const VariantCandidate& cand = candidates[c];
    const int count = cand.source ? 1 : static_cast<int>(variants.size());
    for (int v = 0; v < count; ++v) {
      VariantRun run;
      run.candidate = static_cast<int>(c);
      run.variant = cand.source ? -1 : v;
      run.selected = !select || select(runs.size());
      if (run.selected) {
        if (cand.source) {
          run.source = *cand.source;
        } else if (cand.graph.is_parallel()) {
          run.emit_error = "a graph over " + std::to_string(cand.graph.ranks()) +
                           " rank(s) with all_reduce runs one process per GPU under a launcher, "
                           "not in `strata profile` (docs/tensor-parallel.md, bench/tp_bench.py)";
        } else {
          Result<std::string> emitted = variants[v].emit(cand.graph);
          if (emitted.ok())
            run.source = std::move(emitted).value();
          else
            run.emit_error = "CUDA emitter: " + emitted.error().message;
        }
      }
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

Status profile_variant_runs(const std::vector<VariantCandidate>& candidates,
                            std::vector<VariantRun>& runs, const ProfileOptions& options) {
  std::vector<KernelGraph> graphs;
  std::vector<std::string> sources;
  std::vector<int> run_of;  // profiled index → run index
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].source) continue;
    graphs.push_back(candidates[runs[i].candidate].graph);
    sources.push_back(*runs[i].source);
    run_of.push_back(static_cast<int>(i));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<ProfiledCandidate> profiled,
                          profile_candidates(graphs, sources, options));
  for (ProfiledCandidate& pc : profiled) {
    const int run = run_of[pc.index];
    pc.index = run;
    if (pc.same_as >= 0) pc.same_as = run_of[pc.same_as];
    runs[run].outcome = std::move(pc);
  }
  return Status::success();
}

int fastest_variant_run(const std::vector<VariantRun>& runs) {
  int best = -1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& o = runs[i].outcome;
    if (!o || !o->timing) continue;
    if (best < 0 || o->timing->median_us < runs[best].outcome->timing->median_us)
      best = static_cast<int>(i);
  }
  return best;
}

}  // namespace strata
