// Tasks from strata's code generator (docs/megakernel.md, "Generated tasks"): the matmul-family
// ops of a decode step written as tensor programs, a verified μGraph per program, and each of
// its kernels emitted as task entries (docs/codegen.md, "Task entries") whose tasks are the
// kernel's blocks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/codegen/cuda_emitter.h"
#include "strata/ir/kernel_graph.h"
#include "strata/mpk/model_config.h"
#include "strata/mpk/task_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata::mpk {

/// The ops of a layer that may come from generated code, by name:
///   norm_qkv           y = matmul(rms_norm(x, eps) · gain, transpose(wqkv))
///   o_proj_residual    y = residual + matmul(a, transpose(wo))
///   norm_gate_up_silu  y = silu(matmul(n, transpose(w_gate))) · matmul(n, transpose(w_up)),
///                      n = rms_norm(x, eps) · gain
///   down_residual      y = residual + matmul(h, transpose(w_down))
/// Weights use the nn.Linear layout [out, in]; every tensor is f16.
const std::vector<std::string>& generated_op_names();

/// The program of op `name` at the model's decode shapes. Its inputs, in order, have the
/// names of their roles: x, gain, w (norm_qkv); a, w, residual (the residual ops); x, gain,
/// w_gate, w_up (the gated MLP); its output is y.
Result<KernelGraph> op_program(const ModelConfig& m, const std::string& name);

/// One kernel of a generated μGraph as the task graph uses it.
struct GeneratedKernel {
  int kernel_op = -1;  ///< the μGraph's op
  std::string entry;   ///< the task entry's name
  int threads = 0;
  int64_t smem_bytes = 0;
  Dim3 grid;
  std::vector<int> args;  ///< μGraph tensors: the entry's parameters (inputs, then outputs)
  std::vector<strata::DType> arg_dtypes;
  int num_inputs = 0;
  /// The kernel alone as a μGraph whose inputs are args[0, num_inputs) (the tensors holding
  /// them: layout ops read in place are repeated inside) and outputs the rest: the float64
  /// task executor runs it.
  KernelGraph alone;
};

/// A verified μGraph of an op program, emitted as task entries.
struct GeneratedGraph {
  std::string op;  ///< generated_op_names() entry
  KernelGraph graph;
  std::string source;  ///< the task entries (TaskEntryForm::Only)
  std::vector<GeneratedKernel> kernels;
  std::string how;  ///< where the μGraph came from ("file F", "search", …)
};

/// The generated μGraphs of a compilation, by op name.
using GeneratedSet = std::map<std::string, GeneratedGraph>;

/// Checks that `graph` computes op `op`'s program at the model's shapes (same inputs and
/// outputs; equivalence verified to a 2^-60 bound, docs/verifier.md) and that every kernel has
/// a task entry for 256-thread callers, then emits them. Errors name `where`.
Result<GeneratedGraph> prepare_generated(const ModelConfig& m, const std::string& op,
                                         const KernelGraph& graph, const std::string& where);

/// Runs the search on op `op`'s program with `config` (its time limit and result cache) and
/// takes the best-ranked candidate whose kernels all have task entries (then prepare_generated).
Result<GeneratedGraph> search_generated(const ModelConfig& m, const std::string& op,
                                        const SearchConfig& config);

/// Dynamic shared memory the generated header's entries need at most.
int64_t generated_smem_bytes(const GeneratedSet& set);

/// The generated header of a compiled task graph (`strata mpk compile --cuda`): the task
/// entries of every μGraph its MPK_GENERATED ops use, MPK_GENERATED_SMEM_BYTES (the most
/// dynamic shared memory one needs) and
///   __device__ void mpk_generated_dispatch(int func, int bx, int by, int bz,
///                                          void* const* args, unsigned char* smem);
/// which calls entry `func` (TaskGraph::functions) with the operand pointers `args`.
/// runtime/mpk/megakernel.cu includes it when built with -DSTRATA_MPK_GENERATED_HEADER=FILE.
std::string generated_header(const TaskGraph& g);

}  // namespace strata::mpk
