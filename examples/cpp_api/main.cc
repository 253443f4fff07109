// Example: run a strata result from C++.
//
//   cpp_api_example RESULT [CANDIDATE]
//
// RESULT is what `strata optimize -o RESULT.json` wrote, a μGraph JSON, or a generated .cu.
// The program loads it (emitting and compiling through the binary cache as needed), allocates
// device buffers for its inputs and its outputs (placed as the library declares), fills the
// inputs, runs the graph on a stream and prints a summary of each output. Exit codes (as the strata tool's): 0 ok, 1 no GPU (an
// environment condition), 2 bad input, 3 a CUDA failure.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "strata/ir/dtype_codec.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/output_buffers.h"
#include "strata/gpu/runtime_api.h"

namespace {

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "cpp_api_example: %s\n", message.c_str());
  return code;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cpp_api_example: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) return fail(2, "usage: cpp_api_example RESULT [CANDIDATE]");
  if (strata::gpu_count() == 0) return fail(1, "no CUDA device is available");

  strata::LoadOptions options;
  if (argc == 3) {
    const std::string c = argv[2];
    auto [end, ec] = std::from_chars(c.data(), c.data() + c.size(), options.candidate);
    if (ec != std::errc() || end != c.data() + c.size() || options.candidate < 0)
      return fail(2, "CANDIDATE: expected a non-negative index, got `" + c + "`");
  }
  auto graph = strata::CompiledGraph::load(argv[1], options);
  if (!graph.ok()) return fail(2, graph.error().message);
  if (graph->inputs().empty() && graph->outputs().empty())
    return fail(2, "the library does not report its inputs and outputs (no strata_signature)");
  std::printf("loaded %s (%s, workspace %zu bytes)\n", argv[1],
              graph->binary().cache_hit ? "binary cache hit" : "compiled",
              graph->workspace_bytes());

  // Device buffers: inputs filled with a deterministic pattern in [-0.5, 0.5).
  std::vector<void*> inputs, outputs;
  for (const strata::TensorSignature& s : graph->inputs()) {
    std::vector<double> host(s.shape.numel());
    for (size_t i = 0; i < host.size(); ++i) host[i] = std::fmod(i * 0.618034, 1.0) - 0.5;
    std::vector<uint8_t> bytes = strata::encode_elements(s.dtype, host);
    void* d = nullptr;
    if (!ok(cudaMalloc(&d, bytes.size()), "cudaMalloc") ||
        !ok(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy"))
      return 3;
    inputs.push_back(d);
  }
  // Outputs: one allocation, placed as the library declares (outputs that are slices of one
  // tensor, such as Q, K and V of a fused projection, are views of it: the fast path).
  auto placed = strata::place_outputs(graph->outputs(), 256);
  if (!placed.ok()) return fail(2, placed.error().message);
  void* out_buf = nullptr;
  if (!ok(cudaMalloc(&out_buf, placed->bytes), "cudaMalloc")) return 3;
  for (int64_t at : placed->pointer) outputs.push_back(static_cast<char*>(out_buf) + at);

  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreate(&stream), "cudaStreamCreate")) return 3;
  strata::Status st = graph->run(inputs.data(), outputs.data(), stream);
  if (!st.ok()) return fail(3, st.error().message);
  if (!ok(cudaStreamSynchronize(stream), "running the graph")) return 3;

  std::vector<uint8_t> host(placed->bytes);
  if (!ok(cudaMemcpy(host.data(), out_buf, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return 3;
  for (size_t o = 0; o < graph->outputs().size(); ++o) {
    const strata::TensorSignature& s = graph->outputs()[o];
    // Row-major values, read through the output's strides.
    std::vector<uint8_t> bytes = strata::gather_output(s, host.data() + placed->pointer[o], true);
    std::vector<double> values = strata::decode_elements(s.dtype, bytes.data(), s.shape.numel());
    double sum = 0, sum_abs = 0;
    for (double v : values) {
      sum += v;
      sum_abs += std::fabs(v);
    }
    std::printf("output %zu %s %s: sum %.6g, mean |x| %.6g, first %.6g\n", o, s.name.c_str(),
                s.shape.str().c_str(), sum, sum_abs / values.size(), values[0]);
  }
  for (void* p : inputs) cudaFree(p);
  cudaFree(out_buf);
  cudaStreamDestroy(stream);
  return 0;
}
