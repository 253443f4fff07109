// Test support: the kernel IR (src/codegen/cuda_ir.h) the emitter builds for the customized
// kernels of a graph, and queries over its statements and expressions, so that tests check the
// structure of emitted kernels rather than substrings of their text.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/block_emitter.h"
#include "codegen/cuda_ir.h"
#include "strata/opt/graph_optimizer.h"
#include "support/benchmark_graphs.h"

namespace strata::testing {

namespace ir = codegen::ir;

/// The statements of the customized kernels of g (all of them, or the first when `first_only`),
/// each planned with `opts` as the emitter plans it.
inline ir::Stmt kernel_ir(const KernelGraph& g, const PlanOptions& opts = {},
                          bool first_only = true) {
  codegen::CodeWriter w;
  int n = 0;
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    std::vector<DType> in, out;
    for (int t : op.inputs) in.push_back(g.tensor(t).dtype);
    for (int t : op.outputs) out.push_back(g.tensor(t).dtype);
    KernelPlan plan = must(optimize_block_graph(op.body, in, out, opts));
    codegen::BlockKernelInfo info{"k" + std::to_string(n++), in, out};
    must(codegen::emit_block_kernel(plan, info, "test", w));
    if (first_only) break;
  }
  if (n == 0) throw std::runtime_error("no customized op");
  return w.root();
}

/// Every expression node of e, itself first, depth first.
inline void collect_exprs(const ir::Expr& e, std::vector<const ir::ExprNode*>& out) {
  if (!e) return;
  out.push_back(e.get());
  for (const ir::Expr& a : e->args) collect_exprs(a, out);
}

/// Every expression node of the statements of s (their expressions and sub-expressions).
inline std::vector<const ir::ExprNode*> all_exprs(const ir::Stmt& s) {
  std::vector<const ir::ExprNode*> out;
  for (const ir::StmtNode* x : ir::walk(s))
    for (const ir::Expr& e : x->exprs) collect_exprs(e, out);
  return out;
}

/// The calls in s (anywhere in an expression) whose callee starts with `prefix`.
inline std::vector<const ir::ExprNode*> calls_to(const ir::Stmt& s, const std::string& prefix) {
  std::vector<const ir::ExprNode*> out;
  for (const ir::ExprNode* e : all_exprs(s))
    if (e->kind == ir::ExprKind::Call && e->name.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

/// The calls that are statements of their own (`f(…);`) whose callee starts with `prefix`.
inline int count_calls(const ir::Stmt& s, const std::string& prefix) {
  int n = 0;
  for (const ir::StmtNode* x : ir::walk(s))
    if (x->kind == ir::StmtKind::Eval && x->exprs[0]->kind == ir::ExprKind::Call &&
        x->exprs[0]->name.rfind(prefix, 0) == 0)
      ++n;
  return n;
}

/// Whether s declares a variable `name`.
inline bool declares(const ir::Stmt& s, const std::string& name) {
  for (const ir::StmtNode* x : ir::walk(s))
    if (x->kind == ir::StmtKind::Decl)
      for (const std::string& n : x->names)
        if (n == name) return true;
  return false;
}

/// Whether expression e reads the variable `name`.
inline bool reads(const ir::Expr& e, const std::string& name) {
  std::vector<const ir::ExprNode*> nodes;
  collect_exprs(e, nodes);
  for (const ir::ExprNode* n : nodes)
    if (n->kind == ir::ExprKind::Var && n->name == name) return true;
  return false;
}

}  // namespace strata::testing
