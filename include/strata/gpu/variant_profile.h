// Profiling candidates × emitter variants on the GPU (docs/gpu-runtime.md, "Checking and timing"): the
// library behind `strata optimize` (through search_profile.h), `strata profile` and the Python
// package. Every graph candidate is emitted once per emitter variant, a candidate given as
// CUDA source is compiled as is, once; then all are compiled, checked against the float64
// reference and timed by profile_candidates (candidate_profiler.h). Callers format the
// reports; the expansion, the emission, the mapping of outcomes back to (candidate, variant)
// and the choice of the fastest live here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/gpu/candidate_profiler.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// One emitter variant: its name as reported (a knob spec) and how it turns a graph into
/// CUDA source (an Error when the emitter rejects the graph).
struct EmitterVariant {
  std::string name;
  std::function<Result<std::string>(const KernelGraph&)> emit;
};

/// One candidate: a graph, emitted once per variant, or (`source` set) CUDA source compiled
/// as is, once, and checked as the code of `graph`.
struct VariantCandidate {
  KernelGraph graph;
  std::optional<std::string> source;
};

/// One (candidate, variant) pair of the expansion.
struct VariantRun {
  int candidate = 0;     ///< index into the candidates
  int variant = -1;      ///< index into the variants; -1 for a candidate given as source
  bool selected = true;  ///< false: left out by the caller's selection
  std::optional<std::string> source;  ///< the CUDA source: emitted or given (selected runs)
  std::string emit_error;             ///< "CUDA emitter: …" when the emitter rejected the graph
  /// After profile_variant_runs, for every run with a source: the outcome, with `index` this
  /// run's index and `same_as` (≥ 0) the index of an earlier run whose code and outcome this
  /// one repeats.
  std::optional<ProfiledCandidate> outcome;
};

/// Expands the candidates in order, each graph candidate once per variant (in order), each
/// source candidate once, and emits every run `select(run index)` keeps (all without
/// `select`). Emitter failures are recorded in the run, never fatal.
std::vector<VariantRun> emit_variant_runs(const std::vector<VariantCandidate>& candidates,
                                          const std::vector<EmitterVariant>& variants,
                                          const std::function<bool(size_t)>& select = {});

/// Compiles, checks and times every run that has a source (profile_candidates, in run order)
/// and fills its outcome. Errors: those of profile_candidates (no GPU, inputs that do not fit,
/// a reference that fails).
Status profile_variant_runs(const std::vector<VariantCandidate>& candidates,
                            std::vector<VariantRun>& runs, const ProfileOptions& options);

/// The index of the run with the least median time (the first of equals), or -1 when none
/// was timed.
int fastest_variant_run(const std::vector<VariantRun>& runs);

}  // namespace strata
