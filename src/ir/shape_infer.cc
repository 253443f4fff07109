#include "strata/ir/shape_infer.h"

#include <cmath>
#include <string>

namespace strata {
namespace {

std::string named(OpKind k) {
  return std::string(op_name(k));
}

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

/// Scalars must be finite; clamp needs lo ≤ hi and norms a non-negative epsilon.
Status check_scalars(OpKind kind, const OpAttrs& attrs) {
  for (const AttrSpec& spec : attr_specs(kind)) {
    if (spec.is_int) continue;
    double v = get_real_attr(attrs, spec.field);
    if (!std::isfinite(v))
      return make_error(named(kind) + ": " + std::string(spec.name) + " must be a finite number");
  }
  if (kind == OpKind::Clamp && !(attrs.scalar <= attrs.scalar2))
    return make_error("clamp: lo must not exceed hi");
  if (op_info(kind).attrs == AttrSet::Norm || op_info(kind).attrs == AttrSet::Eps) {
    if (attrs.scalar < 0) return make_error(named(kind) + ": eps must be ≥ 0");
  }
  return Status::success();
}

/// Shape of a reduction of the last dim to 1 (running_max and the _ld accumulators).
Shape last_dim_reduced(const Shape& s) {
  Shape out = s;
  out[s.rank() - 1] = 1;
  return out;
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
  STRATA_RETURN_IF_ERROR(check_scalars(kind, attrs));
  switch (info.category) {
    case Category::Matmul:
      return matmul_shape(in[0], in[1]);
    case Category::Unary:
    case Category::Collective:  // all_reduce: the same shape on every rank
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
    case Category::Layout: {
      if (kind == OpKind::Transpose) {
        if (in[0].rank() < 2)
          return make_error("transpose needs a tensor of rank ≥ 2, got " + in[0].str());
        Shape out = in[0];
        int r = out.rank();
        out[r - 1] = in[0][r - 2];
        out[r - 2] = in[0][r - 1];
        return out;
      }
      STRATA_ASSIGN_OR_RETURN(attrs.dim, checked_dim(kind, in[0], attrs.dim));
      int64_t n = in[0][attrs.dim];
      if (attrs.start < 0 || attrs.end > n || attrs.start >= attrs.end)
        return make_error("slice: range [" + std::to_string(attrs.start) + ", " +
                          std::to_string(attrs.end) + ") of dim " + std::to_string(attrs.dim) +
                          " is not a non-empty part of [0, " + std::to_string(n) + ") in " +
                          in[0].str());
      Shape out = in[0];
      out[attrs.dim] = attrs.end - attrs.start;
      return out;
    }
    case Category::Scan:  // running_max: the last dim reduced to 1, per iteration
      if (in[0].rank() < 1) return make_error(named(kind) + " needs a tile of rank ≥ 1");
      return last_dim_reduced(in[0]);
    case Category::Concat: {
      STRATA_ASSIGN_OR_RETURN(attrs.dim, checked_dim(kind, in[0], attrs.dim));
      const Shape &a = in[0], &b = in[1];
      bool same = a.rank() == b.rank();
      for (int i = 0; same && i < a.rank(); ++i)
        if (i != attrs.dim && a[i] != b[i]) same = false;
      if (!same)
        return make_error("concat along dim " + std::to_string(attrs.dim) + ": shapes " + a.str() +
                          " and " + b.str() + " differ in another dimension");
      Shape out = a;
      out[attrs.dim] = a[attrs.dim] + b[attrs.dim];
      return out;
    }
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      break;
  }
  return make_error(named(kind) + " is not a compute op");
}

Result<Shape> accum_shape(OpKind kind, const std::vector<Shape>& ins, int forloop,
                          OpAttrs& attrs) {
  if (op_category(kind) != Category::Accum)
    return make_error(named(kind) + " is not an accumulator");
  const OpInfo& info = op_info(kind);
  if (static_cast<int>(ins.size()) != info.arity)
    return make_error(named(kind) + " takes " + std::to_string(info.arity) + " input(s), got " +
                      std::to_string(ins.size()));
  STRATA_RETURN_IF_ERROR(check_scalars(kind, attrs));
  const Shape& in = ins[0];
  if (attrs.fmap != kReplicate) {
    STRATA_ASSIGN_OR_RETURN(attrs.fmap, checked_dim(kind, in, attrs.fmap));
  }
  if (kind != OpKind::AccumSum && attrs.fmap != kReplicate)
    return make_error(named(kind) + " reduces over the for-loop; its fmap must be φ");
  if (in.rank() < 1) return make_error(named(kind) + " needs a tile of rank ≥ 1");
  if (info.arity == 2) {  // accum_rescale(_ld)(y, m): m is a per-iteration shift of y's rows
    auto b = broadcast_shapes(in, ins[1]);
    if (!b || *b != in)
      return make_error(named(kind) + ": the shift " + ins[1].str() +
                        " does not broadcast to the accumulated tile " + in.str());
  }
  Shape out = in;
  int last = in.rank() - 1;
  if (kind == OpKind::AccumSum) {
    if (attrs.fmap != kReplicate) out[attrs.fmap] = saturating_mul(in[attrs.fmap], forloop);
    return out;
  }
  if (kind == OpKind::AccumRescale) return out;
  if (kind == OpKind::AccumSumToDimx) {
    if (attrs.to < 1 || in[last] % attrs.to != 0)
      return make_error(named(kind) + ": the last dim of " + in.str() + " is not a multiple of " +
                        std::to_string(attrs.to));
    out[last] = attrs.to;
    return out;
  }
  // The remaining accumulators reduce the iterations and the tile's last dim.
  return last_dim_reduced(in);
}

}  // namespace

Result<Shape> infer_compute_shape(OpKind kind, const std::vector<Shape>& in, OpAttrs& attrs) {
  STRATA_ASSIGN_OR_RETURN(Shape out, compute_shape(kind, in, attrs));
  return bounded(kind, out);
}

Result<Shape> infer_accum_shape(OpKind kind, const std::vector<Shape>& ins, int forloop,
                                OpAttrs& attrs) {
  STRATA_ASSIGN_OR_RETURN(Shape out, accum_shape(kind, ins, forloop, attrs));
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
