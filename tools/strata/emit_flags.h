// Emitter options shared by `strata emit` and `strata profile`: named flags for the knobs
// one usually changes, plus --knobs for every knob of include/strata/codegen/emit_knobs.h.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "strata/codegen/cuda_emitter.h"
#include "strata/util/status.h"

namespace strata::cli {

/// The emitter flags as parsed; zero / false / empty leave the EmitOptions defaults.
struct EmitFlags {
  int stages = 0;   ///< PlanOptions::forced_stages
  int groups = -1;  ///< PlanOptions::loop_groups; -1 = not given
  int threads = 0;  ///< PlanOptions::threads
  bool no_tensor_cores = false, f32_intermediates = false, no_chain = false, no_fold = false,
       no_register_accums = false, no_rowwise = false, no_library_matmul = false;
  std::string knobs;  ///< apply_emit_knobs spec, applied after the named flags
};

/// Adds --stages, --groups, --threads, --no-tensor-cores, --f32-intermediates, --no-chain,
/// --no-fold, --no-register-accums, --no-rowwise, --no-library-matmul and --knobs (whose help lists
/// every knob with its default) to `app`, parsed into `flags` (which must outlive the parse).
void add_emit_flags(CLI::App& app, EmitFlags& flags);

/// Sets the fields of `options` that `flags` name; an error for a malformed --knobs spec.
Status apply_emit_flags(const EmitFlags& flags, EmitOptions& options);

}  // namespace strata::cli
