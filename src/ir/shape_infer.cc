#include "strata/shape_infer.h"

#include <string>

namespace strata {
namespace {

std::string named(OpKind k) { return std::string(op_name(k)); }

Result<Shape> matmul_shape(const Shape& a, const Shape& b) {
  if (a.rank() < 2 || b.rank() < 2)
    return make_error("matmul needs operands of rank ≥ 2, got " + a.str() + " and " + b.str());
  if (a.rank() != b.rank())
    return make_error("matmul operands must have the same rank, got " + a.str() + " and " +
                      b.str());
  int r = a.rank();
  for (int i = 0; i < r - 2; ++i)
    if (a[i] != b[i])
      return make_error("matmul batch dimension " + std::to_string(i) + " differs: " + a.str() +
                        " vs " + b.str());
  if (a[r - 1] != b[r - 2])
    return make_error("matmul inner dimensions differ: " + a.str() + " × " + b.str() +
                      " (expected A[..., m, k] × B[..., k, n])");
  Shape out = a;
  out[r - 1] = b[r - 1];
  return out;
}

Result<int> checked_dim(OpKind kind, const Shape& s, int dim) {
  auto d = s.normalize_dim(dim);
  if (!d)
    return make_error(named(kind) + ": dim " + std::to_string(dim) + " is out of range for " +
                      s.str());
  return *d;
}

/// The result shape when it is within the bounds of Shape::check, else an error naming the op.
Result<Shape> bounded(OpKind kind, const Shape& s) {
  Status st = s.check();
  if (!st.ok()) return make_error(named(kind) + ": result " + st.error().message);
  return s;
}

Result<Shape> compute_shape(OpKind kind, const std::vector<Shape>& in, OpAttrs& attrs) {
  const OpInfo& info = op_info(kind);
  if (info.arity >= 0 && static_cast<int>(in.size()) != info.arity)
    return make_error(named(kind) + " takes " + std::to_string(info.arity) + " input(s), got " +
                      std::to_string(in.size()));
  switch (info.category) {
    case Category::Matmul:
      return matmul_shape(in[0], in[1]);
    case Category::Unary:
      return in[0];
    case Category::Binary: {
      auto s = broadcast_shapes(in[0], in[1]);
      if (!s)
        return make_error(named(kind) + ": shapes " + in[0].str() + " and " + in[1].str() +
                          " do not broadcast");
      return *s;
    }
    case Category::Reduce: {
      STRATA_ASSIGN_OR_RETURN(attrs.dim, checked_dim(kind, in[0], attrs.dim));
      if (attrs.to < 1 || in[0][attrs.dim] % attrs.to != 0)
        return make_error(named(kind) + ": cannot reduce dim " + std::to_string(attrs.dim) +
                          " of " + in[0].str() + " to " + std::to_string(attrs.to) +
                          " (the extent must be a multiple of it)");
      Shape out = in[0];
      out[attrs.dim] = attrs.to;
      return out;
    }
    case Category::Norm: {
      STRATA_ASSIGN_OR_RETURN(attrs.dim, checked_dim(kind, in[0], attrs.dim));
      return in[0];
    }
    case Category::Concat: {
      STRATA_ASSIGN_OR_RETURN(attrs.dim, checked_dim(kind, in[0], attrs.dim));
      const Shape &a = in[0], &b = in[1];
      bool same = a.rank() == b.rank();
      for (int i = 0; same && i < a.rank(); ++i)
        if (i != attrs.dim && a[i] != b[i]) same = false;
      if (!same)
        return make_error("concat along dim " + std::to_string(attrs.dim) + ": shapes " +
                          a.str() + " and " + b.str() + " differ in another dimension");
      Shape out = a;
      out[attrs.dim] = a[attrs.dim] + b[attrs.dim];
      return out;
    }
    default:
      return make_error(named(kind) + " is not a compute op");
  }
}

Result<Shape> accum_shape(OpKind kind, const Shape& in, int forloop, OpAttrs& attrs) {
  if (op_category(kind) != Category::Accum) return make_error(named(kind) + " is not an accumulator");
  if (attrs.fmap != kReplicate) {
    STRATA_ASSIGN_OR_RETURN(attrs.fmap, checked_dim(kind, in, attrs.fmap));
  }
  if (kind != OpKind::AccumSum && attrs.fmap != kReplicate)
    return make_error(named(kind) + " reduces over the for-loop; its fmap must be φ");
  if (in.rank() < 1) return make_error(named(kind) + " needs a tile of rank ≥ 1");
  Shape out = in;
  int last = in.rank() - 1;
  switch (kind) {
    case OpKind::AccumSum:
      if (attrs.fmap != kReplicate) out[attrs.fmap] = saturating_mul(in[attrs.fmap], forloop);
      return out;
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
      out[last] = 1;
      return out;
    case OpKind::AccumSumToDimx:
      if (attrs.to < 1 || in[last] % attrs.to != 0)
        return make_error(named(kind) + ": the last dim of " + in.str() +
                          " is not a multiple of " + std::to_string(attrs.to));
      out[last] = attrs.to;
      return out;
    default:
      return make_error(named(kind) + " is not an accumulator");
  }
}

}  // namespace

Result<Shape> infer_compute_shape(OpKind kind, const std::vector<Shape>& in, OpAttrs& attrs) {
  STRATA_ASSIGN_OR_RETURN(Shape out, compute_shape(kind, in, attrs));
  return bounded(kind, out);
}

Result<Shape> infer_accum_shape(OpKind kind, const Shape& in, int forloop, OpAttrs& attrs) {
  STRATA_ASSIGN_OR_RETURN(Shape out, accum_shape(kind, in, forloop, attrs));
  return bounded(kind, out);
}

Result<Shape> infer_thread_graph_shape(const std::vector<ThreadStep>& chain,
                                       const std::vector<Shape>& inputs) {
  if (chain.empty()) return make_error("thread graph has no steps");
  std::vector<Shape> vals = inputs;
  for (size_t j = 0; j < chain.size(); ++j) {
    const ThreadStep& s = chain[j];
    if (!is_elementwise(s.kind))
      return make_error("thread graph step " + std::to_string(j) + " (" + named(s.kind) +
                        ") is not elementwise");
    int n = op_info(s.kind).arity;
    std::vector<Shape> args;
    for (int a = 0; a < n; ++a) {
      if (s.args[a] < 0 || s.args[a] >= static_cast<int>(vals.size()))
        return make_error("thread graph step " + std::to_string(j) + " refers to value " +
                          std::to_string(s.args[a]) + ", which is not defined before it");
      args.push_back(vals[s.args[a]]);
    }
    OpAttrs attrs;
    attrs.scalar = s.scalar;
    STRATA_ASSIGN_OR_RETURN(Shape out, infer_compute_shape(s.kind, args, attrs));
    vals.push_back(out);
  }
  return vals.back();
}

}  // namespace strata
