// Per-op rules that give every μGraph tensor its abstract expression (the table
// in docs/abstract-expressions.md). The kernel and block levels share one rule per op
// category; a customized kernel op is evaluated by inlining its block graph.
#include <optional>

#include "strata/expr/abstract_expr.h"
#include "strata/expr/expr_normal_form.h"

namespace strata {
namespace {

/// The two parts of a tensor produced by a concat op of the same graph level.
struct ConcatParts {
  int a, b, dim;
};

/// Read access to one graph level: tensor expressions, shapes, and concat producers.
struct KernelLevel {
  const KernelGraph& g;
  const std::vector<ExprId>& exprs;
  ExprId expr(int t) const { return exprs[t]; }
  const Shape& shape(int t) const { return g.tensor(t).shape; }
  std::optional<ConcatParts> concat(int t) const {
    const KernelOp& op = g.op(g.tensor(t).producer);
    if (op.kind != OpKind::Concat) return std::nullopt;
    return ConcatParts{op.inputs[0], op.inputs[1], op.attrs.dim};
  }
};

struct BlockLevel {
  const BlockGraph& b;
  const std::vector<ExprId>& exprs;
  ExprId expr(int t) const { return exprs[t]; }
  const Shape& shape(int t) const { return b.tensor(t).shape; }
  std::optional<ConcatParts> concat(int t) const {
    const BlockOp& op = b.op(b.tensor(t).producer);
    if (op.kind != OpKind::Concat) return std::nullopt;
    return ConcatParts{op.inputs[0], op.inputs[1], op.attrs.dim};
  }
};

/// matmul(A, B) → sum(k, mul(A, B)) with k the inner extent of this op, except that an
/// operand made by a concat of the same level is split into its parts: stacking along rows,
/// columns or a batch dim gives the add of the partial products (pairwise when both operands
/// are split alike along a batch dim); a concat along the reduction dim on both sides with
/// matching splits gives add(sum(k1, a1·b1), sum(k2, a2·b2)); on one side only, the other
/// operand meets each part over that part's extent.
template <class Level>
ExprId matmul_expr(ExprPool& pool, const Level& lv, int ta, int tb) {
  const Shape& sa = lv.shape(ta);
  int r = sa.rank();
  int64_t k = sa[r - 1];
  auto product = [&](ExprId a, ExprId b, int64_t n) { return pool.sum(n, pool.mul(a, b)); };
  std::optional<ConcatParts> ca = lv.concat(ta), cb = lv.concat(tb);
  if (ca && ca->dim < r - 1) {  // A stacked along rows or a batch dim
    if (cb && ca->dim < r - 2 && cb->dim == ca->dim &&
        lv.shape(ca->a)[ca->dim] == lv.shape(cb->a)[cb->dim])
      return pool.add(matmul_expr(pool, lv, ca->a, cb->a), matmul_expr(pool, lv, ca->b, cb->b));
    return pool.add(matmul_expr(pool, lv, ca->a, tb), matmul_expr(pool, lv, ca->b, tb));
  }
  if (cb && cb->dim != r - 2)  // B stacked along columns or a batch dim
    return pool.add(matmul_expr(pool, lv, ta, cb->a), matmul_expr(pool, lv, ta, cb->b));
  if (ca && cb) {  // both split along the reduction dim
    int64_t k1 = lv.shape(ca->a)[r - 1];
    if (k1 != lv.shape(cb->a)[r - 2]) return product(lv.expr(ta), lv.expr(tb), k);
    return pool.add(product(lv.expr(ca->a), lv.expr(cb->a), k1),
                    product(lv.expr(ca->b), lv.expr(cb->b), k - k1));
  }
  if (ca) {
    int64_t k1 = lv.shape(ca->a)[r - 1];
    return pool.add(product(lv.expr(ca->a), lv.expr(tb), k1),
                    product(lv.expr(ca->b), lv.expr(tb), k - k1));
  }
  if (cb) {
    int64_t k1 = lv.shape(cb->a)[r - 2];
    return pool.add(product(lv.expr(ta), lv.expr(cb->a), k1),
                    product(lv.expr(ta), lv.expr(cb->b), k - k1));
  }
  return product(lv.expr(ta), lv.expr(tb), k);
}

/// Elementwise ops: add and sub → add, mul → mul, div → div, exp → exp, square(x) → x·x,
/// mul_scalar(x, c) → c(c)·x, add_scalar(x, c) → x + c(c), opaque ops → fn(kind, args, the
/// op's constants). Constants are kept: an op's scalar is part of its meaning.
ExprId elementwise_expr(ExprPool& pool, OpKind kind, const OpAttrs& attrs, ExprId a, ExprId b) {
  if (op_info(kind).algebra == Algebra::Opaque) {
    std::vector<ExprId> args{a};
    if (op_info(kind).arity == 2) args.push_back(b);
    for (const AttrSpec& spec : attr_specs(kind))
      args.push_back(pool.constant(get_real_attr(attrs, spec.field)));
    return pool.fn(kind, args);
  }
  switch (kind) {
    case OpKind::Add:
    case OpKind::Sub:
      return pool.add(a, b);
    case OpKind::Mul:
      return pool.mul(a, b);
    case OpKind::Div:
      return pool.div(a, b);
    case OpKind::Exp:
      return pool.exp(a);
    case OpKind::Square:
      return pool.mul(a, a);
    case OpKind::MulScalar:
      return pool.mul(pool.constant(attrs.scalar), a);
    case OpKind::AddScalar:
      return pool.add(a, pool.constant(attrs.scalar));
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::Clamp:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::AccumSum:
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
    case OpKind::AccumSumToDimx:
    case OpKind::AccumMaxLd:
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd:
    case OpKind::ThreadFused:
      break;  // not a Lax or Exp elementwise op
  }
  return a;
}

/// A reduction of n elements of x by the reduction family: max → max(n, x), sums and means
/// → sum(n, x) (a mean's 1/n is not tracked).
ExprId reduction_expr(ExprPool& pool, OpKind kind, int64_t n, ExprId x) {
  const ReductionInfo* r = op_reduction(kind);
  if (r && r->combine == Combine::Max) return pool.max(n, x);
  return pool.sum(n, x);
}

/// Rule of a compute op (categories Matmul, Unary, Binary, Reduce, Norm, Concat, Layout) at
/// either level.
template <class Level>
ExprId compute_expr(ExprPool& pool, const Level& lv, OpKind kind, const OpAttrs& attrs,
                    const std::vector<int>& in) {
  switch (op_category(kind)) {
    case Category::Matmul:
      return matmul_expr(pool, lv, in[0], in[1]);
    case Category::Unary:
      return elementwise_expr(pool, kind, attrs, lv.expr(in[0]), kNoExpr);
    case Category::Binary:
      return elementwise_expr(pool, kind, attrs, lv.expr(in[0]), lv.expr(in[1]));
    case Category::Reduce:  // groups of n/to consecutive elements
      return reduction_expr(pool, kind, lv.shape(in[0])[attrs.dim] / attrs.to, lv.expr(in[0]));
    case Category::Norm: {  // rms_norm(x) = x / rms(n, x, eps)
      ExprId x = lv.expr(in[0]);
      return pool.div(x, pool.rms(lv.shape(in[0])[attrs.dim], x, attrs.scalar));
    }
    case Category::Concat:
      return pool.concat(lv.expr(in[0]), lv.expr(in[1]));
    case Category::Collective:  // all_reduce: opaque, so it stays where the program has it
      return pool.fn(kind, lv.expr(in[0]));
    case Category::Layout:
      if (kind == OpKind::Transpose) return pool.perm(lv.expr(in[0]));
      return pool.slice(lv.expr(in[0]), attrs.dim, attrs.start, attrs.end);
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Scan:
    case Category::Accum:
    case Category::Fused:
      break;  // not a kernel-level compute op (handled by the callers)
  }
  return lv.expr(in[0]);
}

/// The elements that F iterations of a loop tile of extent `tile_n` cover: the block's loop
/// extent P when the tile is the loop's, ⌈P/F⌉ (a ragged loop's last tile is shorter, so the
/// iterations cover P < F·⌈P/F⌉), else F·tile_n.
int64_t loop_covered(const BlockGraph& b, int64_t tile_n) {
  const int64_t f = b.forloop(), p = b.loop_extent();
  if (p > 0 && (p + f - 1) / f == tile_n) return p;
  return mul_counts(f, tile_n);
}

/// e with every monomial count c of its normal form that is a multiple of `from` replaced by
/// c / from · to: a sum over F iterations of per-iteration sums over a ragged loop tile counts
/// F·⌈P/F⌉ elements where the loop covers P. Left as it is when its normal form is too large.
ExprId recount(ExprPool& pool, ExprId e, int64_t from, int64_t to) {
  const std::optional<ExprId> nf = normal_form(pool, e);
  if (!nf) return e;
  auto mono = [&](ExprId m) {
    // An atom counts 1, never a multiple of `from` (> 1).
    if (pool.kind(m) != ExprKind::Mono) return m;
    const int64_t c = pool.count(m);
    if (c % from != 0 || c >= kCountCap) return m;
    const auto nums = pool.numerators(m), dens = pool.denominators(m);
    return pool.mono(mul_counts(c / from, to), {nums.begin(), nums.end()},
                     {dens.begin(), dens.end()});
  };
  if (pool.kind(*nf) != ExprKind::Poly) return mono(*nf);
  std::vector<ExprId> monos;
  for (ExprId m : pool.children(*nf)) monos.push_back(mono(m));
  return pool.poly(std::move(monos));
}

/// For-loop accumulators of block graph b over its F iterations of a tile. The rescaling
/// accumulators sum like accum / accum_sum_ld: abstractly, y_i·exp(m_i − m_F) is y_i (with m
/// the running max, the shift the whole loop ends with). Over a ragged loop the sums count
/// the elements the loop covers (loop_covered, recount), so that they meet the program's.
ExprId accum_expr(ExprPool& pool, const BlockGraph& b, OpKind kind, const OpAttrs& attrs, ExprId x,
                  const Shape& tile) {
  const int forloop = b.forloop();
  const int64_t last = tile[tile.rank() - 1];
  int64_t fn = loop_covered(b, last);
  // Σ over the iterations of per-iteration results that reduced the loop tile inside the body.
  auto over_iterations = [&] {
    const ExprId e = pool.sum(forloop, x);
    const int64_t p = b.loop_extent();
    if (p <= 0 || forloop == 1) return e;
    const int64_t t = (p + forloop - 1) / forloop;
    if (t * forloop == p) return e;
    // Mirror the term a dividing loop gives, sum(F·c, y) for x = sum(c, y) with F·t = P,
    // so that it meets the program's and the other graphs' terms by id; else by its
    // normal form.
    if (pool.kind(x) == ExprKind::Sum && pool.count(x) % t == 0 && pool.count(x) < kCountCap)
      return pool.sum(mul_counts(pool.count(x) / t, p), pool.children(x)[0]);
    return recount(pool, e, mul_counts(forloop, t), p);
  };
  switch (kind) {
    case OpKind::AccumSum:  // φ: Σ_i; a data dim: concatenation of the iteration tiles
      return attrs.fmap == kReplicate ? over_iterations() : x;
    case OpKind::AccumRescale:
      return over_iterations();
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRescaleLd:
      return pool.sum(fn, x);
    case OpKind::AccumRmsLd:
      return pool.rms(fn, x, attrs.scalar);
    case OpKind::AccumMaxLd:
      return pool.max(fn, x);
    case OpKind::AccumSumToDimx:
      if (fn % attrs.to != 0) fn = mul_counts(forloop, last);
      return pool.sum(fn / attrs.to, x);
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Exp:
    case OpKind::Square:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::MulScalar:
    case OpKind::AddScalar:
    case OpKind::Clamp:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::ThreadFused:
      break;  // not an accumulator
  }
  return x;
}

}  // namespace

ExprId elementwise_op_expr(ExprPool& pool, OpKind kind, const OpAttrs& attrs, ExprId a,
                           ExprId b) {
  return elementwise_expr(pool, kind, attrs, a, b);
}

ExprId block_op_expr(ExprPool& pool, const BlockGraph& b, int op_id,
                     const std::vector<ExprId>& block_tensor_exprs,
                     const std::vector<ExprId>& kernel_input_exprs) {
  const BlockOp& op = b.op(op_id);
  BlockLevel lv{b, block_tensor_exprs};
  switch (op_category(op.kind)) {
    case Category::Source:
      return kernel_input_exprs[op.attrs.input_index];
    case Category::Sink:
      return lv.expr(op.inputs[0]);
    case Category::Accum:
      return accum_expr(pool, b, op.kind, op.attrs, lv.expr(op.inputs[0]),
                        b.tensor(op.inputs[0]).shape);
    case Category::Scan: {  // running_max: abstractly the max the loop ends with
      const Shape& tile = b.tensor(op.inputs[0]).shape;
      return reduction_expr(pool, op.kind, loop_covered(b, tile[tile.rank() - 1]),
                            lv.expr(op.inputs[0]));
    }
    case Category::Fused: {  // the chain composed; args: op inputs, then earlier steps
      std::vector<ExprId> vals;
      for (int t : op.inputs) vals.push_back(lv.expr(t));
      for (const ThreadStep& s : op.chain) {
        ExprId a = vals[s.args[0]];
        ExprId c = op_info(s.kind).arity == 2 ? vals[s.args[1]] : kNoExpr;
        vals.push_back(elementwise_expr(pool, s.kind, step_attrs(s), a, c));
      }
      return vals.back();
    }
    case Category::Matmul:
    case Category::Unary:
    case Category::Binary:
    case Category::Reduce:
    case Category::Norm:
    case Category::Concat:
    case Category::Layout:
      return compute_expr(pool, lv, op.kind, op.attrs, op.inputs);
    case Category::Customized:
    case Category::Collective:
      break;  // not a block op
  }
  return lv.expr(op.inputs[0]);
}

std::vector<ExprId> block_graph_exprs(ExprPool& pool, const BlockGraph& b,
                                      const std::vector<ExprId>& kernel_input_exprs) {
  std::vector<ExprId> exprs(b.tensors().size(), kNoExpr);
  for (int i = 0; i < static_cast<int>(b.ops().size()); ++i) {
    const BlockOp& op = b.op(i);
    if (op.output >= 0) exprs[op.output] = block_op_expr(pool, b, i, exprs, kernel_input_exprs);
  }
  return exprs;
}

std::vector<ExprId> kernel_op_exprs(ExprPool& pool, const KernelGraph& g, int op_id,
                                    const std::vector<ExprId>& tensor_exprs) {
  const KernelOp& op = g.op(op_id);
  if (op.kind == OpKind::Input) {
    int index = 0;  // position among the graph inputs = Input ops before this one
    for (int i = 0; i < op_id; ++i) index += g.op(i).kind == OpKind::Input;
    return {pool.var(index)};
  }
  if (op.kind == OpKind::Customized) {
    std::vector<ExprId> kin;
    for (int t : op.inputs) kin.push_back(tensor_exprs[t]);
    std::vector<ExprId> inner = block_graph_exprs(pool, *op.body, kin);
    std::vector<ExprId> outs;
    for (int i = 0; i < op.body->num_outputs(); ++i)
      outs.push_back(inner[op.body->op(op.body->output_op(i)).inputs[0]]);
    return outs;
  }
  KernelLevel lv{g, tensor_exprs};
  return {compute_expr(pool, lv, op.kind, op.attrs, op.inputs)};
}

std::vector<ExprId> kernel_graph_exprs(ExprPool& pool, const KernelGraph& g) {
  std::vector<ExprId> exprs(g.tensors().size(), kNoExpr);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    std::vector<ExprId> outs = kernel_op_exprs(pool, g, i, exprs);
    for (size_t j = 0; j < outs.size(); ++j) exprs[g.op(i).outputs[j]] = outs[j];
  }
  return exprs;
}

}  // namespace strata
