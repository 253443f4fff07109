// Profiling the candidates of a search on the GPU: the hook `strata optimize` and
// `strata profile` use to pick the fastest correct candidate (docs/architecture.md,
// docs/codegen.md, bench/README.md).
//
// Every candidate's generated code is compiled (in parallel, through the binary cache),
// checked against the float64 reference interpreter (include/strata/interp/interpreter.h) and, when
// correct, timed with the method of profiler.h. A candidate that fails gets a status and a
// message; it never stops the others, except a fault that leaves the device unusable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/gpu/gpu_jit.h"
#include "strata/ir/kernel_graph.h"
#include "strata/gpu/profiler.h"
#include "strata/util/status.h"

namespace strata {

/// Per-candidate outcome of profile_candidates.
enum class CandidateStatus { Ok, CompileError, SmemExceeded, LaunchFailure, WrongAnswer, NotRun };
/// "ok", "compile_error", "smem_exceeded", "launch_failure", "wrong_answer", "not_run".
std::string_view candidate_status_name(CandidateStatus s);

struct ProfileOptions {
  JitOptions jit;
  TimingOptions timing;
  double tolerance = 1e-2;  ///< relative L2 error allowed (fp16)
  /// Inputs: uniform in [-input_scale, input_scale) from `seed` (rounded to each input's
  /// dtype) unless `inputs` is given (host values per graph input, in order).
  uint64_t seed = 1;
  double input_scale = 0.5;
  std::vector<std::vector<double>> inputs;
  /// The program all candidates implement: inputs and the float64 reference outputs are
  /// computed once from it, and every candidate must have its input and output shapes. When
  /// unset, each candidate is checked against the reference interpreter run on its own graph.
  std::optional<KernelGraph> reference;
  bool check_only = false;  ///< skip timing
  int threads = 0;          ///< reference interpreter threads (0 = all)
};

struct ProfiledCandidate {
  int index = 0;  ///< position in the input vectors
  CandidateStatus status = CandidateStatus::NotRun;
  std::string error;                     ///< why it is not Ok
  double rel_l2_error = -1;              ///< worst output's error; -1 if never checked
  std::optional<Timing> timing;          ///< when Ok and timed
  std::optional<CompiledBinary> binary;  ///< when compiled
  size_t workspace_bytes = 0;
  /// Outputs the library packs (views of another output's allocation: docs/gpu-runtime.md,
  /// "Packed outputs"). With any, the check runs both placements — packed (then timed) and
  /// every output alone (the library's fallback) — and rel_l2_error is the worse.
  int packed_outputs = 0;
  std::optional<int64_t> smem_bytes;  ///< from the source's strata-meta line
  /// ≥ 0: an earlier candidate with the same CUDA source (and graph signature) whose outcome
  /// this one repeats instead of being checked and timed again (e.g. an emitter variant whose
  /// knobs do not apply to the graph).
  int same_as = -1;
};

/// The hook for `strata optimize`: compiles cuda_sources[i] (the emitted code of graphs[i]) in
/// parallel through the binary cache, checks each against the float64 reference and times the
/// ones that pass, in order; a candidate whose source repeats an earlier one's takes that
/// outcome (ProfiledCandidate::same_as). Per-candidate failures are statuses; the Error cases are: no GPU,
/// mismatched vector sizes, inputs that do not fit the signature, a reference that fails.
/// A fault that leaves the device unusable marks the remaining candidates NotRun.
Result<std::vector<ProfiledCandidate>> profile_candidates(
    const std::vector<KernelGraph>& graphs, const std::vector<std::string>& cuda_sources,
    const ProfileOptions& options);

}  // namespace strata
