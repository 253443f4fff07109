// The C++ API: load a strata result and run it on device buffers (docs/gpu-runtime.md).
//
//   auto g = strata::CompiledGraph::load("result.json");        // or a μGraph JSON, or a .cu
//   if (!g.ok()) { report(g.error().message); }
//   strata::Status s = g->run(inputs, outputs, stream);          // device pointers, in order
//
// A CompiledGraph wraps one shared library compiled from generated CUDA (gpu_jit.h). The
// library's contract, which the CUDA emitter implements:
//   extern "C" int    strata_launch(const void* const* inputs, void* const* outputs,
//                                   void* workspace, cudaStream_t stream);
//                     // enqueues the whole graph on `stream`; returns a cudaError_t (0: ok)
//   extern "C" size_t strata_workspace_bytes(void);   // scratch needed between kernels
// and optionally
//   extern "C" const char* strata_signature(void);    // {"inputs": [{"name","dtype","shape"}],
//                                                     //  "outputs": [...]} as JSON text
//   extern "C" size_t strata_smem_bytes(void);        // largest shared memory of one block
// Inputs and outputs are dense row-major device tensors in the graph's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <driver_types.h>

#include "strata/gpu_jit.h"
#include "strata/kernel_graph.h"
#include "strata/shape.h"
#include "strata/status.h"

namespace strata {

/// Name, element type and shape of one graph input or output.
struct TensorSignature {
  std::string name;
  DType dtype = DType::f16;
  Shape shape;
  int64_t bytes() const { return shape.numel() * dtype_size(dtype); }
  bool operator==(const TensorSignature&) const = default;
};

/// Input and output signatures of a kernel graph, in order.
std::vector<TensorSignature> input_signature(const KernelGraph& g);
std::vector<TensorSignature> output_signature(const KernelGraph& g);

/// How a result is turned into a loaded library.
struct LoadOptions {
  JitOptions jit;
  /// Which graph of a result document to load (0 = the best; see result_graphs.h).
  int candidate = 0;
};

/// CUDA source for `g` from the CUDA emitter of this build (include/strata/cuda_emitter.h),
/// for the nvcc architecture `arch`. An Error when the build has no emitter or the emitter
/// rejects the graph.
Result<std::string> emit_graph_source(const KernelGraph& g, const std::string& arch);

/// A loaded, ready-to-run compiled graph. Copies share the library and the workspace; run()
/// may not be called concurrently on copies of one CompiledGraph (they share the workspace).
class CompiledGraph {
 public:
  /// Loads `path`: a .cu source, a μGraph JSON, or a strata optimize result (the graph
  /// `options.candidate` of its ranking). Graphs are emitted, compiled (through the binary
  /// cache) and loaded; the workspace is allocated on the current device.
  static Result<CompiledGraph> load(const std::string& path, const LoadOptions& options = {});
  /// Emits, compiles and loads `g`.
  static Result<CompiledGraph> from_graph(const KernelGraph& g, const LoadOptions& options = {});
  /// Compiles and loads a generated source. The signature comes from the library's
  /// strata_signature() when it exports one, else it is unknown (empty).
  static Result<CompiledGraph> from_source(const std::string& cuda_source,
                                           const LoadOptions& options = {});
  /// Loads an already compiled library. If `graph` is given, its signature is used and checked
  /// against the library's strata_signature() when that exists.
  static Result<CompiledGraph> from_binary(const CompiledBinary& binary,
                                           const KernelGraph* graph = nullptr);

  /// Enqueues the graph on `stream`: inputs[i] / outputs[i] are device pointers to dense
  /// row-major tensors of the signature. Errors: missing pointers, or the status returned by
  /// strata_launch (a launch failure; asynchronous faults surface at the next synchronize).
  Status run(const void* const* inputs, void* const* outputs, cudaStream_t stream);

  /// Signatures (empty when unknown: a bare .cu without strata_signature()).
  const std::vector<TensorSignature>& inputs() const { return inputs_; }
  const std::vector<TensorSignature>& outputs() const { return outputs_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  /// The library's largest per-block shared memory, if it reports it (strata_smem_bytes).
  std::optional<int64_t> smem_bytes() const { return smem_bytes_; }
  const CompiledBinary& binary() const { return binary_; }

 private:
  using LaunchFn = int (*)(const void* const*, void* const*, void*, cudaStream_t);

  CompiledBinary binary_;
  LaunchFn launch_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::optional<int64_t> smem_bytes_;
  std::shared_ptr<void> workspace_;  ///< device memory, freed with the last copy
  std::vector<TensorSignature> inputs_, outputs_;
};

}  // namespace strata
