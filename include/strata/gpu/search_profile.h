// Profiling a search result on the GPU: every ranked candidate emitted once per emitter
// variant, compiled, checked against the float64 reference and timed (docs/search.md, "On a
// GPU"). `strata optimize` and the Python package (docs/python.md) call this after the search;
// the report is the result document's "gpu_profile".
#pragma once

#include <string>
#include <vector>

#include "strata/gpu/gpu_jit.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"
#include "strata/codegen/tuning_variants.h"

namespace strata {

struct SearchProfileOptions {
  std::vector<std::string> variants = default_tuning_variants();  ///< knob specs, normalized
  /// Inputs: host values per program input (in order), else uniform in ±input_scale.
  std::vector<std::vector<double>> inputs;
  double input_scale = 0.5;
  std::string inputs_description;  ///< recorded as "inputs"; "" = "uniform(±scale)"
  /// Compilation; an empty arch means the current device's.
  JitOptions jit;
};

/// Profiles every graph of `result.ranked` (the search of `program`) on the current device and
/// returns the "gpu_profile" report of docs/search.md: device, arch, variants, inputs, per
/// candidate the status, knobs and measured time of its fastest correct variant (every variant
/// listed under "variants"), and "fastest" (rank, or null), "fastest_variant", "fastest_us".
/// Failures of single candidates are statuses. Errors: no GPU, a device that cannot be queried,
/// inputs that do not fit the program.
Result<Json> profile_search_result(const KernelGraph& program, const SearchResult& result,
                                   const SearchProfileOptions& options);

}  // namespace strata
