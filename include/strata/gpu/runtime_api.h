// The C++ API: load a strata result and run it on device buffers (docs/gpu-runtime.md).
//
//   auto g = strata::CompiledGraph::load("result.json");        // or a μGraph JSON, or a .cu
//   if (!g.ok()) { report(g.error().message); }
//   strata::Status s = g->run(inputs, outputs, stream);          // device pointers, in order
//
// A CompiledGraph wraps one shared library compiled from generated CUDA (gpu_jit.h). The
// library's contract, which the CUDA emitter (cuda_emitter.h) implements:
//   extern "C" int strata_launch(const void* const* inputs, void* const* outputs,
//                                void* workspace, cudaStream_t stream);
//       enqueues the whole graph on `stream` and returns a cudaError_t (0: success); it does
//       any one-time setup (kernel attributes) on its first call;
//   extern "C" unsigned long long strata_workspace_bytes(void);  // scratch between kernels
// and, optionally, the signature:
//   int strata_num_inputs(void), strata_num_outputs(void);
//   const char* strata_input_name(int i), *strata_output_name(int i);
//   int strata_input_rank(int i), strata_output_rank(int i);
//   long long strata_input_dim(int i, int d), strata_output_dim(int i, int d);
//   int strata_input_dtype(int i), strata_output_dtype(int i);    // 0 f16, 1 bf16, 2 f32
// and, optionally, where the caller places each output (docs/codegen.md, "Packed outputs"):
//   int strata_output_base(int i);                 // the output whose pointer starts i's allocation
//   long long strata_output_offset(int i);         // elements from that pointer to i's first
//   long long strata_output_stride(int i, int d);  // elements between indices of dim d
//   long long strata_output_alloc(int i);          // elements to allocate at i's own pointer
// The source may carry a `// strata-meta: {json}` line whose "kernels" list gives each
// kernel's dynamic shared memory ("smem"). Inputs are dense row-major device tensors in the
// graph's order; outputs are too, or — when the caller places them as the library declares
// (place_outputs, output_buffers.h) — views of shared allocations read through their strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <driver_types.h>

#include "strata/gpu/gpu_jit.h"
#include "strata/ir/kernel_graph.h"
#include "strata/ir/shape.h"
#include "strata/util/status.h"

namespace strata {

/// Name, element type and shape of one graph input or output, and where the caller places it
/// (docs/gpu-runtime.md, "Packed outputs"). An input, and an output of a library without the
/// placement functions, is dense: its own allocation of numel elements, row-major.
struct TensorSignature {
  std::string name;
  DType dtype = DType::f16;
  Shape shape;
  /// The output whose pointer starts this tensor's allocation (its own position when it has
  /// its own allocation; -1: unknown, i.e. its own).
  int base = -1;
  /// Elements from the pointer of `base` to this tensor's first element.
  int64_t offset = 0;
  /// Elements between consecutive indices of each dim; empty: dense row-major.
  std::vector<int64_t> strides;
  /// Elements to allocate at this tensor's own pointer: numel when dense, the whole packed
  /// tensor for a base of others, 0 inside another output's allocation; -1: numel.
  int64_t alloc = -1;

  int64_t bytes() const { return shape.numel() * dtype_size(dtype); }
  /// Bytes to allocate at this tensor's own pointer (alloc, in bytes).
  int64_t alloc_bytes() const { return (alloc < 0 ? shape.numel() : alloc) * dtype_size(dtype); }
  /// Strides in elements (the row-major ones when `strides` is empty).
  std::vector<int64_t> element_strides() const;
  /// Whether this tensor is placed as a dense tensor at its own pointer.
  bool dense() const;
  bool operator==(const TensorSignature&) const = default;
};

/// Input and output signatures of a kernel graph, in order.
std::vector<TensorSignature> input_signature(const KernelGraph& g);
std::vector<TensorSignature> output_signature(const KernelGraph& g);

/// How a result is turned into a loaded library.
struct LoadOptions {
  JitOptions jit;
  /// Which graph of a result document to load; -1 = the GPU-profiled fastest when the document
  /// records one (with the emitter knobs it was timed with), else the best-ranked (0). See
  /// result_graphs.h.
  int candidate = -1;
  /// Emitter knobs (include/strata/codegen/emit_knobs.h) for graphs; empty = the document's (the
  /// profiled fastest's knobs) or the emitter's defaults.
  std::string knobs;
  /// Allocate the workspace at load (cudaMalloc on the current device). false: the caller
  /// passes one of workspace_bytes() to each run (e.g. from its own allocator).
  bool allocate_workspace = true;
};

/// The largest per-kernel shared memory ("smem") in a generated source's `// strata-meta:`
/// line; nullopt when the source has no such line.
std::optional<int64_t> source_smem_bytes(const std::string& cuda_source);

/// CUDA source for `g` from the CUDA emitter of this build (include/strata/codegen/cuda_emitter.h),
/// for the nvcc architecture `arch`, with the emitter knobs `knobs` ("" or "default": the
/// defaults). An Error when the build has no emitter, the knobs do not parse or the emitter
/// rejects the graph.
Result<std::string> emit_graph_source(const KernelGraph& g, const std::string& arch,
                                      const std::string& knobs = "");

/// A loaded, ready-to-run compiled graph. Copies share the library and the workspace; run()
/// may not be called concurrently on copies of one CompiledGraph (they share the workspace).
class CompiledGraph {
 public:
  /// Loads `path`: a .cu source, a μGraph JSON, a strata optimize result (the graph
  /// `options.candidate` of its ranking) or a .strata program (compiled as written). Graphs are
  /// emitted, compiled (through the binary cache) and loaded; the workspace is allocated on the
  /// current device.
  static Result<CompiledGraph> load(const std::string& path, const LoadOptions& options = {});
  /// Emits, compiles and loads `g`.
  static Result<CompiledGraph> from_graph(const KernelGraph& g, const LoadOptions& options = {});
  /// Compiles and loads a generated source. The signature comes from the library's
  /// signature functions when it exports them, else it is unknown (empty).
  static Result<CompiledGraph> from_source(const std::string& cuda_source,
                                           const LoadOptions& options = {});
  /// Loads an already compiled library. If `graph` is given, its signature is used and checked
  /// against the library's signature functions when it exports them.
  static Result<CompiledGraph> from_binary(const CompiledBinary& binary,
                                           const KernelGraph* graph = nullptr,
                                           bool allocate_workspace = true);

  /// Enqueues the graph on `stream`: inputs[i] / outputs[i] are device pointers to dense
  /// row-major tensors of the signature. Errors: missing pointers, or the status returned by
  /// strata_launch (a launch failure; asynchronous faults surface at the next synchronize).
  Status run(const void* const* inputs, void* const* outputs, cudaStream_t stream);
  /// As run, with the caller's workspace: device memory of at least workspace_bytes() bytes,
  /// 256-byte aligned, not used by anything else until the graph has finished on `stream`.
  Status run(const void* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream);

  /// Signatures (empty when unknown: a library without signature functions).
  const std::vector<TensorSignature>& inputs() const { return inputs_; }
  const std::vector<TensorSignature>& outputs() const { return outputs_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const CompiledBinary& binary() const { return binary_; }

 private:
  using LaunchFn = int (*)(const void* const*, void* const*, void*, cudaStream_t);

  CompiledBinary binary_;
  LaunchFn launch_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::shared_ptr<void> workspace_;  ///< device memory, freed with the last copy
  std::vector<TensorSignature> inputs_, outputs_;
};

}  // namespace strata
