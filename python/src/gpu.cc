// The GPU side: CUDA code generation (always available), and — in builds with a CUDA toolkit —
// device queries and strata._core.CompiledGraph, a compiled graph launched on caller-provided
// device pointers, workspace and stream (include/strata/gpu/runtime_api.h). Builds without a
// toolkit keep the same names; calling them raises GpuUnavailableError saying so.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "strata/cost/cost_model.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/runtime_api.h"
#endif

namespace strata::py {
namespace {

constexpr const char* kNoToolkit =
    "this strata package was built without CUDA support: no CUDA toolkit (nvcc) was found when "
    "it was built; install the CUDA toolkit and reinstall the package (pip install .) to run "
    "kernels on a GPU";

#ifdef STRATA_HAVE_CUDA
using TensorInfo = std::tuple<std::string, std::string, std::vector<int64_t>>;

std::vector<TensorInfo> infos(const std::vector<TensorSignature>& sig) {
  std::vector<TensorInfo> out;
  for (const TensorSignature& s : sig)
    out.emplace_back(s.name, std::string(dtype_name(s.dtype)), s.shape.dims());
  return out;
}

/// Where each output lies (docs/python.md, "Outputs"): base, offset, strides, alloc — the
/// dense values for an output the library does not pack.
std::vector<nb::dict> placement(const std::vector<TensorSignature>& sig) {
  std::vector<nb::dict> out;
  for (size_t i = 0; i < sig.size(); ++i) {
    const TensorSignature& s = sig[i];
    nb::dict d;
    d["base"] = s.base < 0 ? static_cast<int>(i) : s.base;
    d["offset"] = s.offset;
    d["strides"] = s.element_strides();
    d["alloc"] = s.alloc < 0 ? s.shape.numel() : s.alloc;
    out.push_back(std::move(d));
  }
  return out;
}

void require_gpu() {
  if (gpu_count() == 0)
    throw GpuUnavailable(
        "no CUDA device is available (no NVIDIA driver, or no GPU visible to this process)");
}
#endif

}  // namespace

void bind_gpu(nb::module_& m) {
  m.def(
      "emit_cuda",
      [](const KernelGraph& g, const std::string& arch, const std::string& knobs) {
        EmitOptions options;
        check(apply_emit_knobs(knobs, options));
        if (!arch.empty()) options.arch = arch;
        return unwrap(emit_cuda(g, options));
      },
      nb::arg("graph"), nb::arg("arch") = "", nb::arg("knobs") = "",
      "Generated CUDA source of a graph (docs/codegen.md); no GPU or toolkit needed.");

#ifdef STRATA_HAVE_CUDA
  m.attr("cuda_built") = true;
  m.def(
      "gpu_count", [] { return gpu_count(); }, "Usable CUDA devices (0 without a driver).");
  m.def(
      "device_info",
      [](int ordinal) {
        require_gpu();
        DeviceInfo d = unwrap(query_device(ordinal));
        nb::dict r;
        r["ordinal"] = d.ordinal;
        r["name"] = d.name;
        r["arch"] = d.arch();
        r["target"] = Target::for_device(d.name).name;  // the cost model's GPU
        r["sm_count"] = d.traits.sm_count;
        r["l2_bytes"] = d.traits.l2_bytes;
        r["smem_per_block"] = d.traits.smem_per_block_bytes;
        return r;
      },
      nb::arg("ordinal") = -1, "Properties of a device (-1: the current one).");

  nb::class_<CompiledGraph>(m, "CompiledGraph",
                            "A graph compiled into a shared library and loaded (JIT through "
                            "nvcc and the binary cache, docs/gpu-runtime.md).")
      .def_static(
          "from_graph",
          [](const KernelGraph& g, const std::string& knobs,
             const std::vector<std::string>& include_dirs, const std::string& cache_dir,
             const std::string& arch) {
            require_gpu();
            LoadOptions o;
            o.knobs = knobs;
            o.jit.include_dirs = include_dirs;
            o.jit.cache_dir = cache_dir;
            o.jit.arch = arch;
            o.allocate_workspace = false;  // the caller passes one (torch's allocator)
            nb::gil_scoped_release release;
            return unwrap(CompiledGraph::from_graph(g, o));
          },
          nb::arg("graph"), nb::arg("knobs") = "",
          nb::arg("include_dirs") = std::vector<std::string>{}, nb::arg("cache_dir") = "",
          nb::arg("arch") = "",
          "Emits, compiles (through the binary cache) and loads a graph for the current device.")
      .def_prop_ro("inputs", [](const CompiledGraph& g) { return infos(g.inputs()); })
      .def_prop_ro("outputs", [](const CompiledGraph& g) { return infos(g.outputs()); })
      .def_prop_ro(
          "placement", [](const CompiledGraph& g) { return placement(g.outputs()); },
          "Per output, where the library places it (docs/gpu-runtime.md, \"Packed outputs\"): "
          "{'base': the output whose pointer starts its allocation, 'offset': elements from "
          "there, 'strides': elements per index of each dim, 'alloc': elements to allocate at "
          "its own pointer (0: inside its base's)}.")
      .def_prop_ro("workspace_bytes", &CompiledGraph::workspace_bytes)
      .def_prop_ro("library", [](const CompiledGraph& g) { return g.binary().path; })
      .def_prop_ro("cache_hit", [](const CompiledGraph& g) { return g.binary().cache_hit; })
      .def(
          "launch",
          [](CompiledGraph& g, const std::vector<uintptr_t>& inputs,
             const std::vector<uintptr_t>& outputs, uintptr_t workspace, uintptr_t stream) {
            if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
              throw StrataError("launch: expected " + std::to_string(g.inputs().size()) +
                                " input and " + std::to_string(g.outputs().size()) +
                                " output pointers, got " + std::to_string(inputs.size()) + " and " +
                                std::to_string(outputs.size()));
            std::vector<const void*> in(inputs.size());
            std::vector<void*> out(outputs.size());
            for (size_t i = 0; i < inputs.size(); ++i)
              in[i] = reinterpret_cast<const void*>(inputs[i]);
            for (size_t i = 0; i < outputs.size(); ++i)
              out[i] = reinterpret_cast<void*>(outputs[i]);
            check(g.run(in.data(), out.data(), reinterpret_cast<void*>(workspace),
                        reinterpret_cast<cudaStream_t>(stream)));
          },
          nb::arg("inputs"), nb::arg("outputs"), nb::arg("workspace"), nb::arg("stream"),
          "Enqueues the graph on `stream` (a cudaStream_t as an integer): device pointers of "
          "the inputs (dense row-major) and outputs (placed as `placement` says, or each "
          "dense and alone) in signature order and a workspace of workspace_bytes. "
          "Does not allocate or synchronize.");
#else
  m.attr("cuda_built") = false;
  m.def(
      "gpu_count", [] { return 0; }, "Usable CUDA devices: 0 (built without CUDA).");
  m.def(
      "device_info", [](int) -> nb::dict { throw GpuUnavailable(kNoToolkit); },
      nb::arg("ordinal") = -1);
  struct CompiledGraphStub {};
  nb::class_<CompiledGraphStub>(m, "CompiledGraph")
      .def_static("from_graph",
                  [](nb::args, nb::kwargs) -> nb::object { throw GpuUnavailable(kNoToolkit); });
#endif
  m.attr("no_toolkit_message") = kNoToolkit;
}

}  // namespace strata::py
