// Checking and timing compiled graphs on the GPU (bench/README.md, docs/gpu-runtime.md).
//
// Method, shared with the benchmark harness (bench/):
//  - correctness first: inputs are uploaded, the outputs are placed as the library declares
//    (packed outputs share one allocation, docs/gpu-runtime.md "Packed outputs"), all of their
//    bytes are poisoned (0xFF, a NaN in f16/bf16/f32), the graph runs once, and each output
//    (read through its strides) must be within a relative L2 error of `tolerance` (fp16: 1e-2)
//    of the float64 reference; a NaN or infinity fails;
//  - timing: enough input/output sets that one pass over them moves more than l2_multiple × the
//    L2 cache (queried from the device), one launch per set captured into a CUDA graph, the
//    pass repeated until the graph holds ≥ min_launches launches or ≥ min_replay_us of work
//    (whichever comes first; one timed eager launch estimates the work); after warm-up replays, every
//    replay is bracketed by CUDA events and its time divided by its launches; the statistics
//    are over ≥ `runs` replays (median reported).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/gpu/gpu_jit.h"
#include "strata/ir/kernel_graph.h"
#include "strata/gpu/runtime_api.h"
#include "strata/util/status.h"

namespace strata {

/// ||got − want||₂ / ||want||₂ (the absolute norm when want is all zeros); +infinity when the
/// sizes differ or `got` holds a NaN or an infinity.
double relative_l2_error(const std::vector<double>& got, const std::vector<double>& want);

/// Outcome of one correctness check.
struct CheckResult {
  bool passed = false;
  double max_rel_l2_error = 0;       ///< worst output
  std::vector<double> rel_l2_error;  ///< per output
  std::string detail;                ///< e.g. "output 0 (O): relative L2 error 0.31 > 0.01"
};

/// Runs `graph` once on `inputs` (host values, one vector per input in signature order,
/// encoded to each input's dtype) with poisoned outputs and compares every output with
/// `expected`. The outputs are placed as the library declares (`packed`: views of one
/// allocation where it packs them, read through their strides; output_buffers.h) or each
/// alone (the library's fallback copies). The graph's signature must be known. Errors:
/// allocation, launch or synchronization failures (a failed check is a CheckResult, not an
/// Error).
Result<CheckResult> check_outputs(CompiledGraph& graph,
                                  const std::vector<std::vector<double>>& inputs,
                                  const std::vector<std::vector<double>>& expected,
                                  double tolerance, bool packed = true);

struct TimingOptions {
  int warmup_runs = 5;       ///< untimed replays of the whole pass
  int runs = 100;            ///< timed replays (bench/README.md: ≥ 100)
  double l2_multiple = 4.0;  ///< one pass moves more than this × L2 bytes
  int max_sets = 8192;       ///< upper bound on rotated sets (tiny graphs)
  /// Launches per replay at least this many (passes over the sets repeated): a replay's own
  /// cost (the graph launch and its event, a few µs) is spread over them, as it is for the
  /// launch floor, instead of adding a fifth of it to each call of a large-input graph.
  int min_launches = 100;
  /// ... or at least this much work (µs, estimated from one eager launch), whichever needs
  /// fewer passes: a replay of milliseconds amortizes its own cost without a hundred launches
  /// of a long graph (a 4.6 ms prefill attention would otherwise take 46 s per candidate).
  double min_replay_us = 2000;
  /// Upper bound on the device memory the rotated sets may take, as a fraction of free memory.
  double max_memory_fraction = 0.5;
  /// Outputs of each set placed as the library declares (the packed fast path,
  /// output_buffers.h); false: every output alone (the fallback).
  bool packed_outputs = true;
};

/// Per-launch time statistics of one graph.
struct Timing {
  double median_us = 0, mean_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
  int runs = 0;               ///< timed replays
  int sets = 0;               ///< rotated input/output sets = launches per pass
  int passes = 0;             ///< passes over the sets per replay
  int64_t bytes_per_set = 0;  ///< input + output bytes of one launch
  int64_t l2_bytes = 0;       ///< L2 size of the device
};

/// Passes over `sets` per replay: enough that a replay holds ≥ options.min_launches launches
/// or ≥ options.min_replay_us of work at `launch_us` per launch (≤ 0: unknown, by count only),
/// whichever is fewer; at least 1.
int passes_for(int sets, double launch_us, const TimingOptions& options);

/// Times `graph` per the method above. `inputs` (host values, as for check_outputs) fill the
/// first set and are copied to the others; empty = device buffers filled with a small constant.
Result<Timing> time_graph(CompiledGraph& graph, const std::vector<std::vector<double>>& inputs,
                          const TimingOptions& options);

}  // namespace strata
