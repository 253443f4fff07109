// Abstract expressions of μGraph tensors (docs/abstract-expressions.md, Mirage paper §4.3).
//
// An abstract expression is a term over the kernel inputs that forgets which elements an op
// combines and keeps only how: `sum(k, mul(X, W))` for a matmul with inner extent k. Terms are
// hash-consed in an ExprPool: building the same term twice gives the same ExprId, so
// structural equality is id equality. The pool normalizes on construction only where an axiom
// makes it free and safe: add and mul order their operands canonically (commutativity),
// sum(1, x) = x and sum(a, sum(b, x)) = sum(a·b, x). Everything else (associativity,
// distributivity, moving divisions and sums) is the business of the normal form
// (expr_normal_form.h) and the subexpression oracle (subexpr_oracle.h).
//
// Term language (docs/abstract-expressions.md):
//   var(i)                 kernel input i of the program
//   add(a, b) mul(a, b)    commutative and associative
//   div(a, b)
//   exp(a)
//   sum(n, a)              a summed over n ≥ 1 elements
//   rms(n, a [, c])        root mean square over n elements (c: the constant eps, if not 0)
//   fn(kind, a [, b] [, c…]) an opaque function of its arguments (sqrt, silu, …, pow, maximum)
//                          and of its op's constants (clamp's bounds)
//   concat(a, b)           a marker so that concat-then-matmul can be recognized
//   c(v)                   the scalar constant v (mul_scalar, add_scalar, eps, bounds)
//   max(n, a)              the max over n elements
//   perm(a)                a with its last two dims swapped (transpose); perm(perm(a)) = a
//   slice(a, d, s, e)      the part [s, e) of a along dim d (s and e as constants)
// plus two n-ary kinds, Mono and Poly, that only normal forms use.
//
// Thread safety: every member function may be called from any number of threads at once.
// Reading a node never locks; interning a term locks one of many shards.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/ir/op.h"

namespace strata {

/// Index of a term in its ExprPool. Equal ids ⇔ structurally equal terms.
using ExprId = uint32_t;
/// "No term": the absent second argument of a unary fn, or an unset slot.
inline constexpr ExprId kNoExpr = UINT32_MAX;

/// The head of a term. Var..Concat are the term language; Mono and Poly appear only in
/// normal forms (see expr_normal_form.h).
enum class ExprKind : uint8_t {
  Var,
  Add,
  Mul,
  Div,
  Exp,
  Sum,
  Rms,
  Fn,
  Concat,
  Const,
  Max,
  Perm,
  Slice,
  Mono,
  Poly
};

/// Counts of summed elements saturate here (products of large sums); see the docs.
inline constexpr int64_t kCountCap = int64_t{1} << 62;
/// a · b for counts in [1, kCountCap], saturating at kCountCap.
inline int64_t mul_counts(int64_t a, int64_t b) {
  return (a >= kCountCap || b >= kCountCap || a > kCountCap / b) ? kCountCap : a * b;
}

/// A thread-safe, append-only store of hash-consed terms.
class ExprPool {
 public:
  ExprPool();
  ~ExprPool();
  ExprPool(const ExprPool&) = delete;
  ExprPool& operator=(const ExprPool&) = delete;

  /// Kernel input `input` (≥ 0) of the program.
  ExprId var(int input);
  /// a + b (operands ordered canonically).
  ExprId add(ExprId a, ExprId b);
  /// a · b (operands ordered canonically).
  ExprId mul(ExprId a, ExprId b);
  /// a / b.
  ExprId div(ExprId a, ExprId b);
  /// exp(a).
  ExprId exp(ExprId a);
  /// a summed over n elements. n < 1 is treated as 1; sum(1, a) = a and
  /// sum(n, sum(m, a)) = sum(n·m, a) (saturating at kCountCap).
  ExprId sum(int64_t n, ExprId a);
  /// Root mean square of a over n ≥ 1 elements (n < 1 is treated as 1), with the constant
  /// eps under the root (left out when 0).
  ExprId rms(int64_t n, ExprId a, double eps = 0.0);
  /// An opaque function `kind` (sqrt, silu, gelu, relu, or pow with b) of its arguments.
  ExprId fn(OpKind kind, ExprId a, ExprId b = kNoExpr);
  /// An opaque function of the given arguments (tensor arguments first, then constants).
  ExprId fn(OpKind kind, std::span<const ExprId> args);
  /// The concatenation marker concat(a, b) (order kept: concatenation is not commutative).
  ExprId concat(ExprId a, ExprId b);
  /// The scalar constant v (−0 is 0). Constants are atoms: mul_scalar(x, v) is mul(c(v), x).
  ExprId constant(double v);
  /// The max of a over n ≥ 1 elements.
  ExprId max(int64_t n, ExprId a);
  /// a with its last two dims swapped; perm(perm(a)) = a.
  ExprId perm(ExprId a);
  /// The part [start, end) of a along dim `dim`.
  ExprId slice(ExprId a, int dim, int64_t start, int64_t end);

  /// Normal-form monomial: count · Π numerators / Π denominators, with numerators atoms
  /// (Var, Exp, Rms, Fn, Concat) and denominators normal forms. Orders both lists
  /// canonically; returns the single numerator itself when count is 1 and there are no
  /// denominators. Precondition: numerators non-empty, count ≥ 1.
  ExprId mono(int64_t count, std::vector<ExprId> numerators, std::vector<ExprId> denominators);
  /// Normal-form polynomial: the sum of the given monomials (a multiset: order is
  /// canonicalized, duplicates kept). Returns the single element itself for one monomial.
  /// Precondition: non-empty; elements are monomials or atoms.
  ExprId poly(std::vector<ExprId> monomials);

  /// The head of e.
  ExprKind kind(ExprId e) const { return node(e).kind; }
  /// Var: the input index; Sum, Rms and Max: the element count n; Mono: the count; else 0.
  int64_t count(ExprId e) const { return node(e).n; }
  /// Fn: the opaque function's op kind.
  OpKind fn_kind(ExprId e) const { return static_cast<OpKind>(node(e).op); }
  /// Const: its value.
  double constant_value(ExprId e) const;
  /// Slice: the dim it slices.
  int slice_dim(ExprId e) const { return node(e).op; }
  /// Arguments in order (for Add and Mul, in canonical order; for Mono, numerators then
  /// denominators; for Poly, the monomials).
  std::span<const ExprId> children(ExprId e) const;
  /// Mono: its numerator atoms (a prefix of children) and its denominators (the rest).
  std::span<const ExprId> numerators(ExprId e) const;
  std::span<const ExprId> denominators(ExprId e) const;
  /// A structural hash: equal for equal terms, independent of interning order.
  uint64_t hash(ExprId e) const { return node(e).hash; }
  /// Canonical total order on terms: by kind, count, function, then structure. Independent
  /// of interning order, so sorted operands print the same in every run.
  bool less(ExprId a, ExprId b) const { return compare(a, b) < 0; }
  /// Number of terms interned so far.
  size_t size() const { return next_id_.load(std::memory_order_acquire); }

  /// The term in the notation of the docs, e.g. "div(sum(256, mul(x0, x1)), rms(256, x0))".
  /// Mono and Poly print as nested div/sum/mul and n-ary add.
  std::string str(ExprId e) const;
  /// Same, printing var(i) as var_names[i] where given.
  std::string str(ExprId e, const std::vector<std::string>& var_names) const;

  /// Memo slot of the normal form of e (expr_normal_form.h); kNoExpr until set. Setting it
  /// twice with the same value is harmless.
  ExprId memo_normal_form(ExprId e) const { return node(e).nf.load(std::memory_order_acquire); }
  void set_memo_normal_form(ExprId e, ExprId nf) const {
    node(e).nf.store(nf, std::memory_order_release);
  }

 private:
  struct Node {
    ExprKind kind = ExprKind::Var;
    uint8_t op = 0;
    uint32_t split = 0;  // Mono: number of numerators
    uint32_t num_children = 0;
    int64_t n = 0;
    uint64_t hash = 0;
    const ExprId* children = nullptr;
    mutable std::atomic<ExprId> nf{kNoExpr};
  };
  struct Shard;

  const Node& node(ExprId e) const {
    return chunks_[e >> kChunkBits].load(std::memory_order_acquire)[e & (kChunkSize - 1)];
  }
  ExprId intern(ExprKind kind, uint8_t op, int64_t n, uint32_t split,
                std::span<const ExprId> children);
  int compare(ExprId a, ExprId b) const;
  void sort_canonical(std::vector<ExprId>& v) const;
  void print(ExprId e, const std::vector<std::string>* names, std::string& out) const;

  static constexpr int kChunkBits = 14;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 1u << 14;
  static constexpr int kShardBits = 6;

  std::unique_ptr<std::atomic<Node*>[]> chunks_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<uint32_t> next_id_{0};
  std::mutex alloc_mu_;  // guards node and child-array allocation
  std::vector<std::unique_ptr<ExprId[]>> child_blocks_;
  ExprId* child_cursor_ = nullptr;
  size_t child_left_ = 0;
};

/// Expressions of the outputs of kernel op `op_id` of g, given the expressions of all tensors
/// before it (tensor_exprs indexed by kernel tensor id; entries at or after the op's outputs
/// are ignored). Customized ops have their block graph inlined. Per-op rules are those of
/// docs/abstract-expressions.md.
std::vector<ExprId> kernel_op_exprs(ExprPool& pool, const KernelGraph& g, int op_id,
                                    const std::vector<ExprId>& tensor_exprs);

/// Expression of the output tensor of block op `op_id` of b (for an Output saver: the
/// expression of the saved tensor), given expressions of the block tensors before it
/// (indexed by block tensor id) and of the customized op's kernel inputs (by input index).
ExprId block_op_expr(ExprPool& pool, const BlockGraph& b, int op_id,
                     const std::vector<ExprId>& block_tensor_exprs,
                     const std::vector<ExprId>& kernel_input_exprs);

/// Expression of an elementwise op (or thread-graph step) `kind` with attributes `attrs` on
/// operands with expressions a and b (b = kNoExpr for a unary op).
ExprId elementwise_op_expr(ExprPool& pool, OpKind kind, const OpAttrs& attrs, ExprId a,
                           ExprId b);

/// Expressions of every block tensor of b (indexed by block tensor id).
std::vector<ExprId> block_graph_exprs(ExprPool& pool, const BlockGraph& b,
                                      const std::vector<ExprId>& kernel_input_exprs);

/// Expressions of every kernel tensor of a complete graph (indexed by kernel tensor id).
std::vector<ExprId> kernel_graph_exprs(ExprPool& pool, const KernelGraph& g);

}  // namespace strata
