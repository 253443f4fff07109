#include "strata/gpu/profiler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "cuda_check.h"
#include "device_buffer.h"
#include "strata/ir/dtype_codec.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/output_buffers.h"

namespace strata {
namespace {

using gpu::cuda_error;
using gpu::cuda_status;

/// Sub-buffers of a rotated set start at this alignment (enough for 16-byte vector and TMA
/// accesses).
constexpr int64_t kAlign = 256;

int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

Status check_host_values(const std::vector<TensorSignature>& sig,
                         const std::vector<std::vector<double>>& values, const char* what) {
  if (values.size() != sig.size())
    return make_error(std::string("expected ") + std::to_string(sig.size()) + " " + what +
                      ", got " + std::to_string(values.size()));
  for (size_t i = 0; i < sig.size(); ++i)
    if (static_cast<int64_t>(values[i].size()) != sig[i].shape.numel())
      return make_error(std::string(what) + " " + std::to_string(i) + " (" + sig[i].name +
                        ") has " + std::to_string(values[i].size()) + " values, its shape " +
                        sig[i].shape.str() + " needs " + std::to_string(sig[i].shape.numel()));
  return Status::success();
}

Status upload(void* dst, const TensorSignature& sig, const std::vector<double>& values,
              cudaStream_t stream) {
  std::vector<uint8_t> bytes = encode_elements(sig.dtype, values);
  STRATA_RETURN_IF_ERROR(cuda_status(
      "uploading " + sig.name,
      cudaMemcpyAsync(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream)));
  // The host bytes die with this frame: wait for the copy.
  return cuda_status("uploading " + sig.name, cudaStreamSynchronize(stream));
}

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct ExecDeleter {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using GraphPtr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using ExecPtr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, ExecDeleter>;
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

double percentile(const std::vector<double>& sorted, double q) {
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

/// Captures `passes` passes over the sets on `stream` into one CUDA graph, one launch per set
/// in each pass.
Result<ExecPtr> capture_passes(CompiledGraph& graph,
                               const std::vector<std::vector<const void*>>& in,
                               const std::vector<std::vector<void*>>& out, int passes,
                               cudaStream_t stream) {
  STRATA_RETURN_IF_ERROR(cuda_status("cudaStreamBeginCapture",
                                     cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed)));
  Status launched = Status::success();
  for (int p = 0; p < passes && launched.ok(); ++p)
    for (size_t s = 0; s < in.size() && launched.ok(); ++s)
      launched = graph.run(in[s].data(), out[s].data(), stream);
  cudaGraph_t raw = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream, &raw);
  GraphPtr captured(raw);
  if (!launched.ok())
    return make_error("while capturing a CUDA graph: " + launched.error().message);
  if (end != cudaSuccess) return cuda_error("cudaStreamEndCapture", end);
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaGraphInstantiate(&exec, captured.get(), 0);
  if (e != cudaSuccess) return cuda_error("cudaGraphInstantiate", e);
  return ExecPtr(exec);
}

}  // namespace

double relative_l2_error(const std::vector<double>& got, const std::vector<double>& want) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (got.size() != want.size()) return kInf;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return kInf;
    double d = got[i] - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  double err = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  return std::isnan(err) ? kInf : err;
}

Result<CheckResult> check_outputs(CompiledGraph& graph,
                                  const std::vector<std::vector<double>>& inputs,
                                  const std::vector<std::vector<double>>& expected,
                                  double tolerance, bool packed) {
  const auto& in_sig = graph.inputs();
  const auto& out_sig = graph.outputs();
  if (in_sig.empty() && out_sig.empty())
    return make_error("check_outputs: the graph's signature is unknown");
  STRATA_RETURN_IF_ERROR(check_host_values(in_sig, inputs, "inputs"));
  STRATA_RETURN_IF_ERROR(check_host_values(out_sig, expected, "expected outputs"));
  STRATA_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::create());
  std::vector<gpu::DeviceBuffer> in_buf;
  std::vector<const void*> in_ptr;
  std::vector<void*> out_ptr;
  for (size_t i = 0; i < in_sig.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::allocate(in_sig[i].bytes()));
    STRATA_RETURN_IF_ERROR(upload(b.get(), in_sig[i], inputs[i], stream.get()));
    in_ptr.push_back(b.get());
    in_buf.push_back(std::move(b));
  }
  // Every output in one allocation, placed as the library declares (packed) or each alone.
  STRATA_ASSIGN_OR_RETURN(OutputBuffers placed, place_outputs(out_sig, kAlign, packed));
  STRATA_ASSIGN_OR_RETURN(gpu::DeviceBuffer out_buf,
                          gpu::DeviceBuffer::allocate(static_cast<size_t>(placed.bytes)));
  // Poison: every byte 0xFF is a NaN in f16, bf16 and f32, so an element the graph does not
  // write fails the check (the whole allocation: a packed output's unwritten part as well).
  STRATA_RETURN_IF_ERROR(cuda_status(
      "poisoning the outputs", cudaMemsetAsync(out_buf.get(), 0xFF, placed.bytes, stream.get())));
  for (size_t i = 0; i < out_sig.size(); ++i)
    out_ptr.push_back(out_buf.bytes_ptr() + placed.pointer[i]);
  STRATA_RETURN_IF_ERROR(graph.run(in_ptr.data(), out_ptr.data(), stream.get()));
  STRATA_RETURN_IF_ERROR(cuda_status("running the graph", cudaStreamSynchronize(stream.get())));
  std::vector<uint8_t> host(static_cast<size_t>(placed.bytes));
  STRATA_RETURN_IF_ERROR(cuda_status(
      "downloading the outputs",
      cudaMemcpy(host.data(), out_buf.get(), host.size(), cudaMemcpyDeviceToHost)));

  CheckResult result;
  result.passed = true;
  for (size_t i = 0; i < out_sig.size(); ++i) {
    // Read through the output's strides (a view of a packed tensor), row-major.
    std::vector<uint8_t> bytes = gather_output(out_sig[i], host.data() + placed.pointer[i], packed);
    std::vector<double> got = decode_elements(out_sig[i].dtype, bytes.data(),
                                              static_cast<size_t>(out_sig[i].shape.numel()));
    double err = relative_l2_error(got, expected[i]);
    result.rel_l2_error.push_back(err);
    result.max_rel_l2_error = std::max(result.max_rel_l2_error, err);
    if (!(err <= tolerance) && result.passed) {
      result.passed = false;
      result.detail = "output " + std::to_string(i) + " (" + out_sig[i].name +
                      "): relative L2 error " + std::to_string(err) + " > " +
                      std::to_string(tolerance) +
                      (std::isinf(err) ? " (NaN, infinity or unwritten elements)" : "");
    }
  }
  return result;
}

int passes_for(int sets, double launch_us, const TimingOptions& options) {
  sets = std::max(sets, 1);
  const int by_count = std::max(1, (options.min_launches + sets - 1) / sets);
  if (!(launch_us > 0)) return by_count;
  const double by_time = std::ceil(options.min_replay_us / (launch_us * sets));
  return std::max(1, std::min(by_count, static_cast<int>(std::min(by_time, 1e9))));
}

Result<Timing> time_graph(CompiledGraph& graph, const std::vector<std::vector<double>>& inputs,
                          const TimingOptions& options) {
  const auto& in_sig = graph.inputs();
  const auto& out_sig = graph.outputs();
  if (in_sig.empty() && out_sig.empty())
    return make_error("time_graph: the graph's signature is unknown");
  if (!inputs.empty()) STRATA_RETURN_IF_ERROR(check_host_values(in_sig, inputs, "inputs"));
  if (options.runs < 1) return make_error("time_graph: runs must be ≥ 1");
  STRATA_ASSIGN_OR_RETURN(DeviceInfo dev, query_device());

  // Layout of one set: inputs, each aligned, then the outputs placed as the library declares
  // (packed: the fast path) or each alone (options.packed_outputs false).
  std::vector<int64_t> offset;
  int64_t input_bytes = 0, set_bytes = 0, moved = 0;
  for (const TensorSignature& s : in_sig) {
    offset.push_back(set_bytes);
    set_bytes += align_up(s.bytes());
    moved += s.bytes();
  }
  input_bytes = set_bytes;
  STRATA_ASSIGN_OR_RETURN(OutputBuffers placed,
                          place_outputs(out_sig, kAlign, options.packed_outputs));
  for (size_t o = 0; o < out_sig.size(); ++o) {
    offset.push_back(input_bytes + placed.pointer[o]);
    moved += out_sig[o].bytes();
  }
  if (!out_sig.empty()) set_bytes += placed.bytes;
  set_bytes = std::max<int64_t>(set_bytes, kAlign);
  Timing t;
  t.l2_bytes = dev.traits.l2_bytes;
  t.bytes_per_set = moved;
  int64_t wanted =
      static_cast<int64_t>(options.l2_multiple * dev.traits.l2_bytes) / std::max<int64_t>(moved, 1) + 1;
  size_t free_bytes = 0, total_bytes = 0;
  STRATA_RETURN_IF_ERROR(cuda_status("cudaMemGetInfo", cudaMemGetInfo(&free_bytes, &total_bytes)));
  int64_t fit = static_cast<int64_t>(options.max_memory_fraction * free_bytes) / set_bytes;
  if (fit < 1)
    return make_error("time_graph: one input/output set (" + std::to_string(set_bytes) +
                      " bytes) does not fit in device memory");
  t.sets =
      static_cast<int>(std::max<int64_t>(1, std::min({wanted, fit, int64_t{options.max_sets}})));

  STRATA_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::create());
  STRATA_ASSIGN_OR_RETURN(gpu::DeviceBuffer pool,
                          gpu::DeviceBuffer::allocate(static_cast<size_t>(set_bytes) * t.sets));
  if (inputs.empty()) {
    // 0x2C bytes: small positive values in every dtype (f16 0x2C2C ≈ 0.065).
    STRATA_RETURN_IF_ERROR(cuda_status(
        "filling inputs", cudaMemsetAsync(pool.get(), 0x2C, input_bytes, stream.get())));
  } else {
    for (size_t i = 0; i < in_sig.size(); ++i)
      STRATA_RETURN_IF_ERROR(
          upload(pool.bytes_ptr() + offset[i], in_sig[i], inputs[i], stream.get()));
  }
  std::vector<std::vector<const void*>> in_ptr(t.sets);
  std::vector<std::vector<void*>> out_ptr(t.sets);
  for (int s = 0; s < t.sets; ++s) {
    char* base = pool.bytes_ptr() + static_cast<int64_t>(s) * set_bytes;
    if (s > 0 && input_bytes > 0)
      STRATA_RETURN_IF_ERROR(cuda_status(
          "replicating inputs",
          cudaMemcpyAsync(base, pool.get(), input_bytes, cudaMemcpyDeviceToDevice, stream.get())));
    for (size_t i = 0; i < in_sig.size(); ++i) in_ptr[s].push_back(base + offset[i]);
    for (size_t o = 0; o < out_sig.size(); ++o)
      out_ptr[s].push_back(base + offset[in_sig.size() + o]);
  }
  // One eager launch first: one-time setup in the library happens outside the capture, and
  // failures surface with a clear cause.
  STRATA_RETURN_IF_ERROR(graph.run(in_ptr[0].data(), out_ptr[0].data(), stream.get()));
  STRATA_RETURN_IF_ERROR(cuda_status("first launch", cudaStreamSynchronize(stream.get())));

  // A second eager pass over set 0, timed, estimates one launch: long launches need fewer per
  // replay (a replay of ≥ min_replay_us already makes its own cost negligible).
  double launch_us = 0;
  {
    cudaEvent_t b = nullptr, e = nullptr;
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventCreate", cudaEventCreate(&b)));
    EventPtr begin(b);
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventCreate", cudaEventCreate(&e)));
    EventPtr end(e);
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventRecord", cudaEventRecord(b, stream.get())));
    STRATA_RETURN_IF_ERROR(graph.run(in_ptr[0].data(), out_ptr[0].data(), stream.get()));
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventRecord", cudaEventRecord(e, stream.get())));
    STRATA_RETURN_IF_ERROR(cuda_status("estimate launch", cudaStreamSynchronize(stream.get())));
    float ms = 0;
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventElapsedTime", cudaEventElapsedTime(&ms, b, e)));
    launch_us = 1000.0 * ms;
  }
  t.passes = passes_for(t.sets, launch_us, options);
  STRATA_ASSIGN_OR_RETURN(ExecPtr exec,
                          capture_passes(graph, in_ptr, out_ptr, t.passes, stream.get()));
  for (int w = 0; w < options.warmup_runs; ++w)
    STRATA_RETURN_IF_ERROR(
        cuda_status("cudaGraphLaunch", cudaGraphLaunch(exec.get(), stream.get())));
  std::vector<EventPtr> events;
  for (int r = 0; r <= options.runs; ++r) {
    cudaEvent_t e = nullptr;
    STRATA_RETURN_IF_ERROR(cuda_status("cudaEventCreate", cudaEventCreate(&e)));
    events.emplace_back(e);
  }
  STRATA_RETURN_IF_ERROR(
      cuda_status("cudaEventRecord", cudaEventRecord(events[0].get(), stream.get())));
  for (int r = 0; r < options.runs; ++r) {
    STRATA_RETURN_IF_ERROR(
        cuda_status("cudaGraphLaunch", cudaGraphLaunch(exec.get(), stream.get())));
    STRATA_RETURN_IF_ERROR(
        cuda_status("cudaEventRecord", cudaEventRecord(events[r + 1].get(), stream.get())));
  }
  STRATA_RETURN_IF_ERROR(cuda_status("timed replays", cudaStreamSynchronize(stream.get())));

  std::vector<double> samples;
  for (int r = 0; r < options.runs; ++r) {
    float ms = 0;
    STRATA_RETURN_IF_ERROR(cuda_status(
        "cudaEventElapsedTime", cudaEventElapsedTime(&ms, events[r].get(), events[r + 1].get())));
    samples.push_back(1000.0 * ms / (static_cast<double>(t.sets) * t.passes));
  }
  std::sort(samples.begin(), samples.end());
  t.runs = options.runs;
  t.median_us = percentile(samples, 0.5);
  t.p10_us = percentile(samples, 0.1);
  t.p90_us = percentile(samples, 0.9);
  t.min_us = samples.front();
  double sum = 0;
  for (double v : samples) sum += v;
  t.mean_us = sum / samples.size();
  return t;
}

}  // namespace strata
