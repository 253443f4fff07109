// Emitter variants tried per candidate when a search result is profiled on the GPU
// (docs/search.md, "On a GPU"): knob specs of include/strata/codegen/emit_knobs.h.
#pragma once

#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata {

/// The default variants: the emitter's own choice, four loop groups, registers capped for two
/// blocks per SM, two row tiles per warp in matmul chains, four loop groups with flat chunk
/// loops (the knobs that won on the H200 sweeps, docs/search.md), and warpgroup MMA (wgmma=1:
/// sm_90a only; for any other target it emits the default's code, which is not run twice).
const std::vector<std::string>& default_tuning_variants();

/// Knob specs normalized (format_emit_knobs) and without repeats; {"default"} when empty. The
/// Error names the spec that does not parse.
Result<std::vector<std::string>> normalize_variants(const std::vector<std::string>& specs);

}  // namespace strata
