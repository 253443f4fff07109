#include "strata/gpu/runtime_api.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "cuda_check.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/output_buffers.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/json_read.h"
#include "strata/ir/result_graphs.h"

// The CUDA emitter lives in strata_core (src/codegen) when this build has it.
#if __has_include("strata/codegen/cuda_emitter.h")
#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"
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
  for (int t : ids) {
    TensorSignature s;
    s.name = g.tensor_name(t);
    s.dtype = g.tensor(t).dtype;
    s.shape = g.tensor(t).shape;
    sig.push_back(std::move(s));
  }
  return sig;
}

using Signature = std::pair<std::vector<TensorSignature>, std::vector<TensorSignature>>;

/// One side (inputs or outputs) of the signature a library reports through its functions
/// strata_num_<side>s, strata_<side>_name, _rank, _dim and _dtype.
Result<std::vector<TensorSignature>> signature_side(const SharedLibrary& lib,
                                                    const std::string& side) {
  auto count = reinterpret_cast<int (*)()>(lib.find(("strata_num_" + side + "s").c_str()));
  auto name =
      reinterpret_cast<const char* (*)(int)>(lib.find(("strata_" + side + "_name").c_str()));
  auto rank = reinterpret_cast<int (*)(int)>(lib.find(("strata_" + side + "_rank").c_str()));
  auto dim =
      reinterpret_cast<long long (*)(int, int)>(lib.find(("strata_" + side + "_dim").c_str()));
  auto dtype = reinterpret_cast<int (*)(int)>(lib.find(("strata_" + side + "_dtype").c_str()));
  std::string where = lib.path() + ": " + side + " signature";
  if (!count || !rank || !dim || !dtype)
    return make_error(where + ": one of strata_num_" + side + "s, strata_" + side +
                      "_rank, _dim, _dtype is missing");
  std::vector<TensorSignature> out;
  int n = count();
  for (int i = 0; i < n; ++i) {
    std::string at = where + " " + std::to_string(i);
    TensorSignature s;
    const char* nm = name ? name(i) : nullptr;
    s.name = nm ? nm : side + std::to_string(i);
    int r = rank(i);
    if (r < 0 || r > kMaxRank) return make_error(at + ": rank " + std::to_string(r));
    std::vector<int64_t> dims;
    for (int d = 0; d < r; ++d) dims.push_back(dim(i, d));
    auto shape = Shape::make(dims);
    if (!shape.ok()) return make_error(at + ": " + shape.error().message);
    s.shape = *shape;
    int code = dtype(i);
    if (code < 0 || code > 2)
      return make_error(at + ": unknown dtype code " + std::to_string(code));
    s.dtype = code == 0 ? DType::f16 : code == 1 ? DType::bf16 : DType::f32;
    out.push_back(std::move(s));
  }
  return out;
}

/// Fills the placement of `outs` from the library's strata_output_base, _offset, _stride and
/// _alloc (docs/codegen.md, "Packed outputs"); a library without them (emitted before packed
/// outputs) places every output dense, and keeps the defaults. All four or none.
Status read_placement(const SharedLibrary& lib, std::vector<TensorSignature>& outs) {
  auto base = reinterpret_cast<int (*)(int)>(lib.find("strata_output_base"));
  auto offset = reinterpret_cast<long long (*)(int)>(lib.find("strata_output_offset"));
  auto stride = reinterpret_cast<long long (*)(int, int)>(lib.find("strata_output_stride"));
  auto alloc = reinterpret_cast<long long (*)(int)>(lib.find("strata_output_alloc"));
  std::string where = lib.path() + ": output placement";
  if (!base && !offset && !stride && !alloc) return Status::success();
  if (!base || !offset || !stride || !alloc)
    return make_error(where + ": one of strata_output_base, _offset, _stride, _alloc is missing");
  for (size_t i = 0; i < outs.size(); ++i) {
    const int o = static_cast<int>(i);
    TensorSignature& s = outs[i];
    s.base = base(o);
    s.offset = offset(o);
    s.alloc = alloc(o);
    s.strides.clear();
    for (int d = 0; d < s.shape.rank(); ++d) s.strides.push_back(stride(o, d));
    if (s.base < 0 || s.offset < 0 || s.alloc < 0)
      return make_error(where + " " + std::to_string(i) + ": base " + std::to_string(s.base) +
                        ", offset " + std::to_string(s.offset) + ", alloc " +
                        std::to_string(s.alloc));
  }
  Status valid = check_placement(outs);
  if (!valid.ok()) return make_error(where + ": " + valid.error().message);
  return Status::success();
}

/// The signature a library reports, if it exports strata_num_inputs.
Result<std::optional<Signature>> library_signature(const SharedLibrary& lib) {
  if (!lib.find("strata_num_inputs")) return std::optional<Signature>{};
  STRATA_ASSIGN_OR_RETURN(auto ins, signature_side(lib, "input"));
  STRATA_ASSIGN_OR_RETURN(auto outs, signature_side(lib, "output"));
  STRATA_RETURN_IF_ERROR(read_placement(lib, outs));
  return std::optional<Signature>(Signature{std::move(ins), std::move(outs)});
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

std::optional<int64_t> source_smem_bytes(const std::string& cuda_source) {
  static const std::string kTag = "// strata-meta: ";
  size_t at = cuda_source.find(kTag);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + kTag.size();
  std::string line = cuda_source.substr(begin, cuda_source.find('\n', begin) - begin);
  auto parsed = parse_json_text(line, "strata-meta");  // the limits of every JSON loader
  if (!parsed.ok() || !parsed->is_object() || !parsed->contains("kernels") ||
      !(*parsed)["kernels"].is_array())
    return std::nullopt;
  int64_t most = 0;
  for (const auto& k : (*parsed)["kernels"])
    if (k.is_object() && k.contains("smem"))
      if (auto smem = json_int(k["smem"], "smem", 0, std::numeric_limits<int64_t>::max());
          smem.ok())
        most = std::max(most, *smem);
  return most;
}

Result<std::string> emit_graph_source(const KernelGraph& g, const std::string& arch,
                                      const std::string& knobs) {
  if (g.ranks() > 1 || g.is_parallel())
    return make_error("the graph runs on " + std::to_string(g.ranks()) +
                      " rank(s) with all_reduce: it runs one process per GPU under a launcher "
                      "(torchrun), not in this single-GPU runtime (docs/tensor-parallel.md); "
                      "expected a graph of one rank without all_reduce");
#ifdef STRATA_HAVE_EMITTER
  EmitOptions options;
  Status parsed = apply_emit_knobs(knobs, options);
  if (!parsed.ok()) return make_error("emitter knobs \"" + knobs + "\": " + parsed.error().message);
  // Set the target when the emitter's options have one (generic lambda: checked on use).
  auto set_arch = [&](auto& o) {
    if constexpr (requires { o.arch = arch; }) o.arch = arch;
  };
  if (!arch.empty()) set_arch(options);
  return emit_cuda(g, options);
#else
  (void)g;
  (void)arch;
  (void)knobs;
  return make_error(
      "this build of strata has no CUDA emitter (include/strata/codegen/cuda_emitter.h); "
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
  if (ends_with(path, ".strata")) {
    STRATA_ASSIGN_OR_RETURN(KernelGraph program, load_graph(path));
    auto g = from_graph(program, options);
    if (!g.ok()) return make_error(path + ": " + g.error().message);
    return g;
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<ResultGraph> graphs, load_result_graphs(path));
  const int index = options.candidate < 0 ? preferred_graph(graphs) : options.candidate;
  if (index >= static_cast<int>(graphs.size()))
    return make_error(path + ": candidate " + std::to_string(index) +
                      " does not exist (the document holds " + std::to_string(graphs.size()) + ")");
  const ResultGraph& chosen = graphs[index];
  LoadOptions with_knobs = options;
  if (with_knobs.knobs.empty()) with_knobs.knobs = chosen.knobs;
  auto g = from_graph(chosen.graph, with_knobs);
  if (!g.ok()) return make_error(chosen.where + ": " + g.error().message);
  return g;
}

Result<CompiledGraph> CompiledGraph::from_graph(const KernelGraph& g, const LoadOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string source,
                          emit_graph_source(g, resolved_arch(options.jit), options.knobs));
  STRATA_ASSIGN_OR_RETURN(CompiledBinary binary, compile_cuda(source, options.jit));
  return from_binary(binary, &g, options.allocate_workspace);
}

Result<CompiledGraph> CompiledGraph::from_source(const std::string& cuda_source,
                                                 const LoadOptions& options) {
  STRATA_ASSIGN_OR_RETURN(CompiledBinary binary, compile_cuda(cuda_source, options.jit));
  return from_binary(binary, nullptr, options.allocate_workspace);
}

Result<CompiledGraph> CompiledGraph::from_binary(const CompiledBinary& binary,
                                                 const KernelGraph* graph,
                                                 bool allocate_workspace) {
  STRATA_ASSIGN_OR_RETURN(SharedLibrary lib, SharedLibrary::open(binary.path));
  CompiledGraph cg;
  cg.binary_ = binary;
  cg.launch_ = reinterpret_cast<LaunchFn>(lib.find("strata_launch"));
  auto workspace_fn =
      reinterpret_cast<unsigned long long (*)()>(lib.find("strata_workspace_bytes"));
  if (!cg.launch_ || !workspace_fn)
    return make_error(binary.path +
                      ": not a strata library (strata_launch or strata_workspace_bytes missing)");
  cg.workspace_bytes_ = static_cast<size_t>(workspace_fn());

  STRATA_ASSIGN_OR_RETURN(auto lib_sig, library_signature(lib));
  if (graph) {
    cg.inputs_ = input_signature(*graph);
    cg.outputs_ = output_signature(*graph);
    if (lib_sig) {
      STRATA_RETURN_IF_ERROR(
          check_signature_match(cg.inputs_, lib_sig->first, "inputs", lib.path()));
      STRATA_RETURN_IF_ERROR(
          check_signature_match(cg.outputs_, lib_sig->second, "outputs", lib.path()));
      cg.outputs_ = lib_sig->second;  // the graph's names, the library's placement
      for (size_t i = 0; i < cg.outputs_.size(); ++i)
        cg.outputs_[i].name = graph->tensor_name(graph->outputs()[i]);
    }
  } else if (lib_sig) {
    cg.inputs_ = lib_sig->first;
    cg.outputs_ = lib_sig->second;
  }

  if (allocate_workspace && cg.workspace_bytes_ > 0) {
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
  if (workspace_bytes_ > 0 && !workspace_)
    return make_error(
        "CompiledGraph::run: the graph was loaded without a workspace "
        "(LoadOptions::allocate_workspace = false); pass one");
  return run(inputs, outputs, workspace_.get(), stream);
}

Status CompiledGraph::run(const void* const* inputs, void* const* outputs, void* workspace,
                          cudaStream_t stream) {
  if (!launch_) return make_error("CompiledGraph::run on an empty graph");
  if (workspace_bytes_ > 0 && !workspace)
    return make_error("CompiledGraph::run: the graph needs a workspace of " +
                      std::to_string(workspace_bytes_) + " bytes; got a null pointer");
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
  int rc = launch_(inputs, outputs, workspace, stream);
  if (rc != 0)
    return gpu::cuda_error(binary_.path + ": strata_launch failed", static_cast<cudaError_t>(rc));
  return Status::success();
}

}  // namespace strata
