#include "strata/gpu/candidate_profiler.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "strata/ir/dtype_codec.h"
#include "strata/gpu/gpu_device.h"
#include "strata/interp/interpreter.h"
#include "strata/gpu/runtime_api.h"

namespace strata {
namespace {

using HostValues = std::vector<std::vector<double>>;

/// Inputs for every candidate: the given ones, or uniform values in
/// [-input_scale, input_scale), rounded to each input's dtype so that the reference sees
/// exactly what the device sees.
Result<HostValues> make_inputs(const KernelGraph& g, const ProfileOptions& o) {
  std::vector<TensorSignature> sig = input_signature(g);
  HostValues values;
  if (!o.inputs.empty()) {
    if (o.inputs.size() != sig.size())
      return make_error("profile: " + std::to_string(o.inputs.size()) +
                        " inputs given, the graph has " + std::to_string(sig.size()));
    values = o.inputs;
  } else {
    for (HostTensor& t : random_inputs(g, o.seed)) {
      for (double& v : t.data) v *= o.input_scale;
      values.push_back(std::move(t.data));
    }
  }
  for (size_t i = 0; i < sig.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) != sig[i].shape.numel())
      return make_error("profile: input " + std::to_string(i) + " (" + sig[i].name + ") has " +
                        std::to_string(values[i].size()) + " values, its shape " +
                        sig[i].shape.str() + " needs " + std::to_string(sig[i].shape.numel()));
    values[i] = round_to_dtype(sig[i].dtype, values[i]);
  }
  return values;
}

Result<HostValues> reference_outputs(const KernelGraph& g, const HostValues& inputs, int threads) {
  std::vector<TensorSignature> sig = input_signature(g);
  std::vector<HostTensor> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    HostTensor t;
    t.shape = sig[i].shape;
    t.data = inputs[i];
    tensors.push_back(std::move(t));
  }
  ExecOptions exec;
  exec.threads = threads;
  auto out = run_reference(g, tensors, exec);
  if (!out.ok()) return make_error("reference interpreter: " + out.error().message);
  HostValues values;
  for (HostTensor& t : *out) values.push_back(std::move(t.data));
  return values;
}

/// True while the device still accepts work (a fault such as an illegal address leaves the
/// context unusable for the rest of the process).
bool device_healthy(std::string* why) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) {
    void* probe = nullptr;
    e = cudaMalloc(&probe, 256);
    if (e == cudaSuccess) cudaFree(probe);
  }
  if (e == cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky launch error of the previous candidate
    return true;
  }
  *why = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
  return false;
}

/// Same number, dtypes and shapes (names may differ between equivalent graphs).
bool same_layout(const std::vector<TensorSignature>& a, const std::vector<TensorSignature>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) return false;
  return true;
}

CandidateStatus compile_failure_status(const std::string& message) {
  return message.find("too much shared data") != std::string::npos ? CandidateStatus::SmemExceeded
                                                                   : CandidateStatus::CompileError;
}

/// Checks and times candidate `i`; fills `pc` with its outcome.
void profile_one(const KernelGraph& graph, const std::string& source, const CompiledBinary& binary,
                 const DeviceInfo& dev, const HostValues& inputs, const HostValues* shared_expected,
                 const ProfileOptions& o, ProfiledCandidate& pc) {
  auto fail = [&](CandidateStatus s, std::string why) {
    pc.status = s;
    pc.error = std::move(why);
  };
  pc.smem_bytes = source_smem_bytes(source);
  if (pc.smem_bytes && *pc.smem_bytes > dev.traits.smem_per_block_bytes)
    return fail(CandidateStatus::SmemExceeded,
                "needs " + std::to_string(*pc.smem_bytes) + " bytes of shared memory per block, " +
                    dev.name + " allows " + std::to_string(dev.traits.smem_per_block_bytes));
  auto cg = CompiledGraph::from_binary(binary, &graph);
  if (!cg.ok()) return fail(CandidateStatus::LaunchFailure, "cannot load: " + cg.error().message);
  pc.workspace_bytes = cg->workspace_bytes();
  for (const TensorSignature& s : cg->outputs()) pc.packed_outputs += !s.dense();
  HostValues own_expected;
  if (!shared_expected) {
    auto ref = reference_outputs(graph, inputs, o.threads);
    if (!ref.ok()) return fail(CandidateStatus::WrongAnswer, ref.error().message);
    own_expected = std::move(ref).value();
  }
  const HostValues& expected = shared_expected ? *shared_expected : own_expected;
  auto check = check_outputs(*cg, inputs, expected, o.tolerance);
  if (!check.ok()) return fail(CandidateStatus::LaunchFailure, check.error().message);
  pc.rel_l2_error = check->max_rel_l2_error;
  if (!check->passed) return fail(CandidateStatus::WrongAnswer, check->detail);
  if (pc.packed_outputs > 0) {
    // The fallback a caller that allocates every output alone gets (the library's copies).
    auto alone = check_outputs(*cg, inputs, expected, o.tolerance, false);
    if (!alone.ok())
      return fail(CandidateStatus::LaunchFailure, "outputs alone: " + alone.error().message);
    pc.rel_l2_error = std::max(pc.rel_l2_error, alone->max_rel_l2_error);
    if (!alone->passed)
      return fail(CandidateStatus::WrongAnswer, "outputs alone: " + alone->detail);
  }
  if (!o.check_only) {
    auto timing = time_graph(*cg, inputs, o.timing);
    if (!timing.ok())
      return fail(CandidateStatus::LaunchFailure, "timing: " + timing.error().message);
    pc.timing = *timing;
  }
  pc.status = CandidateStatus::Ok;
}

}  // namespace

std::string_view candidate_status_name(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::Ok:
      return "ok";
    case CandidateStatus::CompileError:
      return "compile_error";
    case CandidateStatus::SmemExceeded:
      return "smem_exceeded";
    case CandidateStatus::LaunchFailure:
      return "launch_failure";
    case CandidateStatus::WrongAnswer:
      return "wrong_answer";
    case CandidateStatus::NotRun:
      return "not_run";
  }
  return "?";
}

Result<std::vector<ProfiledCandidate>> profile_candidates(
    const std::vector<KernelGraph>& graphs, const std::vector<std::string>& cuda_sources,
    const ProfileOptions& options) {
  if (graphs.size() != cuda_sources.size())
    return make_error("profile_candidates: " + std::to_string(graphs.size()) + " graphs but " +
                      std::to_string(cuda_sources.size()) + " sources");
  if (graphs.empty()) return std::vector<ProfiledCandidate>{};
  if (gpu_count() == 0)
    return make_error("profile_candidates: no CUDA device is available (no driver or no GPU)");
  STRATA_ASSIGN_OR_RETURN(DeviceInfo dev, query_device());
  JitOptions jit = options.jit;
  if (jit.arch.empty()) jit.arch = dev.arch();

  // With a reference program, all candidates implement it: inputs and expected outputs are
  // computed once. Without one, each candidate is checked against its own graph.
  std::optional<HostValues> shared_inputs, shared_expected;
  if (options.reference) {
    STRATA_ASSIGN_OR_RETURN(shared_inputs, make_inputs(*options.reference, options));
    STRATA_ASSIGN_OR_RETURN(shared_expected,
                            reference_outputs(*options.reference, *shared_inputs, options.threads));
  }

  std::vector<Result<CompiledBinary>> binaries = compile_cuda_many(cuda_sources, jit);
  std::vector<ProfiledCandidate> out(graphs.size());
  std::unordered_map<std::string_view, size_t> first_with_source;
  std::string lost;  // set once the device is unusable
  for (size_t i = 0; i < graphs.size(); ++i) {
    ProfiledCandidate& pc = out[i];
    pc.index = static_cast<int>(i);
    auto [first, fresh] = first_with_source.emplace(cuda_sources[i], i);
    if (!fresh && same_layout(input_signature(graphs[i]), input_signature(graphs[first->second]))) {
      pc = out[first->second];  // the same code on the same inputs: the same outcome
      pc.index = static_cast<int>(i);
      pc.same_as = static_cast<int>(first->second);
      continue;
    }
    if (!binaries[i].ok()) {
      pc.status = compile_failure_status(binaries[i].error().message);
      pc.error = binaries[i].error().message;
      continue;
    }
    pc.binary = *binaries[i];
    if (!lost.empty()) {
      pc.error = lost;
      continue;  // NotRun
    }
    HostValues own_inputs;
    if (options.reference) {
      if (!same_layout(input_signature(graphs[i]), input_signature(*options.reference)) ||
          !same_layout(output_signature(graphs[i]), output_signature(*options.reference))) {
        pc.status = CandidateStatus::WrongAnswer;
        pc.error = "its inputs or outputs differ from the reference program's";
        continue;
      }
    } else {
      auto made = make_inputs(graphs[i], options);
      if (!made.ok()) return made.error();
      own_inputs = std::move(made).value();
    }
    profile_one(graphs[i], cuda_sources[i], *binaries[i], dev,
                shared_inputs ? *shared_inputs : own_inputs,
                shared_expected ? &*shared_expected : nullptr, options, pc);
    std::string why;
    if (pc.status != CandidateStatus::Ok && !device_healthy(&why))
      lost =
          "not run: the device became unusable after candidate " + std::to_string(i) + ": " + why;
  }
  return out;
}

}  // namespace strata
