// Generated tasks (docs/megakernel.md, "Generated tasks"): op programs, verified μGraphs and
// their task entries.
#include "strata/mpk/generated_ops.h"

#include <algorithm>
#include <functional>

#include "strata/opt/kernel_views.h"
#include "strata/verify/verifier.h"

namespace strata::mpk {
namespace {

// The task entries' callers: the megakernel's workers (runtime/mpk/mpk_tasks.cuh kThreads).
constexpr int kCallerThreads = 256;

OpAttrs norm_attrs(double eps) {
  OpAttrs a;
  a.dim = 1;
  a.scalar = eps;
  return a;
}

// The kernel op `op` of `g` alone: inputs are the tensors holding its operands (args), layout
// ops read in place repeated, its outputs the graph's.
Result<KernelGraph> kernel_alone(const KernelGraph& g, int op, const std::vector<int>& args,
                                 const std::vector<strata::DType>& dtypes, int num_inputs) {
  KernelGraph k;
  std::map<int, int> mapped;
  for (int i = 0; i < num_inputs; ++i) {  // one input per argument, even a repeated one
    const int t = args[i];
    STRATA_ASSIGN_OR_RETURN(int id,
                            k.add_input("arg" + std::to_string(i), g.tensor(t).shape, dtypes[i]));
    mapped.emplace(t, id);
  }
  std::function<Result<int>(int)> map_tensor = [&](int t) -> Result<int> {
    if (auto it = mapped.find(t); it != mapped.end()) return it->second;
    const KernelOp& p = g.op(g.tensor(t).producer);
    if (op_category(p.kind) != Category::Layout || p.inputs.size() != 1)
      return make_error("kernel op #" + std::to_string(op) + ": operand " + g.tensor_name(t) +
                        " is neither a kernel argument nor a view of one");
    STRATA_ASSIGN_OR_RETURN(int in, map_tensor(p.inputs[0]));
    STRATA_ASSIGN_OR_RETURN(int v, k.add_op(p.kind, {in}, p.attrs));
    mapped[t] = v;
    return v;
  };
  std::vector<int> ins;
  for (int t : g.op(op).inputs) {
    STRATA_ASSIGN_OR_RETURN(int m, map_tensor(t));
    ins.push_back(m);
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<int> outs, k.add_customized(ins, *g.op(op).body));
  for (int o : outs) STRATA_RETURN_IF_ERROR(k.mark_output(o));
  return k;
}

}  // namespace

const std::vector<std::string>& generated_op_names() {
  static const std::vector<std::string> names = {"norm_qkv", "o_proj_residual", "norm_gate_up_silu",
                                                 "down_residual"};
  return names;
}

Result<KernelGraph> op_program(const ModelConfig& m, const std::string& name) {
  KernelGraph g;
  const int64_t B = m.batch, H = m.hidden;
  auto linear = [&](int x, int w) -> Result<int> {
    STRATA_ASSIGN_OR_RETURN(int wt, g.add_op(OpKind::Transpose, {w}));
    return g.add_op(OpKind::Matmul, {x, wt});
  };
  auto normed = [&](int x, int gain) -> Result<int> {
    STRATA_ASSIGN_OR_RETURN(int n, g.add_op(OpKind::RmsNorm, {x}, norm_attrs(m.eps)));
    return g.add_op(OpKind::Mul, {n, gain});
  };
  if (name == "norm_qkv" || name == "norm_gate_up_silu") {
    STRATA_ASSIGN_OR_RETURN(int x, g.add_input("x", Shape{B, H}, strata::DType::f16));
    STRATA_ASSIGN_OR_RETURN(int gain, g.add_input("gain", Shape{H}, strata::DType::f16));
    STRATA_ASSIGN_OR_RETURN(int n, normed(x, gain));
    if (name == "norm_qkv") {
      STRATA_ASSIGN_OR_RETURN(int w, g.add_input("w", Shape{m.qkv_width(), H}, strata::DType::f16));
      STRATA_ASSIGN_OR_RETURN(int y, linear(n, w));
      STRATA_RETURN_IF_ERROR(g.mark_output(y, "y"));
    } else {
      STRATA_ASSIGN_OR_RETURN(int wg,
                              g.add_input("w_gate", Shape{m.intermediate, H}, strata::DType::f16));
      STRATA_ASSIGN_OR_RETURN(int wu,
                              g.add_input("w_up", Shape{m.intermediate, H}, strata::DType::f16));
      STRATA_ASSIGN_OR_RETURN(int a, linear(n, wg));
      STRATA_ASSIGN_OR_RETURN(int b, linear(n, wu));
      STRATA_ASSIGN_OR_RETURN(int s, g.add_op(OpKind::Silu, {a}));
      STRATA_ASSIGN_OR_RETURN(int y, g.add_op(OpKind::Mul, {s, b}));
      STRATA_RETURN_IF_ERROR(g.mark_output(y, "y"));
    }
    return g;
  }
  if (name == "o_proj_residual" || name == "down_residual") {
    const int64_t K = name == "o_proj_residual" ? m.q_width() : m.intermediate;
    STRATA_ASSIGN_OR_RETURN(int a, g.add_input("a", Shape{B, K}, strata::DType::f16));
    STRATA_ASSIGN_OR_RETURN(int w, g.add_input("w", Shape{H, K}, strata::DType::f16));
    STRATA_ASSIGN_OR_RETURN(int r, g.add_input("residual", Shape{B, H}, strata::DType::f16));
    STRATA_ASSIGN_OR_RETURN(int p, linear(a, w));
    STRATA_ASSIGN_OR_RETURN(int y, g.add_op(OpKind::Add, {r, p}));
    STRATA_RETURN_IF_ERROR(g.mark_output(y, "y"));
    return g;
  }
  std::string known;
  for (const std::string& n : generated_op_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error("unknown generated op '" + name + "'; expected one of " + known);
}

Result<GeneratedGraph> prepare_generated(const ModelConfig& m, const std::string& op,
                                         const KernelGraph& graph, const std::string& where) {
  STRATA_ASSIGN_OR_RETURN(KernelGraph program, op_program(m, op));
  VerifyOptions vo;
  STRATA_ASSIGN_OR_RETURN(EquivalenceChecker checker, EquivalenceChecker::make(program, vo));
  auto verdict = checker.verify(graph);
  if (!verdict.ok()) return make_error(where + ": " + verdict.error().message);
  if (!verdict->equivalent)
    return make_error(where + ": the μGraph does not compute " + op + " at the model's shapes" +
                      (verdict->detail.empty() ? "" : " (" + verdict->detail + ")") +
                      "; expected the program " + op +
                      " (docs/megakernel.md, \"Generated tasks\")");
  EmitOptions eo;
  eo.name = "mpk_" + op;
  eo.task_entry = TaskEntryForm::Only;
  eo.task_threads = kCallerThreads;
  eo.l2_streaming = false;
  eo.nccl = false;
  auto src = emit_cuda_source(graph, eo);
  if (!src.ok()) return make_error(where + ": " + src.error().message);
  GeneratedGraph out;
  out.op = op;
  out.graph = graph;
  out.source = src->code;
  out.how = where;
  for (const EmittedKernel& k : src->kernels) {
    GeneratedKernel gk;
    gk.kernel_op = k.kernel_op;
    gk.entry = k.task_entry;
    gk.threads = k.threads;
    gk.smem_bytes = k.smem_bytes;
    gk.grid = k.grid;
    gk.args = k.args;
    gk.arg_dtypes = k.arg_dtypes;
    gk.num_inputs = k.num_inputs;
    if (static_cast<int>(gk.args.size()) > MPK_OP_MAX_ARGS)
      return make_error(where + ": kernel op #" + std::to_string(k.kernel_op) + " has " +
                        std::to_string(gk.args.size()) + " operands; a task takes at most " +
                        std::to_string(MPK_OP_MAX_ARGS));
    for (strata::DType t : gk.arg_dtypes)
      if (t == strata::DType::bf16)
        return make_error(where + ": bf16 operands are not supported; expected f16 or f32");
    STRATA_ASSIGN_OR_RETURN(
        gk.alone, kernel_alone(graph, k.kernel_op, gk.args, gk.arg_dtypes, gk.num_inputs));
    out.kernels.push_back(std::move(gk));
  }
  return out;
}

Result<GeneratedGraph> search_generated(const ModelConfig& m, const std::string& op,
                                        const SearchConfig& config) {
  STRATA_ASSIGN_OR_RETURN(KernelGraph program, op_program(m, op));
  STRATA_ASSIGN_OR_RETURN(SearchResult r, superoptimize(program, config));
  std::string last;
  for (const Candidate& c : r.ranked) {
    if (c.is_program) continue;
    auto g = prepare_generated(m, op, c.graph,
                               op + ": searched μGraph" + (r.from_cache ? " (cached)" : ""));
    if (g.ok()) return g;
    last = g.error().message;
  }
  return make_error(op + ": the search found no μGraph whose kernels all have task entries" +
                    (last.empty() ? "" : " (last refusal: " + last + ")") +
                    "; give one with --ugraph " + op + "=FILE");
}

int64_t generated_smem_bytes(const GeneratedSet& set) {
  int64_t m = 0;
  for (const auto& [name, g] : set)
    for (const GeneratedKernel& k : g.kernels) m = std::max(m, k.smem_bytes);
  return m;
}

std::string generated_header(const TaskGraph& g) {
  std::string h =
      "// Generated by strata mpk compile: the task entries of the ops computed by strata's "
      "code generator\n// (docs/megakernel.md, \"Generated tasks\"). Do not edit.\n#pragma once\n";
  std::vector<std::string> used;
  for (const GeneratedFunction& f : g.functions)
    if (std::find(used.begin(), used.end(), f.op) == used.end()) used.push_back(f.op);
  int64_t smem = 0;
  for (const std::string& op : used) {
    const GeneratedGraph& gg = g.options.generated->at(op);
    h += "\n// ---- " + op + " (" + gg.how + ")\n" + gg.source;
    for (const GeneratedKernel& k : gg.kernels) smem = std::max(smem, k.smem_bytes);
  }
  h += "\n#define MPK_GENERATED_SMEM_BYTES " + std::to_string(smem) + "\n";
  h += "#define MPK_GENERATED_FUNCTIONS " + std::to_string(g.functions.size()) + "\n\n";
  h += "// Calls task entry `func` for block (bx, by, bz) with its operands `args` (inputs, then\n"
       "// outputs) and the worker's shared memory. Every thread of the worker calls it.\n";
  h += "__device__ inline void mpk_generated_dispatch(int func, int bx, int by, int bz,\n"
       "                                              void* const* args, unsigned char* smem) {\n"
       "  switch (func) {\n";
  for (size_t f = 0; f < g.functions.size(); ++f) {
    const GeneratedKernel& k =
        g.options.generated->at(g.functions[f].op).kernels[g.functions[f].kernel];
    h += "    case " + std::to_string(f) + ":\n";
    h += "      static_assert(" + k.entry + "_threads <= 256, \"an entry fits a worker\");\n";
    h += "      " + k.entry + "(bx, by, bz";
    for (size_t a = 0; a < k.args.size(); ++a) {
      const std::string t = k.arg_dtypes[a] == strata::DType::f32 ? "float" : "__half";
      const bool in = static_cast<int>(a) < k.num_inputs;
      h += ", static_cast<" + std::string(in ? "const " : "") + t + "*>(args[" + std::to_string(a) +
           "])";
    }
    h += ", smem);\n      break;\n";
  }
  h += "    default:\n      break;\n  }\n}\n";
  return h;
}

}  // namespace strata::mpk
