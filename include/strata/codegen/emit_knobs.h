// Emitter variants as text: "groups=8,stages=2,chain=0" sets EmitOptions / PlanOptions fields,
// so that command lines (strata emit --knobs, strata profile --variants) and sweep scripts can
// name every knob of the graph optimizer and the emitter. The empty string and "default" leave
// the defaults.
//
// Knobs (integers; booleans are 0 or 1; byte counts accept a k suffix, 1k = 1024):
//   groups     PlanOptions::loop_groups       stages     PlanOptions::forced_stages
//   early      PlanOptions::early_refill
//   threads    PlanOptions::threads           minblocks  PlanOptions::min_blocks_per_sm
//   maxstages  PlanOptions::max_stages
//   inflight   PlanOptions::bytes_in_flight   regfloats  PlanOptions::register_accum_floats
//   sms        PlanOptions::sm_count          smem       PlanOptions::smem_limit
//   tc         PlanOptions::tensor_cores      chain      PlanOptions::chain_matmuls
//   chainmt    PlanOptions::chain_row_tiles   wgmma      PlanOptions::wgmma
//   fold       PlanOptions::fold_norms        regacc     PlanOptions::register_accums
//   rowwise    PlanOptions::rowwise           inline     PlanOptions::inline_elementwise
//   epilogue   PlanOptions::fuse_epilogues    hoist      PlanOptions::hoist_invariants
//   views      PlanOptions::concat_views      f32mid     EmitOptions::f32_intermediates
//   walk       PlanOptions::split_chunk_walks
//   evict      EmitOptions::l2_streaming     evictmin   EmitOptions::l2_streaming_min_bytes
//   blas       EmitOptions::library_matmul    streams    EmitOptions::max_side_streams
#pragma once

#include <string>
#include <vector>

#include "strata/codegen/cuda_emitter.h"
#include "strata/util/status.h"

namespace strata {

/// Applies a comma-separated list of knob=value settings to `options`. Errors name the
/// unknown knob or the malformed value.
Status apply_emit_knobs(const std::string& spec, EmitOptions& options);

/// One line per knob: its name, what it controls and its default value.
std::string emit_knobs_help();

/// The knobs of `options` that differ from the defaults, as a spec apply_emit_knobs accepts
/// ("default" when none differs).
std::string format_emit_knobs(const EmitOptions& options);

/// The knob names apply_emit_knobs understands, in documentation order.
std::vector<std::string> emit_knob_names();

}  // namespace strata
