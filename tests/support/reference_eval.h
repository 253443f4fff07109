// Test support: a plain double-precision evaluator of μGraphs that follows DESIGN §2 literally
// (block graphs block by block and iteration by iteration), used to check generated CUDA run
// on the CPU emulator. Deliberately simple and independent of the code generator.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "strata/kernel_graph.h"
#include "strata/shape_infer.h"

namespace strata::testing {

struct RefTensor {
  Shape shape;
  std::vector<double> v;
  RefTensor() = default;
  explicit RefTensor(const Shape& s) : shape(s), v(static_cast<size_t>(s.numel()), 0.0) {}
};

inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

inline std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (int d = 0; d < s.rank(); ++d) f = f * s[d] + idx[d];
  return f;
}

inline double ref_scalar(OpKind k, double a, double b, double scalar) {
  switch (k) {
    case OpKind::Exp:
      return std::exp(a);
    case OpKind::Square:
      return a * a;
    case OpKind::Sqrt:
      return std::sqrt(a);
    case OpKind::Silu:
      return a / (1.0 + std::exp(-a));
    case OpKind::Gelu:
      return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
    case OpKind::Relu:
      return a > 0 ? a : 0.0;
    case OpKind::MulScalar:
      return scalar * a;
    case OpKind::Add:
      return a + b;
    case OpKind::Sub:
      return a - b;
    case OpKind::Mul:
      return a * b;
    case OpKind::Div:
      return a / b;
    case OpKind::Pow:
      return std::pow(a, b);
    default:
      throw std::runtime_error("not elementwise");
  }
}

inline RefTensor ref_compute(OpKind kind, const std::vector<const RefTensor*>& in,
                             const OpAttrs& attrs, const std::vector<ThreadStep>& chain = {}) {
  std::vector<Shape> shapes;
  for (auto* t : in) shapes.push_back(t->shape);
  OpAttrs a = attrs;
  if (kind == OpKind::ThreadFused) {
    std::vector<RefTensor> vals;
    for (auto* t : in) vals.push_back(*t);
    for (const ThreadStep& s : chain) {
      std::vector<const RefTensor*> args;
      for (int k = 0; k < op_info(s.kind).arity; ++k) args.push_back(&vals[s.args[k]]);
      OpAttrs sa;
      sa.scalar = s.scalar;
      vals.push_back(ref_compute(s.kind, args, sa));
    }
    return vals.back();
  }
  Shape out = infer_compute_shape(kind, shapes, a).value();
  RefTensor r(out);
  const Category cat = op_category(kind);
  if (cat == Category::Unary || cat == Category::Binary) {
    for (int64_t e = 0; e < out.numel(); ++e) {
      std::vector<int64_t> oi = unravel(e, out);
      double x[2] = {0, 0};
      for (size_t k = 0; k < in.size(); ++k) {
        const Shape& s = in[k]->shape;
        std::vector<int64_t> ii(s.rank());
        for (int d = 0; d < s.rank(); ++d) ii[d] = s[d] == 1 ? 0 : oi[d + out.rank() - s.rank()];
        x[k] = in[k]->v[ravel(ii, s)];
      }
      r.v[e] = ref_scalar(kind, x[0], x[1], a.scalar);
    }
  } else if (cat == Category::Matmul) {
    const Shape &as = in[0]->shape, &bs = in[1]->shape;
    int rk = as.rank();
    int64_t m = as[rk - 2], k = as[rk - 1], n = bs[rk - 1], batch = out.numel() / (m * n);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t t = 0; t < k; ++t)
            s += in[0]->v[(b * m + i) * k + t] * in[1]->v[(b * k + t) * n + j];
          r.v[(b * m + i) * n + j] = s;
        }
  } else if (cat == Category::Reduce) {
    const Shape& xs = in[0]->shape;
    int64_t g = xs[a.dim] / a.to;
    for (int64_t e = 0; e < out.numel(); ++e) {
      std::vector<int64_t> oi = unravel(e, out);
      double s = 0;
      for (int64_t t = 0; t < g; ++t) {
        std::vector<int64_t> xi = oi;
        xi[a.dim] = oi[a.dim] * g + t;
        s += in[0]->v[ravel(xi, xs)];
      }
      r.v[e] = kind == OpKind::Mean ? s / g : s;
    }
  } else if (cat == Category::Norm) {
    const Shape& xs = in[0]->shape;
    int64_t n = xs[a.dim];
    for (int64_t e = 0; e < out.numel(); ++e) {
      std::vector<int64_t> oi = unravel(e, out);
      double s = 0;
      for (int64_t t = 0; t < n; ++t) {
        std::vector<int64_t> xi = oi;
        xi[a.dim] = t;
        double x = in[0]->v[ravel(xi, xs)];
        s += x * x;
      }
      r.v[e] = in[0]->v[e] / std::sqrt(s / n);
    }
  } else if (cat == Category::Concat) {
    int64_t split = in[0]->shape[a.dim];
    for (int64_t e = 0; e < out.numel(); ++e) {
      std::vector<int64_t> oi = unravel(e, out);
      if (oi[a.dim] < split) {
        r.v[e] = in[0]->v[ravel(oi, in[0]->shape)];
      } else {
        oi[a.dim] -= split;
        r.v[e] = in[1]->v[ravel(oi, in[1]->shape)];
      }
    }
  } else {
    throw std::runtime_error("ref_compute: unsupported op");
  }
  return r;
}

/// DESIGN §2.2: the outputs of a customized kernel.
inline std::vector<RefTensor> ref_block_graph(const BlockGraph& g,
                                              const std::vector<const RefTensor*>& inputs) {
  std::vector<RefTensor> outs;
  for (int i = 0; i < g.num_outputs(); ++i) outs.emplace_back(g.output_shape(i));
  const Dim3 grid = g.grid();
  const int F = g.forloop();
  for (int bz = 0; bz < grid.z; ++bz)
    for (int by = 0; by < grid.y; ++by)
      for (int bx = 0; bx < grid.x; ++bx) {
        const int b[3] = {bx, by, bz};
        std::vector<RefTensor> val(g.tensors().size());
        for (size_t i = 0; i < g.ops().size(); ++i) {
          const BlockOp& op = g.op(static_cast<int>(i));
          if (op_category(op.kind) == Category::Accum)
            val[op.output] = RefTensor(g.tensor(op.output).shape);
        }
        for (int it = 0; it < F; ++it) {
          for (size_t i = 0; i < g.ops().size(); ++i) {
            const BlockOp& op = g.op(static_cast<int>(i));
            const Category cat = op_category(op.kind);
            if (op.kind == OpKind::Input) {
              const RefTensor& src = *inputs[op.attrs.input_index];
              const Shape& ts = g.tensor(op.output).shape;
              RefTensor tile(ts);
              std::vector<int64_t> origin(ts.rank(), 0);
              for (int d = 0; d < ts.rank(); ++d) {
                for (int ax = 0; ax < 3; ++ax)
                  if (op.attrs.imap[ax] == d) origin[d] += b[ax] * (src.shape[d] / grid[ax]);
                if (op.attrs.fmap == d) origin[d] += int64_t{it} * ts[d];
              }
              for (int64_t e = 0; e < ts.numel(); ++e) {
                std::vector<int64_t> ti = unravel(e, ts);
                for (int d = 0; d < ts.rank(); ++d) ti[d] += origin[d];
                tile.v[e] = src.v[ravel(ti, src.shape)];
              }
              val[op.output] = tile;
            } else if (cat == Category::Accum) {
              const RefTensor& x = val[op.inputs[0]];
              RefTensor& acc = val[op.output];
              const int last = x.shape.rank() - 1;
              const int64_t n = x.shape[last];
              for (int64_t e = 0; e < x.shape.numel(); ++e) {
                std::vector<int64_t> xi = unravel(e, x.shape);
                std::vector<int64_t> ai = xi;
                double v = x.v[e];
                switch (op.kind) {
                  case OpKind::AccumSum:
                    if (op.attrs.fmap == kReplicate) {
                      acc.v[e] += v;
                    } else {
                      ai[op.attrs.fmap] += int64_t{it} * x.shape[op.attrs.fmap];
                      acc.v[ravel(ai, acc.shape)] = v;
                    }
                    break;
                  case OpKind::AccumSumLd:
                  case OpKind::AccumMeanLd:
                    ai[last] = 0;
                    acc.v[ravel(ai, acc.shape)] += v;
                    break;
                  case OpKind::AccumRmsLd:
                    ai[last] = 0;
                    acc.v[ravel(ai, acc.shape)] += v * v;
                    break;
                  case OpKind::AccumSumToDimx:
                    ai[last] = xi[last] / (n / op.attrs.to);
                    acc.v[ravel(ai, acc.shape)] += v;
                    break;
                  default:
                    break;
                }
              }
            } else if (cat != Category::Sink && g.tensor(op.output).stage == Stage::Loop) {
              std::vector<const RefTensor*> args;
              for (int t : op.inputs) args.push_back(&val[t]);
              val[op.output] = ref_compute(op.kind, args, op.attrs, op.chain);
            }
          }
        }
        for (size_t i = 0; i < g.ops().size(); ++i) {
          const BlockOp& op = g.op(static_cast<int>(i));
          const Category cat = op_category(op.kind);
          if (op.kind == OpKind::AccumMeanLd || op.kind == OpKind::AccumRmsLd) {
            const Shape& xs = g.tensor(op.inputs[0]).shape;
            double count = double(F) * xs[xs.rank() - 1];
            for (double& v : val[op.output].v)
              v = op.kind == OpKind::AccumMeanLd ? v / count : std::sqrt(v / count);
          }
          if (cat == Category::Sink || cat == Category::Accum || op.kind == OpKind::Input) continue;
          if (g.tensor(op.output).stage != Stage::Post) continue;
          std::vector<const RefTensor*> args;
          for (int t : op.inputs) args.push_back(&val[t]);
          val[op.output] = ref_compute(op.kind, args, op.attrs, op.chain);
        }
        for (int oi = 0; oi < g.num_outputs(); ++oi) {
          const BlockOp& op = g.op(g.output_op(oi));
          const RefTensor& tile = val[op.inputs[0]];
          RefTensor& out = outs[oi];
          for (int64_t e = 0; e < tile.shape.numel(); ++e) {
            std::vector<int64_t> ti = unravel(e, tile.shape);
            for (int ax = 0; ax < 3; ++ax)
              if (grid[ax] > 1) ti[op.attrs.omap[ax]] += b[ax] * tile.shape[op.attrs.omap[ax]];
            out.v[ravel(ti, out.shape)] = tile.v[e];
          }
        }
      }
  return outs;
}

/// Evaluates a kernel graph; returns its outputs in order.
inline std::vector<RefTensor> ref_kernel_graph(const KernelGraph& g,
                                               const std::vector<RefTensor>& inputs) {
  std::vector<RefTensor> val(g.tensors().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) val[g.inputs()[i]] = inputs[i];
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    std::vector<const RefTensor*> args;
    for (int t : op.inputs) args.push_back(&val[t]);
    if (op.kind == OpKind::Customized) {
      std::vector<RefTensor> outs = ref_block_graph(*op.body, args);
      for (size_t k = 0; k < outs.size(); ++k) val[op.outputs[k]] = std::move(outs[k]);
    } else {
      val[op.outputs[0]] = ref_compute(op.kind, args, op.attrs);
    }
  }
  std::vector<RefTensor> outs;
  for (int t : g.outputs()) outs.push_back(val[t]);
  return outs;
}

}  // namespace strata::testing
