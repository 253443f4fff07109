#include "strata/runtime_api.h"

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "strata/gpu_device.h"
#include "strata/graph_io.h"
#include "strata/result_graphs.h"

// The CUDA emitter lives in strata_core (src/codegen) when this build has it.
#if __has_include("strata/cuda_emitter.h")
#include "strata/cuda_emitter.h"
#define STRATA_HAVE_EMITTER 1
#endif

namespace strata {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<TensorSignature> signature_of(const KernelGraph& g, const std::vector<int>& ids) {
  std::vector<TensorSignature> sig;
  for (int t : ids) sig.push_back({g.tensor_name(t), g.tensor(t).dtype, g.tensor(t).shape});
  return sig;
}

Result<std::vector<TensorSignature>> parse_signature_list(const Json& doc, const char* key,
                                                          const std::string& where) {
  std::vector<TensorSignature> out;
  if (!doc.contains(key) || !doc[key].is_array())
    return make_error(where + ": expected an array \"" + key + "\"");
  for (size_t i = 0; i < doc[key].size(); ++i) {
    const Json& e = doc[key][i];
    std::string at = where + ": " + key + "[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("shape") || !e["shape"].is_array())
      return make_error(at + ": expected {\"name\", \"dtype\", \"shape\"}");
    TensorSignature s;
    s.name = e.value("name", "");
    auto dt = parse_dtype(e.value("dtype", "f16"));
    if (!dt) return make_error(at + ": unknown dtype " + e.value("dtype", ""));
    s.dtype = *dt;
    std::vector<int64_t> dims;
    for (const Json& d : e["shape"]) {
      if (!d.is_number_integer()) return make_error(at + ": shape extents must be integers");
      dims.push_back(d.get<int64_t>());
    }
    auto shape = Shape::make(dims);
    if (!shape.ok()) return make_error(at + ": " + shape.error().message);
    s.shape = *shape;
    out.push_back(std::move(s));
  }
  return out;
}

/// Signature a library reports through strata_signature(), if it exports one.
Result<std::optional<std::pair<std::vector<TensorSignature>, std::vector<TensorSignature>>>>
library_signature(const SharedLibrary& lib) {
  using SigFn = const char* (*)();
  auto fn = reinterpret_cast<SigFn>(lib.find("strata_signature"));
  if (!fn)
    return std::optional<std::pair<std::vector<TensorSignature>, std::vector<TensorSignature>>>{};
  const char* text = fn();
  std::string where = lib.path() + ": strata_signature()";
  if (!text) return make_error(where + " returned null");
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, where));
  STRATA_ASSIGN_OR_RETURN(auto ins, parse_signature_list(doc, "inputs", where));
  STRATA_ASSIGN_OR_RETURN(auto outs, parse_signature_list(doc, "outputs", where));
  return std::optional(std::make_pair(std::move(ins), std::move(outs)));
}

Status check_signature_match(const std::vector<TensorSignature>& graph,
                             const std::vector<TensorSignature>& lib, const char* what,
                             const std::string& where) {
  if (graph.size() != lib.size())
    return make_error(where + ": the library has " + std::to_string(lib.size()) + " " + what +
                      ", the graph " + std::to_string(graph.size()));
  for (size_t i = 0; i < graph.size(); ++i)
    if (graph[i].shape != lib[i].shape || graph[i].dtype != lib[i].dtype)
      return make_error(where + ": " + what + " " + std::to_string(i) + " is " +
                        std::string(dtype_name(lib[i].dtype)) + lib[i].shape.str() +
                        " in the library but " + std::string(dtype_name(graph[i].dtype)) +
                        graph[i].shape.str() + " in the graph");
  return Status::success();
}

std::string resolved_arch(const JitOptions& jit) {
  if (!jit.arch.empty()) return jit.arch;
  auto dev = query_device();
  return dev.ok() ? dev->arch() : "";
}

}  // namespace

std::vector<TensorSignature> input_signature(const KernelGraph& g) {
  return signature_of(g, g.inputs());
}
std::vector<TensorSignature> output_signature(const KernelGraph& g) {
  return signature_of(g, g.outputs());
}

Result<std::string> emit_graph_source(const KernelGraph& g, const std::string& arch) {
#ifdef STRATA_HAVE_EMITTER
  EmitOptions options;
  // Set the target when the emitter's options have one (generic lambda: checked on use).
  auto set_arch = [&](auto& o) {
    if constexpr (requires { o.arch = arch; }) o.arch = arch;
  };
  if (!arch.empty()) set_arch(options);
  return emit_cuda(g, options);
#else
  (void)g;
  (void)arch;
  return make_error(
      "this build of strata has no CUDA emitter (include/strata/cuda_emitter.h); "
      "pass a generated .cu source instead");
#endif
}

Result<CompiledGraph> CompiledGraph::load(const std::string& path, const LoadOptions& options) {
  if (ends_with(path, ".cu")) {
    STRATA_ASSIGN_OR_RETURN(std::string source, read_text_file(path));
    auto g = from_source(source, options);
    if (!g.ok()) return make_error(path + ": " + g.error().message);
    return g;
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<ResultGraph> graphs, load_result_graphs(path));
  if (options.candidate < 0 || options.candidate >= static_cast<int>(graphs.size()))
    return make_error(path + ": candidate " + std::to_string(options.candidate) +
                      " does not exist (the document holds " + std::to_string(graphs.size()) + ")");
  const ResultGraph& chosen = graphs[options.candidate];
  auto g = from_graph(chosen.graph, options);
  if (!g.ok()) return make_error(chosen.where + ": " + g.error().message);
  return g;
}

Result<CompiledGraph> CompiledGraph::from_graph(const KernelGraph& g, const LoadOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string source, emit_graph_source(g, resolved_arch(options.jit)));
  STRATA_ASSIGN_OR_RETURN(CompiledBinary binary, compile_cuda(source, options.jit));
  return from_binary(binary, &g);
}

Result<CompiledGraph> CompiledGraph::from_source(const std::string& cuda_source,
                                                 const LoadOptions& options) {
  STRATA_ASSIGN_OR_RETURN(CompiledBinary binary, compile_cuda(cuda_source, options.jit));
  return from_binary(binary, nullptr);
}

Result<CompiledGraph> CompiledGraph::from_binary(const CompiledBinary& binary,
                                                 const KernelGraph* graph) {
  STRATA_ASSIGN_OR_RETURN(SharedLibrary lib, SharedLibrary::open(binary.path));
  CompiledGraph cg;
  cg.binary_ = binary;
  cg.launch_ = reinterpret_cast<LaunchFn>(lib.find("strata_launch"));
  auto workspace_fn = reinterpret_cast<size_t (*)()>(lib.find("strata_workspace_bytes"));
  if (!cg.launch_ || !workspace_fn)
    return make_error(binary.path +
                      ": not a strata library (strata_launch or strata_workspace_bytes missing)");
  cg.workspace_bytes_ = workspace_fn();
  if (auto smem_fn = reinterpret_cast<size_t (*)()>(lib.find("strata_smem_bytes")))
    cg.smem_bytes_ = static_cast<int64_t>(smem_fn());

  STRATA_ASSIGN_OR_RETURN(auto lib_sig, library_signature(lib));
  if (graph) {
    cg.inputs_ = input_signature(*graph);
    cg.outputs_ = output_signature(*graph);
    if (lib_sig) {
      STRATA_RETURN_IF_ERROR(
          check_signature_match(cg.inputs_, lib_sig->first, "inputs", lib.path()));
      STRATA_RETURN_IF_ERROR(
          check_signature_match(cg.outputs_, lib_sig->second, "outputs", lib.path()));
    }
  } else if (lib_sig) {
    cg.inputs_ = lib_sig->first;
    cg.outputs_ = lib_sig->second;
  }

  if (cg.workspace_bytes_ > 0) {
    void* ptr = nullptr;
    cudaError_t e = cudaMalloc(&ptr, cg.workspace_bytes_);
    if (e != cudaSuccess)
      return gpu::cuda_error(
          "allocating a workspace of " + std::to_string(cg.workspace_bytes_) + " bytes", e);
    cg.workspace_ = std::shared_ptr<void>(ptr, [](void* p) { cudaFree(p); });
  }
  return cg;
}

Status CompiledGraph::run(const void* const* inputs, void* const* outputs, cudaStream_t stream) {
  if (!launch_) return make_error("CompiledGraph::run on an empty graph");
  if ((!inputs && !inputs_.empty()) || (!outputs && !outputs_.empty()))
    return make_error("CompiledGraph::run: null input or output pointer array");
  for (size_t i = 0; inputs && i < inputs_.size(); ++i)
    if (!inputs[i])
      return make_error("CompiledGraph::run: input " + std::to_string(i) + " (" + inputs_[i].name +
                        ") is a null pointer");
  for (size_t i = 0; outputs && i < outputs_.size(); ++i)
    if (!outputs[i])
      return make_error("CompiledGraph::run: output " + std::to_string(i) + " (" +
                        outputs_[i].name + ") is a null pointer");
  int rc = launch_(inputs, outputs, workspace_.get(), stream);
  if (rc != 0)
    return gpu::cuda_error(binary_.path + ": strata_launch failed", static_cast<cudaError_t>(rc));
  return Status::success();
}

}  // namespace strata
