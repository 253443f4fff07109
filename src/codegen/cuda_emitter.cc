#include "strata/cuda_emitter.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "block_emitter.h"
#include "code_writer.h"
#include "predefined_emitter.h"
#include "strata/graph_optimizer.h"
#include "strata/kernel_views.h"

namespace strata {
namespace {

using codegen::CodeWriter;

constexpr int64_t kWorkspaceAlign = 256;

int dtype_code(DType t) {
  return t == DType::f16 ? 0 : t == DType::bf16 ? 1 : 2;
}

/// Where a kernel tensor lives at run time.
struct Buffer {
  enum Kind { Input, Output, Workspace } kind = Workspace;
  int index = 0;       ///< position in inputs / outputs
  int64_t offset = 0;  ///< workspace byte offset
  DType dtype = DType::f16;
};

struct Launch {
  std::string name;
  Dim3 grid;
  int threads = 0;
  int64_t smem = 0;
  std::vector<int> args;  ///< kernel tensor ids: inputs then outputs
  std::string comment;
  int streamed = -1;  ///< kernel tensor launched with a streaming L2 window, or -1
};

std::string var(int t) {
  return "t" + std::to_string(t);
}

nlohmann::ordered_json tensor_meta(const KernelGraph& g, int t, DType dt) {
  nlohmann::ordered_json j;
  j["name"] = g.tensor_name(t);
  j["shape"] = g.tensor(t).shape.dims();
  j["dtype"] = std::string(dtype_name(dt));
  return j;
}

std::string kernel_graph_listing(const KernelGraph& g) {
  std::ostringstream os;
  for (int t : g.inputs())
    os << "input " << g.tensor_name(t) << ": " << dtype_name(g.tensor(t).dtype)
       << g.tensor(t).shape.str() << "\n";
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) continue;
    os << "#" << i << " ";
    for (size_t k = 0; k < op.outputs.size(); ++k)
      os << (k ? ", " : "") << g.tensor_name(op.outputs[k]) << g.tensor(op.outputs[k]).shape.str();
    os << " = " << op_name(op.kind) << "(";
    for (size_t k = 0; k < op.inputs.size(); ++k)
      os << (k ? ", " : "") << g.tensor_name(op.inputs[k]);
    os << ")\n";
  }
  os << "outputs:";
  for (int t : g.outputs()) os << " " << g.tensor_name(t);
  os << "\n";
  return os.str();
}

/// The input (position among op's inputs) that EmitOptions::l2_streaming marks in a kernel
/// with block graph `b`, or -1: the kernel's only input of at least `min_bytes`, when it is
/// read by this kernel alone (`reads[t]` counts the kernel ops reading t, and a graph output
/// that is an input once more) and split over every grid axis of more than one block, so that
/// each byte is loaded by one block. A launch has one window: with two large streams (gatedmlp's
/// W1 and W3) marking one of them was measured slower, so neither is marked.
int streamed_input(const KernelGraph& g, const KernelOp& op, const BlockGraph& b,
                   const std::vector<int>& reads, const std::vector<DType>& dtypes,
                   int64_t min_bytes) {
  const Dim3 grid = b.grid();
  const int extents[3] = {grid.x, grid.y, grid.z};
  int large = -1;
  for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
    const int t = op.inputs[k];
    if (g.tensor(t).shape.numel() * dtype_size(dtypes[t]) < min_bytes) continue;
    if (large >= 0) return -1;
    large = k;
  }
  if (large < 0 || reads[op.inputs[large]] != 1) return -1;
  const GridMap& imap = b.op(b.input_op(large)).attrs.imap;
  for (int a = 0; a < 3; ++a)
    if (extents[a] > 1 && imap[a] == kReplicate) return -1;
  return large;
}

}  // namespace

Result<EmittedSource> emit_cuda_source(const KernelGraph& g, const EmitOptions& options) {
  STRATA_RETURN_IF_ERROR(g.check_complete());
  const int ntensors = static_cast<int>(g.tensors().size());
  // Predefined layout ops read in place by the customized kernels (kernel_views.h): no kernel,
  // no memory; their readers get the tensor holding them and the index map.
  const std::vector<std::optional<KernelView>> views = plan_kernel_views(g);
  auto storage_of = [&](int t) { return views[t] ? views[t]->storage : t; };
  const std::string prefix = codegen::identifier("strata_", options.name);
  // Buffers: graph inputs, graph outputs, workspace for the rest.
  std::vector<Buffer> buf(ntensors);
  std::vector<bool> is_input(ntensors, false), is_output(ntensors, false);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    int t = g.inputs()[i];
    is_input[t] = true;
    buf[t] = {Buffer::Input, static_cast<int>(i), 0, g.tensor(t).dtype};
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    int t = g.outputs()[i];
    is_output[t] = true;
    if (!is_input[t]) buf[t] = {Buffer::Output, static_cast<int>(i), 0, g.tensor(t).dtype};
  }
  // A 16-bit intermediate whose consumer loads tiles with rows of an odd number of elements
  // could only be copied 2 bytes at a time, synchronously: store it in f32 (cp.async-able).
  std::vector<bool> widen(ntensors, options.f32_intermediates);
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const BlockGraph& b = *op.body;
      const Shape& tile = b.tensor(b.op(b.input_op(static_cast<int>(k))).output).shape;
      // A transposed view's tile is copied along the rows of the tensor holding it.
      const int t = op.inputs[k], r = tile.rank();
      const int64_t row = r == 0                                           ? 1
                          : views[t] && views[t]->map.transposed && r >= 2 ? tile[r - 2]
                                                                           : tile[r - 1];
      if ((row * 2) % 4 != 0) widen[storage_of(t)] = true;
    }
  }
  int64_t workspace = 0;
  for (int t = 0; t < ntensors; ++t) {
    if (is_input[t] || is_output[t] || views[t]) continue;
    DType dt = widen[t] ? DType::f32 : g.tensor(t).dtype;
    buf[t] = {Buffer::Workspace, 0, workspace, dt};
    workspace += (g.tensor(t).shape.numel() * dtype_size(dt) + kWorkspaceAlign - 1) /
                 kWorkspaceAlign * kWorkspaceAlign;
  }
  std::vector<DType> dtypes(ntensors);
  for (int t = 0; t < ntensors; ++t) dtypes[t] = buf[storage_of(t)].dtype;
  std::vector<int> reads(ntensors, 0);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    if (!is_kernel_view(g, views, i))
      for (int t : g.op(i).inputs) ++reads[storage_of(t)];
  for (int t : g.outputs()) reads[t] += is_input[t] ? 1 : 0;

  CodeWriter kernels;
  std::vector<Launch> launches;
  EmittedSource result;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input || is_kernel_view(g, views, i)) continue;
    const std::string where =
        "kernel op #" + std::to_string(i) + " (" + std::string(op_name(op.kind)) + ")";
    std::shared_ptr<const BlockGraph> body = op.body;
    if (op.kind == OpKind::Matmul) {
      auto lowered = codegen::lower_matmul_to_block_graph(g.tensor(op.inputs[0]).shape,
                                                          g.tensor(op.inputs[1]).shape);
      if (lowered) body = std::make_shared<const BlockGraph>(std::move(*lowered));
    }
    Launch L;
    for (int t : op.inputs) L.args.push_back(storage_of(t));
    L.args.insert(L.args.end(), op.outputs.begin(), op.outputs.end());
    kernels.line("");
    if (body) {
      std::vector<DType> in_t, out_t;
      std::vector<std::optional<InputView>> in_views;
      for (int t : op.inputs) {
        in_t.push_back(dtypes[t]);
        in_views.push_back(views[t] ? std::optional<InputView>(InputView{
                                          g.tensor(views[t]->storage).shape, views[t]->map})
                                    : std::nullopt);
      }
      for (int t : op.outputs) out_t.push_back(dtypes[t]);
      auto plan = optimize_block_graph(body, in_t, out_t, options.plan, in_views);
      if (!plan.ok() && op.kind == OpKind::Matmul) {
        body = nullptr;  // fall back to the generic kernel below
      } else {
        if (!plan.ok()) return make_error(where + ": " + plan.error().message);
        const Dim3 grid = body->grid();
        if (grid.y > 65535 || grid.z > 65535)
          return make_error(where + ": grid (" + std::to_string(grid.x) + ", " +
                            std::to_string(grid.y) + ", " + std::to_string(grid.z) +
                            ") exceeds CUDA's limit of 65535 blocks along y and z");
        codegen::BlockKernelInfo info{prefix + "_k" + std::to_string(i) + "_" +
                                          (op.kind == OpKind::Matmul ? "matmul" : "customized"),
                                      in_t, out_t};
        std::string title = "kernel op #" + std::to_string(i) + ": " +
                            (op.kind == OpKind::Matmul ? "matmul lowered to a tiled block graph"
                                                       : "customized kernel");
        STRATA_RETURN_IF_ERROR(codegen::emit_block_kernel(*plan, info, title, kernels));
        L.name = info.name;
        L.grid = grid;
        L.threads = plan->threads;
        L.smem = plan->smem_bytes;
        int streamed = options.l2_streaming ? streamed_input(g, op, *body, reads, dtypes,
                                                             options.l2_streaming_min_bytes)
                                            : -1;
        if (streamed >= 0 && views[op.inputs[streamed]]) streamed = -1;  // not a whole tensor
        if (streamed >= 0) L.streamed = op.inputs[streamed];
        result.kernels.push_back({L.name, std::string(op_name(op.kind)), L.grid, L.threads, L.smem,
                                  plan->pipeline_stages, plan->groups, format_plan(*plan),
                                  streamed});
      }
    }
    if (!body) {
      codegen::PredefinedLaunch pl;
      L.name = prefix + "_k" + std::to_string(i) + "_" + std::string(op_name(op.kind));
      STRATA_RETURN_IF_ERROR(codegen::emit_predefined_kernel(g, i, dtypes, L.name, kernels, pl));
      L.grid = {static_cast<int>(pl.blocks), 1, 1};
      L.threads = pl.threads;
      L.smem = 0;
      result.kernels.push_back(
          {L.name, std::string(op_name(op.kind)), L.grid, L.threads, 0, 0, 1, std::string()});
    }
    L.comment = "kernel op #" + std::to_string(i) + ": " + std::string(op_name(op.kind));
    launches.push_back(std::move(L));
  }

  // Metadata.
  nlohmann::ordered_json meta;
  meta["graph"] = options.name;
  meta["arch"] = options.arch;
  meta["inputs"] = nlohmann::ordered_json::array();
  for (int t : g.inputs()) meta["inputs"].push_back(tensor_meta(g, t, dtypes[t]));
  meta["outputs"] = nlohmann::ordered_json::array();
  for (int t : g.outputs()) meta["outputs"].push_back(tensor_meta(g, t, dtypes[t]));
  meta["workspace_bytes"] = workspace;
  meta["kernels"] = nlohmann::ordered_json::array();
  for (const Launch& l : launches)
    meta["kernels"].push_back({{"name", l.name},
                               {"grid", {l.grid.x, l.grid.y, l.grid.z}},
                               {"block", l.threads},
                               {"smem", l.smem}});

  CodeWriter w;
  w.line("// Generated by strata " STRATA_VERSION " from the μGraph \"" + options.name +
         "\". Do not edit.");
  w.line("// Target " + options.arch + " (any sm_80 or newer GPU). Build, for example:");
  w.line("//   nvcc -std=c++17 -O3 -arch=" + options.arch +
         " -I <strata>/runtime -shared -Xcompiler -fPIC -o graph.so graph.cu");
  w.line("// strata-meta: " + meta.dump());
  w.line("//");
  std::istringstream listing(kernel_graph_listing(g));
  for (std::string l; std::getline(listing, l);) w.line("//   " + l);
  w.line("#include \"strata_rt/strata_rt.cuh\"");
  w.add(kernels.root());
  w.line("");
  w.line("// ---- host API (see include/strata/cuda_emitter.h) ----");
  w.line("#if !defined(__CUDACC_RTC__)");
  w.line("#include \"strata_rt/host.cuh\"");
  w.line("");
  w.open("namespace");
  w.line("struct StrataTensorInfo {");
  w.line("  const char* name;");
  w.line("  int rank;");
  w.line("  long long dims[4];");
  w.line("  int dtype;  // 0 f16, 1 bf16, 2 f32");
  w.line("};");
  auto table = [&](const char* name, const std::vector<int>& ts) {
    w.open(std::string("const StrataTensorInfo ") + name + "[] =");
    for (int t : ts) {
      const Shape& s = g.tensor(t).shape;
      std::string dims;
      for (int d = 0; d < 4; ++d) dims += (d ? ", " : "") + std::to_string(d < s.rank() ? s[d] : 1);
      w.line("{\"" + g.tensor_name(t) + "\", " + std::to_string(s.rank()) + ", {" + dims + "}, " +
             std::to_string(dtype_code(dtypes[t])) + "},");
    }
    w.close(";");
  };
  table("kInputs", g.inputs());
  table("kOutputs", g.outputs());
  w.close("  // namespace");
  w.line("");
  w.open("extern \"C\" int strata_init(void)");
  w.line("int err = 0;");
  for (const Launch& l : launches)
    if (l.smem > 48 * 1024)
      w.line("if (err == 0) err = strata_rt::host::allow_dynamic_smem(" + l.name + ", " +
             std::to_string(l.smem) + ");");
  w.line("return err;");
  w.close();
  w.line("");
  w.open(
      "extern \"C\" int strata_launch(const void* const* inputs, void* const* outputs, void* "
      "workspace, cudaStream_t stream)");
  w.line("static const int init = strata_init();");
  w.line("if (init != 0) return init;");
  // The workspace pointer is named only when an intermediate lives there (an unused local
  // would draw nvcc's "set but never used" warning).
  bool uses_workspace = false;
  for (int t = 0; t < ntensors; ++t)
    uses_workspace |= buf[t].kind == Buffer::Workspace && !views[t];
  if (uses_workspace)
    w.line("unsigned char* ws = static_cast<unsigned char*>(workspace);");
  else
    w.line("(void)workspace;");
  w.line("(void)outputs;");
  for (int t = 0; t < ntensors; ++t) {
    if (views[t]) continue;  // read in place: its readers get the tensor holding it
    const std::string T = codegen::cuda_type(dtypes[t]);
    const Buffer& b = buf[t];
    if (b.kind == Buffer::Input)
      w.line("const " + T + "* " + var(t) + " = static_cast<const " + T + "*>(inputs[" +
             std::to_string(b.index) + "]);  // " + g.tensor_name(t));
    else if (b.kind == Buffer::Output)
      w.line(T + "* " + var(t) + " = static_cast<" + T + "*>(outputs[" + std::to_string(b.index) +
             "]);  // " + g.tensor_name(t));
    else
      w.line(T + "* " + var(t) + " = reinterpret_cast<" + T + "*>(ws + " +
             std::to_string(b.offset) + ");  // " + g.tensor_name(t) + " (intermediate)");
    w.line("(void)" + var(t) + ";");
  }
  for (const Launch& l : launches) {
    std::string args;
    for (int t : l.args) args += ", " + var(t);
    w.line("// " + l.comment);
    const std::string shape = l.name + ", dim3(" + std::to_string(l.grid.x) + ", " +
                              std::to_string(l.grid.y) + ", " + std::to_string(l.grid.z) +
                              "), dim3(" + std::to_string(l.threads) + "), " +
                              std::to_string(l.smem) + ", stream";
    if (l.streamed < 0) {
      w.line("STRATA_RT_LAUNCH(" + shape + args + ");");
      continue;
    }
    const int t = l.streamed;
    const std::string bytes = std::to_string(g.tensor(t).shape.numel() * dtype_size(dtypes[t]));
    w.line("// " + g.tensor_name(t) + " (" + bytes +
           " bytes) is read once, each byte by one block: L2 evicts its lines first");
    w.open("");
    w.line("const int err = strata_rt::host::launch_streaming(" + shape + ", " + var(t) + ", " +
           bytes + "ULL" + args + ");");
    w.line("if (err != 0) return err;");
    w.close();
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    int t = g.outputs()[i];
    if (!is_input[t]) continue;
    w.line("// output " + g.tensor_name(t) + " is an input: copy it");
    w.open("");
    w.line("const int err = strata_rt::host::copy_device(outputs[" + std::to_string(i) + "], " +
           var(t) + ", " + std::to_string(g.tensor(t).shape.numel() * dtype_size(dtypes[t])) +
           "ULL, stream);");
    w.line("if (err != 0) return err;");
    w.close();
  }
  w.line("return strata_rt::host::last_error();");
  w.close();
  w.line("");
  w.line("extern \"C\" unsigned long long strata_workspace_bytes(void) { return " +
         std::to_string(workspace) + "ULL; }");
  const std::string ni = std::to_string(g.inputs().size()), no = std::to_string(g.outputs().size());
  w.line("extern \"C\" int strata_num_inputs(void) { return " + ni + "; }");
  w.line("extern \"C\" int strata_num_outputs(void) { return " + no + "; }");
  for (const char* side : {"input", "output"}) {
    const std::string n = side[0] == 'i' ? ni : no;
    const std::string tab = side[0] == 'i' ? "kInputs" : "kOutputs";
    const std::string s = side;
    w.line("extern \"C\" const char* strata_" + s + "_name(int i) { return i >= 0 && i < " + n +
           " ? " + tab + "[i].name : nullptr; }");
    w.line("extern \"C\" int strata_" + s + "_rank(int i) { return i >= 0 && i < " + n + " ? " +
           tab + "[i].rank : -1; }");
    w.line("extern \"C\" long long strata_" + s + "_dim(int i, int d) { return i >= 0 && i < " + n +
           " && d >= 0 && d < " + tab + "[i].rank ? " + tab + "[i].dims[d] : -1; }");
    w.line("extern \"C\" int strata_" + s + "_dtype(int i) { return i >= 0 && i < " + n + " ? " +
           tab + "[i].dtype : -1; }");
  }
  w.line("#endif  // !__CUDACC_RTC__");
  result.code = w.str();
  result.workspace_bytes = workspace;
  return result;
}

Result<std::string> emit_cuda(const KernelGraph& g, const EmitOptions& options) {
  STRATA_ASSIGN_OR_RETURN(EmittedSource s, emit_cuda_source(g, options));
  return std::move(s.code);
}

}  // namespace strata
