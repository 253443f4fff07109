#include "strata/codegen/cuda_emitter.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "block_emitter.h"
#include "code_writer.h"
#include "predefined_emitter.h"
#include "strata/opt/launch_streams.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/opt/kernel_views.h"
#include "strata/opt/library_epilogues.h"
#include "strata/opt/matmul_lowering.h"
#include "strata/opt/output_placement.h"
#include "strata/opt/output_routes.h"
#include "strata/opt/packed_outputs.h"

namespace strata {
namespace {

using codegen::CodeWriter;

constexpr int64_t kWorkspaceAlign = 256;
/// The workspace of each cuBLASLt call with an epilogue (library_epilogues.h): a slot of its own
/// in strata's workspace, so that calls never share one.
constexpr int64_t kLibraryWorkspaceBytes = int64_t{4} << 20;

int dtype_code(DType t) {
  return t == DType::f16 ? 0 : t == DType::bf16 ? 1 : 2;
}

/// Where a kernel tensor lives at run time.
struct Buffer {
  /// Routed: no memory of its own; its kernel writes the slices read from it (output_routes.h).
  /// Absorbed: no memory; a library matmul's result or epilogue intermediate that the call
  /// never stores (library_epilogues.h).
  enum Kind { Input, Output, Workspace, Routed, Absorbed } kind = Workspace;
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
  int num_inputs = 0;     ///< of args (the storages it reads; the rest it writes)
  std::string comment;
  std::string task_wrapper;  ///< EmitOptions::task_entry Beside: the task entry's wrapper
  /// A packed tensor's slice (packed_outputs.h): launched only when the caller's outputs are not
  /// laid out packed (the copy of the fallback); the packed tensor's id, or -1.
  int packed_guard = -1;
  int streamed = -1;         ///< kernel tensor launched with a streaming L2 window, or -1
  bool all_reduce = false;   ///< an ncclAllReduce of args[0] into args[1], not a kernel
  /// A predefined matmul as a cuBLAS call (EmitOptions::library_matmul), not a kernel: args
  /// are A, B, C (row-major); gemm holds the extents.
  bool blas = false;
  struct Gemm {
    int64_t m = 0, n = 0, k = 0, batch = 1;
    GemmOperand a, b;  ///< how the call reads A and B (dense, or a view read in place)
    /// The library epilogue (library_epilogues.h): strata_rt::host::BlasEpilogue bits (0:
    /// none, a plain cublasGemmStridedBatchedEx), the bias tensor or -1, and the call's
    /// cuBLASLt workspace slot in strata's workspace.
    int epilogue = 0;
    int bias = -1;
    int64_t workspace_offset = 0, workspace_bytes = 0;
  } gemm;
};

EmittedKernel emitted_kernel(std::string name, std::string op, Dim3 grid, int threads,
                             int64_t smem) {
  EmittedKernel k;
  k.name = std::move(name);
  k.op = std::move(op);
  k.grid = grid;
  k.threads = threads;
  k.smem_bytes = smem;
  return k;
}

/// NCCL's name of a dtype.
const char* nccl_type(DType t) {
  return t == DType::f16 ? "ncclFloat16" : t == DType::bf16 ? "ncclBfloat16" : "ncclFloat32";
}

/// Whether some launch is an all_reduce: the source then includes NCCL and its host API.
bool uses_nccl(const std::vector<Launch>& launches) {
  return std::any_of(launches.begin(), launches.end(),
                     [](const Launch& l) { return l.all_reduce; });
}

/// Whether some launch is a cuBLAS call: the source then includes strata_rt/blas.cuh and links
/// with -lcublas (its strata-meta line says "cublas": true, which the JIT reads).
bool uses_cublas(const std::vector<Launch>& launches) {
  return std::any_of(launches.begin(), launches.end(), [](const Launch& l) { return l.blas; });
}

std::string var(int t) {
  return "t" + std::to_string(t);
}

/// What each launch reads and writes, for the launch plan (launch_streams.h): the storages of
/// its arguments (a view's storage, a routed result's parts); an all_reduce is a barrier.
std::vector<LaunchAccess> launch_accesses(const std::vector<Launch>& launches) {
  std::vector<LaunchAccess> acc;
  for (const Launch& l : launches) {
    LaunchAccess a;
    a.reads.assign(l.args.begin(), l.args.begin() + l.num_inputs);
    a.writes.assign(l.args.begin() + l.num_inputs, l.args.end());
    a.barrier = l.all_reduce;
    acc.push_back(std::move(a));
  }
  return acc;
}

/// The stream of plan stream `s` in strata_launch: the caller's, or the fork's side stream s.
codegen::ir::Expr stream_expr(int s) {
  namespace ir = codegen::ir;
  return s == 0 ? ir::var("stream") : ir::call("fork.stream", {ir::int_lit(s)});
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

/// Where every kernel tensor lives and in which type (the steps before any kernel is written).
struct BufferPlan {
  /// Predefined layout ops read in place by the customized kernels (kernel_views.h): no kernel,
  /// no memory; their readers get the tensor holding them and the index map.
  std::vector<std::optional<KernelView>> views;
  /// Kernel tensors their customized kernels write straight into the slices read from them
  /// (output_routes.h): no memory; the slices are no kernels.
  std::vector<std::optional<OutputRoute>> routes;
  /// Kernel tensors whose slices are graph outputs packed in one allocation of the caller's
  /// (packed_outputs.h): a workspace slot for the fallback, the caller's memory when packed.
  std::vector<std::optional<PackedOutput>> packed;
  /// Per op: the epilogue a library matmul absorbs (library_epilogues.h), and the offset of its
  /// cuBLASLt workspace slot.
  std::vector<std::optional<LibraryEpilogue>> epilogues;
  std::vector<int64_t> epilogue_workspace;
  std::vector<Buffer> buf;
  std::vector<bool> is_input, is_output;
  std::vector<DType> dtypes;  ///< the storage type of every tensor (a view: its storage's)
  std::vector<int> reads;  ///< kernel ops reading each storage (plus graph outputs that are inputs)
  int64_t workspace = 0;
  int storage_of(int t) const { return views[t] ? views[t]->storage : t; }
};

/// Whether predefined op `i` may run as a cuBLAS call on the graph's dtypes (the emitter's
/// options permitting): library_matmul_launch then makes it one, unless widened storage types
/// (storage_types.h) take it off cuBLAS.
bool library_matmul_candidate(const KernelGraph& g, int i, const EmitOptions& options) {
  const KernelOp& op = g.op(i);
  if (!options.library_matmul || options.task_entry != TaskEntryForm::Off ||
      op_category(op.kind) != Category::Matmul)
    return false;
  const KernelTensor &a = g.tensor(op.inputs[0]), &b = g.tensor(op.inputs[1]);
  return library_matmul_supported(a.shape, b.shape, a.dtype, b.dtype,
                                  g.tensor(op.outputs[0]).dtype);
}

/// Buffers: graph inputs, graph outputs, 256-byte aligned workspace slots (no reuse) for the
/// rest; storage types; read counts (for the L2 streaming window). Views read in place by
/// cuBLAS (plan_kernel_views) are planned for the matmuls that library_matmul_candidate accepts
/// but for those in `no_library` (the matmuls that widened storage types take off cuBLAS).
BufferPlan plan_buffers(const KernelGraph& g, const EmitOptions& options,
                        const std::vector<bool>& no_library) {
  const int ntensors = static_cast<int>(g.tensors().size());
  BufferPlan bp;
  bp.views = plan_kernel_views(
      g, [&](int i) { return !no_library[i] && library_matmul_candidate(g, i, options); });
  bp.buf.resize(ntensors);
  bp.is_input.assign(ntensors, false);
  bp.is_output.assign(ntensors, false);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    int t = g.inputs()[i];
    bp.is_input[t] = true;
    bp.buf[t] = {Buffer::Input, static_cast<int>(i), 0, g.tensor(t).dtype};
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    int t = g.outputs()[i];
    bp.is_output[t] = true;
    if (!bp.is_input[t]) bp.buf[t] = {Buffer::Output, static_cast<int>(i), 0, g.tensor(t).dtype};
  }
  // Storage types (storage_types.h), and the routed and packed outputs decided on them as the
  // cost model decides them (output_placement.h). Task entries route and pack nothing: they
  // keep one pointer per output (a megakernel's tasks address whole tensors).
  OutputPlacement placement = plan_output_placement(g, bp.views, options.f32_intermediates);
  const std::vector<DType>& stored = placement.stored;
  const bool one_pointer_per_output = options.task_entry != TaskEntryForm::Off;
  bp.routes = one_pointer_per_output ? std::vector<std::optional<OutputRoute>>(ntensors)
                                     : std::move(placement.routes);
  bp.packed = one_pointer_per_output ? std::vector<std::optional<PackedOutput>>(ntensors)
                                     : std::move(placement.packed);
  // Epilogues of the matmuls that are cuBLAS calls on their storage types.
  bp.epilogues = plan_library_epilogues(
      g,
      [&](int i) {
        const KernelOp& op = g.op(i);
        return !no_library[i] && library_matmul_candidate(g, i, options) &&
               library_matmul_supported(g.tensor(op.inputs[0]).shape, g.tensor(op.inputs[1]).shape,
                                        stored[op.inputs[0]], stored[op.inputs[1]],
                                        stored[op.outputs[0]]);
      },
      bp.views, stored);
  for (int t = 0; t < ntensors; ++t) {
    if (bp.is_input[t] || bp.is_output[t] || bp.views[t]) continue;
    const DType dt = stored[t];
    if (bp.routes[t]) {
      bp.buf[t] = {Buffer::Routed, 0, 0, dt};
      continue;
    }
    if (is_epilogue_intermediate(bp.epilogues, g, t)) {
      bp.buf[t] = {Buffer::Absorbed, 0, 0, dt};
      continue;
    }
    bp.buf[t] = {Buffer::Workspace, 0, bp.workspace, dt};
    bp.workspace += (g.tensor(t).shape.numel() * dtype_size(dt) + kWorkspaceAlign - 1) /
                    kWorkspaceAlign * kWorkspaceAlign;
  }
  bp.epilogue_workspace.assign(g.ops().size(), 0);
  for (size_t i = 0; i < g.ops().size(); ++i)
    if (bp.epilogues[i]) {
      bp.epilogue_workspace[i] = bp.workspace;
      bp.workspace += kLibraryWorkspaceBytes;
    }
  bp.dtypes.resize(ntensors);
  for (int t = 0; t < ntensors; ++t) bp.dtypes[t] = bp.buf[bp.storage_of(t)].dtype;
  bp.reads.assign(ntensors, 0);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    if (!is_kernel_view(g, bp.views, i) && !is_routed_slice(g, bp.routes, i) &&
        !is_absorbed_epilogue(bp.epilogues, i))
      for (int t : g.op(i).inputs) ++bp.reads[bp.storage_of(t)];
  for (int t : g.outputs()) bp.reads[t] += bp.is_input[t] ? 1 : 0;
  return bp;
}

/// plan_buffers, with the views of every matmul that its storage types take off cuBLAS (an f32
/// intermediate: library_matmul_supported fails on the widened type) planned as copies. A view
/// dropped can only change widening elsewhere, never add views, so the rounds end.
BufferPlan plan_buffers(const KernelGraph& g, const EmitOptions& options) {
  std::vector<bool> no_library(g.ops().size(), false);
  for (;;) {
    BufferPlan bp = plan_buffers(g, options, no_library);
    bool changed = false;
    for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
      const KernelOp& op = g.op(i);
      if (no_library[i] || op_category(op.kind) != Category::Matmul) continue;
      const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
      if (!bp.views[a] && !bp.views[b]) continue;
      if (library_matmul_supported(g.tensor(a).shape, g.tensor(b).shape, bp.dtypes[a], bp.dtypes[b],
                                   bp.dtypes[c]))
        continue;
      no_library[i] = true;
      changed = true;
    }
    if (!changed) return bp;
  }
}

/// The plan of kernel op `op`'s block graph `body` as the emitter makes it: the tensors'
/// storage types and the inputs' views of `bp`.
Result<KernelPlan> plan_kernel_as_stored(const KernelGraph& g, const KernelOp& op,
                                         const std::shared_ptr<const BlockGraph>& body,
                                         const BufferPlan& bp, const PlanOptions& options) {
  std::vector<DType> in_t, out_t;
  std::vector<std::optional<InputView>> in_views;
  for (int t : op.inputs) {
    in_t.push_back(bp.dtypes[t]);
    in_views.push_back(bp.views[t] ? std::optional<InputView>(InputView{
                                         g.tensor(bp.views[t]->storage).shape, bp.views[t]->map})
                                   : std::nullopt);
  }
  for (int t : op.outputs) out_t.push_back(bp.dtypes[t]);
  STRATA_ASSIGN_OR_RETURN(KernelPlan plan,
                          optimize_block_graph(body, in_t, out_t, options, in_views));
  for (size_t oi = 0; oi < op.outputs.size(); ++oi) {
    const std::optional<OutputRoute>& route = bp.routes[op.outputs[oi]];
    if (!route) continue;
    plan.output_parts.resize(op.outputs.size());
    plan.output_parts[oi] = output_parts(op, static_cast<int>(oi), *route);
  }
  return plan;
}

/// The launch of all_reduce op `i` (a collective, docs/tensor-parallel.md): an ncclAllReduce of
/// its input into its result, which must be whole tensors of one dtype; refused when NCCL is
/// off (EmitOptions::nccl).
Result<Launch> all_reduce_launch(const KernelGraph& g, int i, const BufferPlan& bp,
                                 const EmitOptions& options, std::vector<EmittedKernel>& emitted) {
  const KernelOp& op = g.op(i);
  const std::string where =
      "kernel op #" + std::to_string(i) + " (" + std::string(op_name(op.kind)) + ")";
  if (options.task_entry != TaskEntryForm::Off)
    return make_error(where +
                      ": a task entry is emitted for customized kernels only; expected a "
                      "graph without all_reduce");
  if (!options.nccl)
    return make_error(where +
                      ": all_reduce needs NCCL, and this strata was configured without "
                      "nccl.h (configure with -DSTRATA_NCCL_ROOT=DIR, the directory holding "
                      "include/nccl.h); expected a graph without all_reduce");
  const int in = op.inputs[0], out = op.outputs[0];
  if (bp.views[in])
    return make_error(where + ": all_reduce of a view (" + g.tensor_name(in) +
                      ", read in place) is not supported; expected a whole tensor");
  if (bp.dtypes[in] != bp.dtypes[out])
    return make_error("all_reduce of " + g.tensor_name(in) + ": its input is stored as " +
                      std::string(dtype_name(bp.dtypes[in])) + " and its result as " +
                      std::string(dtype_name(bp.dtypes[out])) + "; expected one dtype");
  Launch L;
  L.all_reduce = true;
  L.args = {in, out};
  L.num_inputs = 1;
  L.name = "ncclAllReduce";
  L.comment = "kernel op #" + std::to_string(i) + ": all_reduce (NCCL, sum over " +
              std::to_string(g.ranks()) + " ranks)";
  EmittedKernel ek =
      emitted_kernel("ncclAllReduce", std::string(op_name(op.kind)), Dim3{1, 1, 1}, 0, 0);
  ek.library = true;
  emitted.push_back(std::move(ek));
  return L;
}

/// The __global__ wrapper of task entry `entry` (EmitOptions::task_entry Beside): blocks of
/// `threads` threads, each calling the entry with its block index and the dynamic shared memory
/// (so that the entry can be launched, and tested, like its kernel).
void emit_task_wrapper(const std::string& entry, const std::string& name,
                       const std::vector<DType>& in_t, const std::vector<DType>& out_t, int threads,
                       CodeWriter& w) {
  namespace ir = codegen::ir;
  std::string params;
  std::vector<ir::Expr> args = {ir::var("blockIdx.x"), ir::var("blockIdx.y"),
                                ir::var("blockIdx.z")};
  for (size_t i = 0; i < in_t.size(); ++i) {
    params += (i ? ", " : "") + std::string("const ") + codegen::cuda_type(in_t[i]) +
              "* __restrict__ gin" + std::to_string(i);
    args.push_back(ir::var("gin" + std::to_string(i)));
  }
  for (size_t i = 0; i < out_t.size(); ++i) {
    params += ", " + codegen::cuda_type(out_t[i]) + "* __restrict__ gout" + std::to_string(i);
    args.push_back(ir::var("gout" + std::to_string(i)));
  }
  args.push_back(ir::var("smem"));
  w.line("");
  w.comment("The task entry launched as a kernel of " + std::to_string(threads) +
            "-thread blocks (strata_launch_tasks).");
  w.open("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) + ") " + name +
         "(" + params + ")");
  w.call("STRATA_RT_DYNAMIC_SMEM", {ir::var("smem")});
  w.call(entry, args);
  w.close();
}

/// The launch of predefined matmul op `i` as a cuBLAS call when EmitOptions::library_matmul
/// asks for it and library_matmul_supported accepts its operands as they are stored (no task
/// entries: a megakernel cannot call a library); nullopt otherwise (a generated kernel). An
/// operand that is a view (a slice or transpose planned in place for this call, plan_buffers)
/// is read where it lies (gemm_operand); an error where such a view cannot be read so (the plan
/// and the launch disagree).
Result<std::optional<Launch>> library_matmul_launch(const KernelGraph& g, int i,
                                                    const BufferPlan& bp,
                                                    const EmitOptions& options,
                                                    std::vector<EmittedKernel>& emitted) {
  const KernelOp& op = g.op(i);
  if (!library_matmul_candidate(g, i, options)) return std::optional<Launch>();
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  const Shape& as = g.tensor(a).shape;
  const Shape& bs = g.tensor(b).shape;
  if (!library_matmul_supported(as, bs, bp.dtypes[a], bp.dtypes[b], bp.dtypes[c])) {
    if (bp.views[a] || bp.views[b])
      return make_error("kernel op #" + std::to_string(i) +
                        " (matmul): an operand is planned as a view read by cuBLAS, but the "
                        "matmul is not a cuBLAS call on its storage types");
    return std::optional<Launch>();
  }
  const std::optional<GemmOperand> ga = gemm_operand(g, a, bp.views[a]);
  const std::optional<GemmOperand> gb = gemm_operand(g, b, bp.views[b]);
  if (!ga || !gb)
    return make_error("kernel op #" + std::to_string(i) +
                      " (matmul): an operand view cannot be read in place by cuBLAS");
  const int r = as.rank();
  Launch L;
  L.blas = true;
  L.gemm.a = *ga;
  L.gemm.b = *gb;
  L.args = {ga->storage, gb->storage, c};
  // A library epilogue: the call also reads the bias and writes the last absorbed op's result.
  const std::optional<LibraryEpilogue>& epilogue = bp.epilogues[i];
  if (epilogue) {
    L.gemm.bias = epilogue->bias;
    L.gemm.epilogue =
        (epilogue->bias >= 0 ? 1 : 0) | (epilogue->activation == EpilogueActivation::Relu   ? 2
                                         : epilogue->activation == EpilogueActivation::Gelu ? 4
                                                                                            : 0);
    L.gemm.workspace_offset = bp.epilogue_workspace[i];
    L.gemm.workspace_bytes = kLibraryWorkspaceBytes;
    L.args = {ga->storage, gb->storage};
    if (epilogue->bias >= 0) L.args.push_back(epilogue->bias);
    L.args.push_back(epilogue->result);
  }
  L.num_inputs = static_cast<int>(L.args.size()) - 1;  // A, B and the bias; then C
  L.gemm.m = as[r - 2];
  L.gemm.k = as[r - 1];
  L.gemm.n = bs[r - 1];
  for (int d = 0; d + 2 < r; ++d) L.gemm.batch *= as[d];
  L.name = epilogue ? "cublasLtMatmul" : "cublasGemmStridedBatchedEx";
  L.grid = Dim3{1, 1, 1};
  L.comment = "kernel op #" + std::to_string(i) + ": matmul " + std::to_string(L.gemm.batch) +
              " × [" + std::to_string(L.gemm.m) + ", " + std::to_string(L.gemm.k) + "] · [" +
              std::to_string(L.gemm.k) + ", " + std::to_string(L.gemm.n) +
              "] through cuBLAS (row-major: C^T = B^T · A^T in cuBLAS's column-major terms)";
  for (const auto& [name, t] : {std::pair{"A", a}, std::pair{"B", b}})
    if (bp.views[t])
      L.comment += "; " + std::string(name) + " = " + g.tensor_name(t) + " read in place in " +
                   g.tensor_name(bp.views[t]->storage);
  if (epilogue) {
    L.comment += "; epilogue:";
    if (epilogue->bias >= 0) L.comment += " + " + g.tensor_name(epilogue->bias);
    if (epilogue->activation != EpilogueActivation::None)
      L.comment += epilogue->activation == EpilogueActivation::Relu ? ", relu" : ", gelu";
    L.comment += " (kernel op";
    for (int o : epilogue->absorbed) L.comment += " #" + std::to_string(o);
    L.comment += ") into " + g.tensor_name(epilogue->result);
  }
  EmittedKernel ek = emitted_kernel(L.name, std::string(op_name(op.kind)), L.grid, 0, 0);
  ek.library = true;
  ek.kernel_op = i;
  ek.args = L.args;
  for (int t : L.args) ek.arg_dtypes.push_back(bp.dtypes[t]);
  ek.num_inputs = static_cast<int>(L.args.size()) - 1;
  emitted.push_back(std::move(ek));
  return std::optional<Launch>(std::move(L));
}

/// Plans and writes the kernel of kernel op `i` into `kernels`; returns its launch. A customized
/// op (or a lowered matmul) is planned by the graph optimizer and emitted from its plan; a
/// lowered matmul whose plan fails, and every other predefined op, gets a generic kernel.
Result<Launch> emit_kernel(const KernelGraph& g, int i, const BufferPlan& bp,
                           const EmitOptions& options, const std::string& prefix,
                           CodeWriter& kernels, std::vector<EmittedKernel>& emitted) {
  const KernelOp& op = g.op(i);
  const std::string where =
      "kernel op #" + std::to_string(i) + " (" + std::string(op_name(op.kind)) + ")";
  std::shared_ptr<const BlockGraph> body = kernel_block_graph(g, i);
  Launch L;
  for (int t : op.inputs) L.args.push_back(bp.storage_of(t));
  L.num_inputs = static_cast<int>(L.args.size());
  for (int t : op.outputs) {
    if (!bp.routes[t]) {
      L.args.push_back(t);
      continue;
    }
    for (const RoutePart& part : bp.routes[t]->parts) L.args.push_back(part.tensor);  // the parts
  }
  L.comment = "kernel op #" + std::to_string(i) + ": " + std::string(op_name(op.kind));
  kernels.line("");
  if (body) {
    auto plan = plan_kernel_as_stored(g, op, body, bp, options.plan);
    if (plan.ok() || op.kind != OpKind::Matmul) {
      if (!plan.ok()) return make_error(where + ": " + plan.error().message);
      const Dim3 grid = body->grid();
      if (grid.y > 65535 || grid.z > 65535)
        return make_error(where + ": grid (" + std::to_string(grid.x) + ", " +
                          std::to_string(grid.y) + ", " + std::to_string(grid.z) +
                          ") exceeds CUDA's limit of 65535 blocks along y and z");
      const bool lowered = op.kind == OpKind::Matmul;
      std::vector<DType> in_t, out_t;
      for (int t : op.inputs) in_t.push_back(bp.dtypes[t]);
      for (int t : op.outputs) out_t.push_back(bp.dtypes[t]);
      codegen::BlockKernelInfo info{
          prefix + "_k" + std::to_string(i) + "_" + (lowered ? "matmul" : "customized"), in_t,
          out_t};
      const std::string title =
          "kernel op #" + std::to_string(i) + ": " +
          (lowered ? "matmul lowered to a tiled block graph" : "customized kernel");
      const TaskEntryForm form = options.task_entry;
      if (form != TaskEntryForm::Only)
        STRATA_RETURN_IF_ERROR(codegen::emit_block_kernel(*plan, info, title, kernels));
      std::string entry;
      if (form != TaskEntryForm::Off) {
        codegen::BlockKernelInfo task = info;
        task.name = info.name + "_task";
        task.task_entry = true;
        kernels.line("");
        STRATA_RETURN_IF_ERROR(
            codegen::emit_block_kernel(*plan, task, title + ", task entry", kernels));
        entry = task.name;
        if (form == TaskEntryForm::Beside) {
          L.task_wrapper = entry + "_kernel";
          emit_task_wrapper(entry, L.task_wrapper, in_t, out_t, options.task_threads, kernels);
        }
      }
      L.name = info.name;
      L.grid = grid;
      L.threads = plan->threads;
      L.smem = plan->smem_bytes;
      int streamed = options.l2_streaming ? streamed_input(g, op, *body, bp.reads, bp.dtypes,
                                                           options.l2_streaming_min_bytes)
                                          : -1;
      if (streamed >= 0 && bp.views[op.inputs[streamed]]) streamed = -1;  // not a whole tensor
      if (streamed >= 0) L.streamed = op.inputs[streamed];
      EmittedKernel ek =
          emitted_kernel(L.name, std::string(op_name(op.kind)), L.grid, L.threads, L.smem);
      ek.pipeline_stages = plan->pipeline_stages;
      ek.loop_groups = plan->groups;
      ek.plan = format_plan(*plan);
      ek.streamed_input = streamed;
      ek.kernel_op = i;
      ek.args = L.args;
      for (int t : L.args) ek.arg_dtypes.push_back(bp.dtypes[t]);
      ek.num_inputs = static_cast<int>(op.inputs.size());
      ek.task_entry = entry;
      emitted.push_back(std::move(ek));
      return L;
    }
  }
  if (options.task_entry != TaskEntryForm::Off)
    return make_error(where + ": a task entry is emitted for customized kernels only (" +
                      (body ? "its lowered block graph was not planned" : "a generic kernel") +
                      "); expected a graph of customized kernels");
  codegen::PredefinedLaunch pl;
  L.name = prefix + "_k" + std::to_string(i) + "_" + std::string(op_name(op.kind));
  STRATA_RETURN_IF_ERROR(codegen::emit_predefined_kernel(g, i, bp.dtypes, L.name, kernels, pl));
  L.grid = {static_cast<int>(pl.blocks), 1, 1};
  L.threads = pl.threads;
  L.smem = 0;
  emitted.push_back(emitted_kernel(L.name, std::string(op_name(op.kind)), L.grid, L.threads, 0));
  return L;
}

/// The `// strata-meta: {json}` document: inputs, outputs, workspace, kernels.
nlohmann::ordered_json metadata(const KernelGraph& g, const BufferPlan& bp,
                                const std::vector<Launch>& launches, const EmitOptions& options) {
  nlohmann::ordered_json meta;
  meta["graph"] = options.name;
  meta["arch"] = options.arch;
  meta["inputs"] = nlohmann::ordered_json::array();
  for (int t : g.inputs()) meta["inputs"].push_back(tensor_meta(g, t, bp.dtypes[t]));
  meta["outputs"] = nlohmann::ordered_json::array();
  const std::vector<OutputLayout> layouts = output_layouts(g, bp.packed);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const int t = g.outputs()[i];
    nlohmann::ordered_json o = tensor_meta(g, t, bp.dtypes[t]);
    const OutputLayout& l = layouts[i];
    if (l.base != static_cast<int>(i) || l.alloc != g.tensor(t).shape.numel())
      o["layout"] = {{"base", l.base}, {"offset", l.offset}, {"strides", l.strides},
                     {"alloc", l.alloc}};
    meta["outputs"].push_back(std::move(o));
  }
  meta["workspace_bytes"] = bp.workspace;
  meta["ranks"] = g.ranks();
  meta["nccl"] = uses_nccl(launches);
  meta["cublas"] = uses_cublas(launches);
  meta["kernels"] = nlohmann::ordered_json::array();
  for (const Launch& l : launches)
    meta["kernels"].push_back({{"name", l.name},
                               {"grid", {l.grid.x, l.grid.y, l.grid.z}},
                               {"block", l.threads},
                               {"smem", l.smem}});
  return meta;
}

/// The header comment: provenance, build line, metadata, the kernel graph's listing.
void emit_header(const KernelGraph& g, const nlohmann::ordered_json& meta,
                 const EmitOptions& options, bool nccl, bool cublas, CodeWriter& w) {
  w.comment("Generated by strata " STRATA_VERSION " from the μGraph \"" + options.name +
            "\". Do not edit.");
  w.comment("Target " + options.arch + " (any sm_80 or newer GPU). Build, for example:");
  w.comment("  nvcc -std=c++17 -O3 -arch=" + options.arch +
            " -I <strata>/runtime -shared -Xcompiler -fPIC -o graph.so graph.cu" +
            (nccl ? " -I <nccl>/include -L <nccl>/lib -l:libnccl.so.2" : "") +
            (cublas ? " -lcublas -lcublasLt" : ""));
  w.comment("strata-meta: " + meta.dump());
  w.line("//");
  std::istringstream listing(kernel_graph_listing(g));
  for (std::string l; std::getline(listing, l);) w.comment("  " + l);
}

/// The tables of tensor names, ranks, dims and dtypes the query functions read; with `nccl`,
/// before them the communicator of the tensor-parallel group; with side streams in `plan`, the
/// graph's LaunchStreams.
void emit_tensor_tables(const KernelGraph& g, const BufferPlan& bp, bool nccl,
                        const LaunchStreamPlan& plan, CodeWriter& w) {
  namespace ir = codegen::ir;
  w.open("namespace");
  if (plan.side_streams > 0) {
    w.comment("The side streams and events of the concurrent launches, per device.");
    w.line("strata_rt::host::LaunchStreams g_streams(" + std::to_string(plan.side_streams) + ", " +
           std::to_string(plan.events) + ");");
  }
  if (nccl) {
    w.comment("The communicator of the tensor-parallel group (docs/tensor-parallel.md).");
    w.add(ir::decl("ncclComm_t", "g_comm", ir::var("nullptr")));
    w.add(ir::decl("bool", "g_own_comm", ir::var("false")));
    w.add(ir::decl("constexpr int", "kNcclError", 10000, "+ ncclResult_t"));
  }
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
             std::to_string(dtype_code(bp.dtypes[t])) + "},");
    }
    w.close(";");
  };
  table("kInputs", g.inputs());
  table("kOutputs", g.outputs());
  w.line("struct StrataOutputLayout {");
  w.line("  int base;  // the output whose pointer starts this output's allocation");
  w.line("  long long offset;  // elements from that pointer");
  w.line("  long long strides[4];");
  w.line("  long long alloc;  // elements to allocate at this output's own pointer");
  w.line("};");
  w.open("const StrataOutputLayout kOutputLayouts[] =");
  for (const OutputLayout& l : output_layouts(g, bp.packed)) {
    std::string strides;
    for (int d = 0; d < 4; ++d)
      strides += (d ? ", " : "") +
                 std::to_string(d < static_cast<int>(l.strides.size()) ? l.strides[d] : 1);
    w.line("{" + std::to_string(l.base) + ", " + std::to_string(l.offset) + ", {" + strides +
           "}, " + std::to_string(l.alloc) + "},");
  }
  w.close(";");
  w.close("  // namespace");
}

/// The host API's error code of an NCCL result `r`: kNcclError + r.
codegen::ir::Expr nccl_error(const codegen::ir::Expr& r) {
  namespace ir = codegen::ir;
  return ir::binary("+", ir::var("kNcclError"), ir::static_cast_to("int", r));
}

/// `r == ncclSuccess ? 0 : kNcclError + r`.
codegen::ir::Expr nccl_status(const codegen::ir::Expr& r) {
  namespace ir = codegen::ir;
  return ir::select(ir::eq(r, ir::var("ncclSuccess")), 0, nccl_error(r));
}

/// An all_reduce launch: ncclAllReduce (sum) of args[0] into args[1] on the launch stream, in
/// the tensors' one dtype (all_reduce_launch checked it).
void emit_all_reduce(const KernelGraph& g, const BufferPlan& bp, const Launch& l, CodeWriter& w) {
  namespace ir = codegen::ir;
  const int in = l.args[0], out = l.args[1];
  const ir::Expr r = ir::var("r");
  w.open("");
  w.add(ir::decl("const ncclResult_t", "r",
                 ir::call("ncclAllReduce", {ir::var(var(in)), ir::var(var(out)),
                                            ir::int_lit(g.tensor(in).shape.numel(), "ULL"),
                                            ir::var(nccl_type(bp.dtypes[in])), ir::var("ncclSum"),
                                            ir::var("g_comm"), ir::var("stream")})));
  w.add(ir::if_compact(ir::ne(r, ir::var("ncclSuccess")), ir::ret(nccl_error(r))));
  w.close();
}

/// The host API's dtype code of `t` (strata_rt::host::BlasType, the same numbers).
codegen::ir::Expr blas_type(DType t) {
  namespace ir = codegen::ir;
  return ir::var(t == DType::f16    ? "strata_rt::host::kBlasF16"
                 : t == DType::bf16 ? "strata_rt::host::kBlasBf16"
                                    : "strata_rt::host::kBlasF32");
}

/// A cuBLAS launch: C = A · B for row-major A [batch, M, K], B [batch, K, N], C [batch, M, N].
/// cuBLAS is column-major, where a row-major C is C^T (N × M, leading dimension N), so the call
/// computes C^T = B^T · A^T: cuBLAS's m, n, k are N, M, K, its A is our B, its B our A. A
/// row-major operand with ld elements between rows is its transpose in column-major terms with
/// leading dimension ld: not transposed for cuBLAS (CUBLAS_OP_N). An operand stored transposed
/// (a transpose view, GemmOperand::transposed) is the operand itself in column-major terms:
/// CUBLAS_OP_T. A view starts at its storage's pointer plus its offset. On plan stream `stream`
/// (launch_streams.h) through that stream's handle.
void emit_blas_gemm(const BufferPlan& bp, const Launch& l, int stream, CodeWriter& w) {
  namespace ir = codegen::ir;
  const int c = l.args.back();
  const Launch::Gemm& G = l.gemm;
  auto ll = [](int64_t v) { return ir::int_lit(v, "LL"); };
  auto pointer = [&](const GemmOperand& o) {
    return o.offset == 0 ? ir::var(var(o.storage))
                         : ir::binary("+", ir::var(var(o.storage)), ll(o.offset));
  };
  auto trans = [](const GemmOperand& o) { return ir::var(o.transposed ? "true" : "false"); };
  std::vector<ir::Expr> args = {trans(G.b),
                                trans(G.a),
                                G.n,
                                G.m,
                                G.k,
                                pointer(G.b),
                                blas_type(bp.dtypes[G.b.storage]),
                                G.b.ld,
                                ll(G.b.stride),
                                pointer(G.a),
                                blas_type(bp.dtypes[G.a.storage]),
                                G.a.ld,
                                ll(G.a.stride),
                                ir::var(var(c)),
                                blas_type(bp.dtypes[c]),
                                G.n,
                                ll(G.m * G.n),
                                G.batch};
  // With an epilogue: the bias (N elements: cuBLAS's rows), the epilogue's bits and the call's
  // workspace slot (cuBLASLt).
  if (G.epilogue != 0) {
    args.push_back(G.bias >= 0 ? ir::var(var(G.bias)) : ir::var("nullptr"));
    args.push_back(G.epilogue);
    args.push_back(ir::binary("+", ir::var("ws"), ir::int_lit(G.workspace_offset)));
    args.push_back(ir::int_lit(G.workspace_bytes, "ULL"));
  }
  args.push_back(stream_expr(stream));
  if (stream > 0) args.push_back(ir::int_lit(stream));  // the handle of side stream `stream`
  w.open("");
  w.add(ir::decl("const int", "err",
                 ir::call(G.epilogue != 0 ? "strata_rt::host::gemm_epilogue"
                                          : "strata_rt::host::gemm_strided_batched",
                          args)));
  w.add(ir::if_compact(ir::ne(ir::var("err"), 0), ir::ret(ir::var("err"))));
  w.close();
}

/// The cuBLAS handles strata_init creates: one per plan stream up to the last stream a cuBLAS
/// call of `launches` (planned by `plan`) runs on; 0 without cuBLAS calls.
int blas_slots(const std::vector<Launch>& launches, const LaunchStreamPlan& plan) {
  int slots = 0;
  for (size_t j = 0; j < launches.size(); ++j)
    if (launches[j].blas) slots = std::max(slots, plan.stream[j] + 1);
  return slots;
}

/// strata_init: creates the cuBLAS handles where the graph has cuBLAS calls (`blas_slots`: one
/// per plan stream that has them, blas.cuh) and the side streams and events of `plan`, raises
/// the dynamic shared-memory limit of every kernel above 48 KB.
void emit_init(const std::vector<Launch>& launches, const LaunchStreamPlan& plan, int blas_slots,
               CodeWriter& w) {
  namespace ir = codegen::ir;
  const ir::Expr err = ir::var("err");
  w.open("extern \"C\" int strata_init(void)");
  w.add(ir::decl("int", "err", 0));
  if (uses_cublas(launches)) {
    w.comment("the current device's cuBLAS handle, created here, before any CUDA-graph capture");
    if (blas_slots <= 1)
      w.add(ir::assign(err, ir::call("strata_rt::host::blas_init")));
    else
      w.add(ir::assign(err, ir::call("strata_rt::host::blas_init", {blas_slots}), "=",
                       "one per plan stream calling cuBLAS"));
  }
  if (plan.side_streams > 0) {
    w.comment("the current device's side streams and events (concurrent launches)");
    w.add(ir::if_compact(ir::eq(err, 0), ir::assign(err, ir::call("g_streams.init"))));
  }
  for (const Launch& l : launches)
    if (l.smem > 48 * 1024)
      w.add(ir::if_compact(ir::eq(err, 0),
                           ir::assign(err, ir::call("strata_rt::host::allow_dynamic_smem",
                                                    {ir::var(l.name), l.smem}))));
  w.add(ir::ret(err));
  w.close();
}

/// One launch on plan stream `stream` (stream_expr): an all_reduce (always stream 0, a barrier),
/// a cuBLAS call, a kernel (with its L2 streaming window where one is marked).
void emit_one_launch(const KernelGraph& g, const BufferPlan& bp, const Launch& l, int stream,
                     CodeWriter& w) {
  namespace ir = codegen::ir;
  if (l.all_reduce) {
    emit_all_reduce(g, bp, l, w);
    return;
  }
  if (l.blas) {
    emit_blas_gemm(bp, l, stream, w);
    return;
  }
  std::vector<ir::Expr> args = {ir::var(l.name), ir::call("dim3", {l.grid.x, l.grid.y, l.grid.z}),
                                ir::call("dim3", {l.threads}), l.smem, stream_expr(stream)};
  if (l.streamed < 0) {
    for (int t : l.args) args.push_back(ir::var(var(t)));
    w.call("STRATA_RT_LAUNCH", args);
    return;
  }
  const int t = l.streamed;
  const int64_t bytes = g.tensor(t).shape.numel() * dtype_size(bp.dtypes[t]);
  w.comment(g.tensor_name(t) + " (" + std::to_string(bytes) +
            " bytes) is read once, each byte by one block: L2 evicts its lines first");
  w.open("");
  args.push_back(ir::var(var(t)));
  args.push_back(ir::int_lit(bytes, "ULL"));
  for (int a : l.args) args.push_back(ir::var(var(a)));
  w.add(ir::decl("const int", "err", ir::call("strata_rt::host::launch_streaming", args)));
  w.add(ir::if_compact(ir::ne(ir::var("err"), 0), ir::ret(ir::var("err"))));
  w.close();
}

/// The flag of packed tensor `t` in strata_launch: whether the caller's outputs are packed.
std::string packed_flag(int t) {
  return "packed" + std::to_string(t);
}

/// The pointer of packed tensor `t` (packed_outputs.h) in strata_launch: the base output's when
/// every part's output pointer lies where the layout puts it (the flag packed_flag(t)), else its
/// workspace slot, from which the fallback copies fill the outputs.
void emit_packed_pointer(const KernelGraph& g, const BufferPlan& bp, int t, CodeWriter& w) {
  namespace ir = codegen::ir;
  const PackedOutput& p = *bp.packed[t];
  const std::string T = codegen::cuda_type(bp.dtypes[t]);
  const std::vector<OutputLayout> layouts = output_layouts(g, bp.packed);
  auto bytes_of = [](int o) {
    return ir::static_cast_to("const char*", ir::index(ir::var("outputs"), o));
  };
  const int base = p.parts.front().output;
  std::string parts;
  std::optional<ir::Expr> packed;
  for (const PackedPart& part : p.parts) {
    parts += (parts.empty() ? "" : ", ") + g.tensor_name(part.tensor);
    if (part.output == base) continue;
    const ir::Expr at = ir::eq(bytes_of(part.output),
                               ir::binary("+", bytes_of(base),
                                         ir::int_lit(layouts[part.output].offset *
                                                     dtype_size(bp.dtypes[t]))));
    packed = packed ? ir::land(*packed, at) : at;
  }
  w.comment(g.tensor_name(t) + ": outputs " + parts +
            " are its slices; packed when the caller lays them out in one allocation "
            "(docs/codegen.md, \"Packed outputs\")");
  w.add(ir::decl("const bool", packed_flag(t), packed ? *packed : ir::var("true")));
  w.add(ir::decl(
      T + "*", var(t),
      ir::select(ir::var(packed_flag(t)),
                 ir::static_cast_to(T + "*", ir::index(ir::var("outputs"), base)),
                 ir::reinterpret_cast_to(
                     T + "*", ir::binary("+", ir::var("ws"), ir::int_lit(bp.buf[t].offset)))),
      g.tensor_name(t) + " (packed outputs, or the workspace)"));
}

/// strata_launch: the tensors' pointers (inputs, outputs, workspace slots), every kernel's launch
/// (with the L2 streaming window where one is marked) on its plan stream with the plan's event
/// records and waits (launch_streams.h; none when every launch is on the caller's stream), the
/// join of the side streams, the copies of outputs that are inputs.
void emit_launch(const KernelGraph& g, const BufferPlan& bp, const std::vector<Launch>& launches,
                 const std::vector<Launch>& fallback, const LaunchStreamPlan& plan, CodeWriter& w,
                 const std::string& function = "strata_launch") {
  namespace ir = codegen::ir;
  const int ntensors = static_cast<int>(g.tensors().size());
  w.open("extern \"C\" int " + function +
         "(const void* const* inputs, void* const* outputs, void* "
         "workspace, cudaStream_t stream)");
  w.add(ir::decl("static const int", "init", ir::call("strata_init")));
  w.add(ir::if_compact(ir::ne(ir::var("init"), 0), ir::ret(ir::var("init"))));
  // The workspace pointer is named only when an intermediate lives there (an unused local
  // would draw nvcc's "set but never used" warning).
  bool uses_workspace = false;
  for (int t = 0; t < ntensors; ++t)
    uses_workspace |= bp.buf[t].kind == Buffer::Workspace && !bp.views[t];
  for (const Launch& l : launches) uses_workspace |= l.blas && l.gemm.epilogue != 0;
  if (uses_workspace)
    w.add(ir::decl("unsigned char*", "ws",
                   ir::static_cast_to("unsigned char*", ir::var("workspace"))));
  else
    w.add(ir::eval(ir::c_cast("void", ir::var("workspace"))));
  w.add(ir::eval(ir::c_cast("void", ir::var("outputs"))));
  for (int t = 0; t < ntensors; ++t) {
    if (bp.views[t]) continue;  // read in place: its readers get the tensor holding it
    if (bp.buf[t].kind == Buffer::Routed) continue;    // written into its parts
    if (bp.buf[t].kind == Buffer::Absorbed) continue;  // never stored: a library epilogue's
    const std::string T = codegen::cuda_type(bp.dtypes[t]);
    const Buffer& b = bp.buf[t];
    if (b.kind == Buffer::Input)
      w.add(ir::decl("const " + T + "*", var(t),
                     ir::static_cast_to("const " + T + "*", ir::index(ir::var("inputs"), b.index)),
                     g.tensor_name(t)));
    else if (b.kind == Buffer::Output)
      w.add(ir::decl(T + "*", var(t),
                     ir::static_cast_to(T + "*", ir::index(ir::var("outputs"), b.index)),
                     g.tensor_name(t)));
    else if (bp.packed[t])
      emit_packed_pointer(g, bp, t, w);
    else
      w.add(ir::decl(
          T + "*", var(t),
          ir::reinterpret_cast_to(T + "*", ir::binary("+", ir::var("ws"), ir::int_lit(b.offset))),
          g.tensor_name(t) + " (intermediate)"));
    w.add(ir::eval(ir::c_cast("void", ir::var(var(t)))));
  }
  if (uses_nccl(launches))
    w.add(ir::if_compact(ir::eq(ir::var("g_comm"), ir::var("nullptr")),
                         ir::ret(nccl_error(ir::var("ncclInvalidUsage")))));
  const bool fork = plan.side_streams > 0;
  if (fork) {
    w.comment("concurrent launches (docs/codegen.md): " + std::to_string(plan.side_streams) +
              " side stream(s) forked from the caller's stream, " + std::to_string(plan.events) +
              " event(s)");
    w.line("strata_rt::host::StreamFork fork(g_streams, stream);");
    w.add(ir::if_compact(ir::ne(ir::call("fork.error"), 0), ir::ret(ir::call("fork.error"))));
    if (plan.entry_event >= 0) w.call("fork.record", {plan.entry_event, 0});
  }
  for (size_t j = 0; j < launches.size(); ++j) {
    const Launch& l = launches[j];
    const int s = plan.stream[j];
    w.comment(l.comment + (fork ? " [stream " + std::to_string(s) + "]" : ""));
    for (int e : plan.waits[j]) w.call("fork.wait", {s, e});
    emit_one_launch(g, bp, l, s, w);
    if (plan.records[j] >= 0) w.call("fork.record", {plan.records[j], s});
  }
  if (!plan.joins.empty()) {
    w.comment("the side streams join the caller's stream");
    for (int e : plan.joins) w.call("fork.wait", {0, e});
  }
  // The fallback copies of packed outputs, after everything on the caller's stream: each reads
  // its packed tensor, complete by now, and writes an output nothing reads.
  for (size_t j = 0; j < fallback.size(); ++j) {
    const Launch& l = fallback[j];
    if (j == 0 || fallback[j - 1].packed_guard != l.packed_guard) {
      w.comment("the caller's outputs are not packed: copy each slice of " +
                g.tensor_name(l.packed_guard) + " into its output");
      w.open(ir::if_then(ir::unary("!", ir::var(packed_flag(l.packed_guard)))));
    }
    w.comment(l.comment);
    emit_one_launch(g, bp, l, 0, w);
    if (j + 1 == fallback.size() || fallback[j + 1].packed_guard != l.packed_guard) w.close();
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    int t = g.outputs()[i];
    if (!bp.is_input[t]) continue;
    w.comment("output " + g.tensor_name(t) + " is an input: copy it");
    w.open("");
    w.add(
        ir::decl("const int", "err",
                 ir::call("strata_rt::host::copy_device",
                          {ir::index(ir::var("outputs"), static_cast<int64_t>(i)), ir::var(var(t)),
                           ir::int_lit(g.tensor(t).shape.numel() * dtype_size(bp.dtypes[t]), "ULL"),
                           ir::var("stream")})));
    w.add(ir::if_compact(ir::ne(ir::var("err"), 0), ir::ret(ir::var("err"))));
    w.close();
  }
  if (fork)
    w.add(ir::ret(ir::call("fork.finish", {ir::call("strata_rt::host::last_error")})));
  else
    w.add(ir::ret(ir::call("strata_rt::host::last_error")));
  w.close();
}

/// The NCCL part of the host API (cuda_emitter.h): a unique id, a communicator of its own
/// (init, finalize) or the caller's (set_comm, comm).
void emit_nccl_api(const KernelGraph& g, CodeWriter& w) {
  namespace ir = codegen::ir;
  const ir::Expr r = ir::var("r"), g_comm = ir::var("g_comm"), own = ir::var("g_own_comm");
  const ir::Expr null = ir::var("nullptr"), success = ir::var("ncclSuccess");
  const ir::Expr nranks = ir::var("nranks"), rank = ir::var("rank");
  w.open("extern \"C\" int strata_nccl_unique_id(void* id)");
  w.add(
      ir::decl("const ncclResult_t", "r",
               ir::call("ncclGetUniqueId", {ir::static_cast_to("ncclUniqueId*", ir::var("id"))})));
  w.add(ir::ret(nccl_status(r)));
  w.close();
  w.open("extern \"C\" int strata_nccl_finalize(void)");
  w.add(ir::decl("ncclResult_t", "r", success));
  w.add(ir::if_compact(ir::land(own, ir::ne(g_comm, null)),
                       ir::assign(r, ir::call("ncclCommDestroy", {g_comm}))));
  w.add(ir::assign(g_comm, null));
  w.add(ir::assign(own, ir::var("false")));
  w.add(ir::ret(nccl_status(r)));
  w.close();
  w.comment("nranks must be the graph's ranks (" + std::to_string(g.ranks()) +
            "); rank in [0, nranks).");
  w.open("extern \"C\" int strata_nccl_init(const void* id, int nranks, int rank)");
  w.add(ir::if_compact(ir::lor(ir::lor(ir::ne(nranks, g.ranks()), rank < 0), rank >= nranks),
                       ir::ret(nccl_error(ir::var("ncclInvalidArgument")))));
  w.call("strata_nccl_finalize");
  w.add(ir::decl("ncclUniqueId", "uid"));
  w.call("std::memcpy", {ir::addr(ir::var("uid")), ir::var("id"), ir::verbatim("sizeof uid")});
  w.add(ir::decl("const ncclResult_t", "r",
                 ir::call("ncclCommInitRank", {ir::addr(g_comm), nranks, ir::var("uid"), rank})));
  w.open(ir::if_then(ir::ne(r, success)));
  w.add(ir::assign(g_comm, null));
  w.add(ir::ret(nccl_error(r)));
  w.close();
  w.add(ir::assign(own, ir::var("true")));
  w.add(ir::ret(0));
  w.close();
  w.line("extern \"C\" void* strata_nccl_comm(void) { return g_comm; }");
  w.open("extern \"C\" int strata_nccl_set_comm(void* comm)");
  w.call("strata_nccl_finalize");
  w.add(ir::assign(g_comm, ir::static_cast_to("ncclComm_t", ir::var("comm"))));
  w.add(ir::ret(0));
  w.close();
}

/// The query functions: workspace bytes, tensor counts, names, ranks, dims, dtypes; with
/// `nccl`, the NCCL functions (emit_nccl_api).
void emit_queries(const KernelGraph& g, const BufferPlan& bp, bool nccl, CodeWriter& w) {
  w.line("extern \"C\" unsigned long long strata_workspace_bytes(void) { return " +
         std::to_string(bp.workspace) + "ULL; }");
  const std::string ni = std::to_string(g.inputs().size()), no = std::to_string(g.outputs().size());
  w.line("extern \"C\" int strata_num_inputs(void) { return " + ni + "; }");
  w.line("extern \"C\" int strata_ranks(void) { return " + std::to_string(g.ranks()) + "; }");
  if (nccl) emit_nccl_api(g, w);
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
  // The outputs' layout (docs/codegen.md, "Packed outputs").
  const std::string in_range = "i >= 0 && i < " + no;
  w.line("extern \"C\" int strata_output_base(int i) { return " + in_range +
         " ? kOutputLayouts[i].base : -1; }");
  w.line("extern \"C\" long long strata_output_offset(int i) { return " + in_range +
         " ? kOutputLayouts[i].offset : -1; }");
  w.line("extern \"C\" long long strata_output_stride(int i, int d) { return " + in_range +
         " && d >= 0 && d < kOutputs[i].rank ? kOutputLayouts[i].strides[d] : -1; }");
  w.line("extern \"C\" long long strata_output_alloc(int i) { return " + in_range +
         " ? kOutputLayouts[i].alloc : -1; }");
}

/// The host API (guarded from NVRTC): tables, strata_init, strata_launch, the queries.
void emit_host_api(const KernelGraph& g, const BufferPlan& bp, const std::vector<Launch>& launches,
                   const std::vector<Launch>& fallback, const LaunchStreamPlan& plan,
                   int task_threads, CodeWriter& w) {
  w.line("");
  w.comment("---- host API (see include/strata/codegen/cuda_emitter.h) ----");
  w.line("#if !defined(__CUDACC_RTC__)");
  w.line("#include \"strata_rt/host.cuh\"");
  const bool nccl = uses_nccl(launches);
  if (nccl) {
    w.line("#include <nccl.h>");
    w.line("#include <cstring>");
  }
  if (uses_cublas(launches)) w.line("#include \"strata_rt/blas.cuh\"");
  if (plan.side_streams > 0) w.line("#include \"strata_rt/streams.cuh\"");
  w.line("");
  emit_tensor_tables(g, bp, nccl, plan, w);
  w.line("");
  // EmitOptions::task_entry Beside: the task entries' wrappers, launched like the kernels.
  std::vector<Launch> tasks;
  for (const Launch& l : launches) {
    if (l.task_wrapper.empty()) continue;
    Launch t = l;
    t.name = l.task_wrapper;
    t.threads = task_threads;
    t.streamed = -1;
    t.comment = l.comment + " (its task entry)";
    tasks.push_back(std::move(t));
  }
  std::vector<Launch> all = launches;
  all.insert(all.end(), tasks.begin(), tasks.end());
  all.insert(all.end(), fallback.begin(), fallback.end());
  emit_init(all, plan, blas_slots(launches, plan), w);
  w.line("");
  emit_launch(g, bp, launches, fallback, plan, w);
  w.line("");
  if (!tasks.empty()) {
    w.comment("strata_launch with every kernel's task entry in blocks of " +
              std::to_string(task_threads) + " threads (EmitOptions::task_entry).");
    // The wrappers are the launches one for one (every kernel op of a task-entry graph is a
    // customized kernel), so they keep the launches' plan.
    emit_launch(
        g, bp, tasks,
        {}, tasks.size() == launches.size() ? plan : plan_launch_streams(launch_accesses(tasks), 0),
        w, "strata_launch_tasks");
    w.line("");
  }
  emit_queries(g, bp, nccl, w);
  w.line("#endif  // !__CUDACC_RTC__");
}

}  // namespace

Status plan_customized_kernels(const KernelGraph& g, const EmitOptions& given) {
  EmitOptions options = given;
  if (options.arch != "sm_90a") options.plan.wgmma = false;  // as emit_cuda_source
  const BufferPlan bp = plan_buffers(g, options);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (op.kind != OpKind::Customized) continue;
    auto plan = plan_kernel_as_stored(g, op, op.body, bp, options.plan);
    if (!plan.ok())
      return make_error("kernel op #" + std::to_string(i) +
                        " (customized): " + plan.error().message);
  }
  return Status::success();
}

Result<EmittedSource> emit_cuda_source(const KernelGraph& g, const EmitOptions& given) {
  STRATA_RETURN_IF_ERROR(g.check_complete());
  EmitOptions options = given;
  // Warpgroup MMA exists on sm_90a only: for any other target the knob changes nothing.
  if (options.arch != "sm_90a") options.plan.wgmma = false;
  if (options.max_side_streams < 0 || options.max_side_streams > 4)
    return make_error("side streams: expected 0 to 4 (strata_rt::host::kMaxSideStreams), got " +
                      std::to_string(options.max_side_streams));
  if (options.task_entry != TaskEntryForm::Off) {
    if (options.task_threads < 32 || options.task_threads > 1024 || options.task_threads % 32)
      return make_error("task entry threads: expected a multiple of 32 in [32, 1024], got " +
                        std::to_string(options.task_threads));
    options.plan.task_entry = true;
    options.plan.max_threads = std::min(options.plan.max_threads, options.task_threads);
  }
  const BufferPlan bp = plan_buffers(g, options);
  const std::string prefix = codegen::identifier("strata_", options.name);
  CodeWriter kernels;
  std::vector<Launch> launches;
  std::vector<Launch> fallback;  ///< the copies of packed outputs (Launch::packed_guard)
  EmittedSource result;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    if (g.op(i).kind == OpKind::Input || is_kernel_view(g, bp.views, i) ||
        is_routed_slice(g, bp.routes, i) || is_absorbed_epilogue(bp.epilogues, i))
      continue;
    STRATA_ASSIGN_OR_RETURN(std::optional<Launch> blas,
                            library_matmul_launch(g, i, bp, options, result.kernels));
    if (blas) {
      launches.push_back(std::move(*blas));
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(Launch L,
                            op_category(g.op(i).kind) == Category::Collective
                                ? all_reduce_launch(g, i, bp, options, result.kernels)
                                : emit_kernel(g, i, bp, options, prefix, kernels, result.kernels));
    if (is_packed_slice(g, bp.packed, i)) {
      L.packed_guard = g.op(i).inputs[0];
      fallback.push_back(std::move(L));
      continue;
    }
    launches.push_back(std::move(L));
  }
  CodeWriter w;
  // The fallback copies grouped by packed tensor (emit_launch opens one branch per tensor).
  std::stable_sort(fallback.begin(), fallback.end(), [](const Launch& a, const Launch& b) {
    return a.packed_guard < b.packed_guard;
  });
  std::vector<Launch> every = launches;
  every.insert(every.end(), fallback.begin(), fallback.end());
  emit_header(g, metadata(g, bp, every, options), options, uses_nccl(launches),
              uses_cublas(launches), w);
  w.line("#include \"strata_rt/strata_rt.cuh\"");
  w.add(kernels.root());
  if (options.task_entry != TaskEntryForm::Only) {
    result.launch_accesses = launch_accesses(launches);
    result.launch_streams = plan_launch_streams(result.launch_accesses, options.max_side_streams);
    emit_host_api(g, bp, launches, fallback, result.launch_streams, options.task_threads, w);
  }
  result.code = w.str();
  result.workspace_bytes = bp.workspace;
  result.output_layouts = output_layouts(g, bp.packed);
  return result;
}

bool nccl_configured() {
#if defined(STRATA_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

Result<std::string> emit_cuda(const KernelGraph& g, const EmitOptions& options) {
  STRATA_ASSIGN_OR_RETURN(EmittedSource s, emit_cuda_source(g, options));
  return std::move(s.code);
}

}  // namespace strata
