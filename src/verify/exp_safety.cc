#include "verify/exp_safety.h"

#include <optional>

#include "strata/expr/abstract_expr.h"
#include "strata/expr/expr_normal_form.h"

namespace strata::verify {
namespace {

/// The operands of a subtraction and their abstract expressions.
struct Subtraction {
  ExprId a = kNoExpr, m = kNoExpr;
};

class SafetyCheck {
 public:
  explicit SafetyCheck(const KernelGraph& g) : g_(g), kexprs_(kernel_graph_exprs(pool_, g)) {}

  /// Where the first unshifted exponential is, or "".
  std::string first_unshifted() {
    for (size_t i = 0; i < g_.ops().size(); ++i) {
      const KernelOp& op = g_.op(static_cast<int>(i));
      const std::string where = "kernel op #" + std::to_string(i) + " (" +
                                std::string(op_name(op.kind)) + ")";
      if (op.kind == OpKind::Exp) {
        ++exps_;
        if (!shifted(kernel_sub(op.inputs[0]))) return where;
      }
      if (op.kind != OpKind::Customized) continue;
      const BlockGraph& b = *op.body;
      std::vector<ExprId> kin;
      for (int t : op.inputs) kin.push_back(kexprs_[t]);
      std::vector<ExprId> bx = block_graph_exprs(pool_, b, kin);
      for (size_t j = 0; j < b.ops().size(); ++j) {
        const BlockOp& bop = b.op(static_cast<int>(j));
        const std::string at = where + ", block op #" + std::to_string(j) + " (" +
                               std::string(op_name(bop.kind)) + ")";
        if (bop.kind == OpKind::Exp) {
          ++exps_;
          if (!shifted(block_sub(op, b, bx, bop.inputs[0]))) return at;
        }
        if (bop.kind != OpKind::ThreadFused) continue;
        // Step values: the op's inputs, then the steps; a Sub step feeding an Exp step.
        std::vector<ExprId> vals;
        std::vector<int> kinds;  // step kind per value, -1 for op inputs
        for (int t : bop.inputs) {
          vals.push_back(bx[t]);
          kinds.push_back(-1);
        }
        for (size_t s = 0; s < bop.chain.size(); ++s) {
          const ThreadStep& st = bop.chain[s];
          ExprId x = vals[st.args[0]];
          ExprId y = op_info(st.kind).arity == 2 ? vals[st.args[1]] : kNoExpr;
          if (st.kind == OpKind::Exp) {
            ++exps_;
            const int v = st.args[0];
            std::optional<Subtraction> sub;
            if (kinds[v] == static_cast<int>(OpKind::Sub)) {
              const ThreadStep& src = bop.chain[v - bop.inputs.size()];
              sub = Subtraction{vals[src.args[0]], vals[src.args[1]]};
            } else if (kinds[v] < 0) {
              sub = block_sub(op, b, bx, bop.inputs[v]);
            }
            if (!shifted(sub)) return at + ", step " + std::to_string(s) + " (exp)";
          }
          vals.push_back(elementwise_op_expr(pool_, st.kind, step_attrs(st), x, y));
          kinds.push_back(static_cast<int>(st.kind));
        }
      }
    }
    return "";
  }

  int exps() const { return exps_; }

 private:
  /// Whether m is a max of an expression equivalent to a's: exp(a − m) ≤ 1.
  bool shifted(const std::optional<Subtraction>& s) {
    if (!s) return false;
    std::optional<ExprId> m = normal_form(pool_, s->m);
    if (!m || pool_.kind(*m) != ExprKind::Max) return false;
    std::optional<ExprId> a = normal_form(pool_, s->a);
    std::optional<ExprId> x = normal_form(pool_, pool_.children(*m)[0]);
    return a && x && *a == *x;
  }

  /// The subtraction producing kernel tensor t, if it is one.
  std::optional<Subtraction> kernel_sub(int t) {
    const KernelOp& p = g_.op(g_.tensor(t).producer);
    if (p.kind != OpKind::Sub) return std::nullopt;
    return Subtraction{kexprs_[p.inputs[0]], kexprs_[p.inputs[1]]};
  }

  /// The subtraction producing block tensor t of customized op `op` (directly, or through its
  /// input iterator from a kernel-level subtraction).
  std::optional<Subtraction> block_sub(const KernelOp& op, const BlockGraph& b,
                                       const std::vector<ExprId>& bx, int t) {
    const BlockOp& p = b.op(b.tensor(t).producer);
    if (p.kind == OpKind::Sub) return Subtraction{bx[p.inputs[0]], bx[p.inputs[1]]};
    if (p.kind == OpKind::Input) return kernel_sub(op.inputs[p.attrs.input_index]);
    if (p.kind == OpKind::ThreadFused && !p.chain.empty() && p.chain.back().kind == OpKind::Sub) {
      std::vector<ExprId> vals;
      for (int x : p.inputs) vals.push_back(bx[x]);
      for (const ThreadStep& st : p.chain) {
        ExprId y = op_info(st.kind).arity == 2 ? vals[st.args[1]] : kNoExpr;
        vals.push_back(elementwise_op_expr(pool_, st.kind, step_attrs(st), vals[st.args[0]], y));
      }
      const ThreadStep& last = p.chain.back();
      return Subtraction{vals[last.args[0]], vals[last.args[1]]};
    }
    return std::nullopt;
  }

  const KernelGraph& g_;
  ExprPool pool_;
  std::vector<ExprId> kexprs_;
  int exps_ = 0;
};

}  // namespace

std::string unshifted_exp(const KernelGraph& g) { return SafetyCheck(g).first_unshifted(); }

bool has_exp(const KernelGraph& g) {
  SafetyCheck c(g);
  c.first_unshifted();
  return c.exps() > 0;
}

std::string exp_safety_violation(const KernelGraph& program, const KernelGraph& candidate) {
  SafetyCheck p(program);
  if (!p.first_unshifted().empty() || p.exps() == 0) return "";  // the program is not safe
  std::string where = unshifted_exp(candidate);
  if (where.empty()) return "";
  return "the program shifts every exp by the max of its argument (a safe softmax), but " +
         where + " computes exp without that shift: equal over the reals, it overflows where "
         "the program cannot";
}

}  // namespace strata::verify
