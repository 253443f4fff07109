// Tensor-level implementations of the compute ops (docs/mugraph-semantics.md), shared by kernel
// tensors and block tiles and by every value domain (see elementwise.h for the Arith concept).
//
// Contract of every op here: `out` is already allocated with the op's output shape (as shape
// inference gives it); the op writes exactly the elements of `out` inside `box` (padded
// coordinates, see region.h) and reads only the input elements those depend on. Results do not
// depend on `threads`: each output element is computed by one thread in a fixed order.
#pragma once

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "interp/elementwise.h"
#include "interp/region.h"
#include "strata/interp/tensor_data.h"
#include "util/parallel.h"

namespace strata::interp {

template <class A>
using Tensor = TensorData<typename A::Value>;

/// Elements per parallel chunk worth a thread.
inline constexpr int64_t kParallelGrain = 1 << 14;

/// Calls fn(i0, i1, i2) for every row of `box` (a row runs along padded dim 3), in parallel.
template <class Fn>
void for_each_row(const Box& box, int threads, Fn&& fn) {
  int64_t n0 = box.hi[0] - box.lo[0], n1 = box.hi[1] - box.lo[1], n2 = box.hi[2] - box.lo[2];
  int64_t rows = n0 * n1 * n2, len = box.hi[3] - box.lo[3];
  if (rows <= 0 || len <= 0) return;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / len);
  parallel_for_chunks(rows, threads, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t i2 = r % n2, i1 = (r / n2) % n1, i0 = r / (n1 * n2);
      fn(box.lo[0] + i0, box.lo[1] + i1, box.lo[2] + i2);
    }
  });
}

/// How a (possibly broadcast) operand is addressed from output coordinates.
struct Operand {
  std::array<int64_t, 4> dims, strides;
  /// Flat offset of the operand element under output row (i0, i1, i2), column 0.
  int64_t row_base(int64_t i0, int64_t i1, int64_t i2) const {
    int64_t idx[3] = {i0, i1, i2};
    int64_t off = 0;
    for (int d = 0; d < 3; ++d) off += (dims[d] == 1 ? 0 : idx[d]) * strides[d];
    return off;
  }
  int64_t col_step() const { return dims[3] == 1 ? 0 : 1; }
  /// The operand's elements that output `box` reads.
  Box source_box(const Box& box) const {
    Box b = box;
    for (int d = 0; d < 4; ++d)
      if (dims[d] == 1) {
        b.lo[d] = 0;
        b.hi[d] = 1;
      }
    return b;
  }
  static Operand of(const Shape& s) {
    Operand o;
    o.dims = padded_dims(s);
    o.strides = padded_strides(o.dims);
    return o;
  }
};

template <class A, class F>
void map_unary(const Tensor<A>& x, Tensor<A>& out, const Box& box, int threads, F f) {
  Operand ox = Operand::of(x.shape), oo = Operand::of(out.shape);
  for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
    int64_t xb = ox.row_base(i0, i1, i2), xs = ox.col_step(), ob = oo.row_base(i0, i1, i2);
    for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) out[ob + j] = f(x[xb + j * xs]);
  });
}

/// out = f(x) elementwise (x may broadcast to out).
template <class A>
void unary_op(const A& ar, OpKind kind, const OpAttrs& attrs, bool exp_lax, const Tensor<A>& x,
              Tensor<A>& out, const Box& box, int threads) {
  with_unary(ar, kind, attrs, exp_lax, [&](auto f) { map_unary<A>(x, out, box, threads, f); });
}

/// out = a ∘ b elementwise with NumPy broadcasting.
template <class A>
void binary_op(const A& ar, OpKind kind, const ValueHints& hints, const Tensor<A>& a,
               const Tensor<A>& b, Tensor<A>& out, const Box& box, int threads) {
  Operand oa = Operand::of(a.shape), ob = Operand::of(b.shape), oo = Operand::of(out.shape);
  with_binary(ar, kind, hints, [&](auto prep, auto f) {
    const Tensor<A>* rhs = &b;
    Tensor<A> prepared;
    if constexpr (!std::is_same_v<std::decay_t<decltype(prep)>, Unprepared>) {
      // A right operand that needs preparing (a divisor): prepare only what `box` reads.
      prepared.shape = b.shape;
      prepared.data.resize(b.data.size());
      map_unary<A>(b, prepared, ob.source_box(box), threads, prep);
      rhs = &prepared;
    }
    const Tensor<A>& r = *rhs;
    for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
      int64_t ab = oa.row_base(i0, i1, i2), as = oa.col_step();
      int64_t bb = ob.row_base(i0, i1, i2), bs = ob.col_step();
      int64_t outb = oo.row_base(i0, i1, i2);
      for (int64_t j = box.lo[3]; j < box.hi[3]; ++j)
        out[outb + j] = f(a[ab + j * as], r[bb + j * bs]);
    });
  });
}

/// The reduction `r` of `x` along padded dim `d`, reducing its extent n to `to` = out's extent by
/// combining groups of g = n/to consecutive elements: out[…, j, …] = ⊕_{t<g} premap(x[…, j·g + t,
/// …]) — the combined state, not yet finished (see finish_reduction). For Combine::Max the
/// premap and ⊕ are the domain's max_premap and max_combine.
template <class A>
void combine_op(const A& ar, const ReductionInfo& r, int d, const Tensor<A>& x, Tensor<A>& out,
                const Box& box, int threads) {
  using V = typename A::Value;
  Operand ox = Operand::of(x.shape), oo = Operand::of(out.shape);
  int64_t g = ox.dims[d] / oo.dims[d];
  const bool max = r.combine == Combine::Max, square = r.premap == Premap::Square;
  auto pre = [&](V v) {
    if (square) v = ar.mul(v, v);
    return max ? ar.max_premap(v) : v;
  };
  auto comb = [&](V a, V b) { return max ? ar.max_combine(a, b) : ar.add(a, b); };
  for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
    int64_t obase = oo.row_base(i0, i1, i2);
    if (d == 3) {
      int64_t xb = ox.row_base(i0, i1, i2);
      for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) {
        V s = pre(x[xb + j * g]);
        for (int64_t t = 1; t < g; ++t) s = comb(s, pre(x[xb + j * g + t]));
        out[obase + j] = s;
      }
      return;
    }
    int64_t idx[3] = {i0, i1, i2};
    int64_t first = idx[d] * g;
    for (int64_t t = 0; t < g; ++t) {
      idx[d] = first + t;
      int64_t xb = ox.row_base(idx[0], idx[1], idx[2]);
      for (int64_t j = box.lo[3]; j < box.hi[3]; ++j)
        out[obase + j] = t == 0 ? pre(x[xb + j]) : comb(out[obase + j], pre(x[xb + j]));
    }
  });
}

/// Turns a combined state into the reduction's value: max_finish for Max; ÷ count for Mean;
/// SQRT(÷ count + eps) for RootMean (SQRT the domain's opaque sqrt); nothing for the rest.
/// `count` is the number of elements combined into each state. `hints` are those of the result.
template <class A>
void finish_reduction(const A& ar, const ReductionInfo& r, int64_t count, double eps,
                      const ValueHints& hints, Tensor<A>& t, const Box& box) {
  using V = typename A::Value;
  Operand o = Operand::of(t.shape);
  auto each = [&](auto f) {
    for_each_row(box, 1, [&](int64_t i0, int64_t i1, int64_t i2) {
      int64_t b = o.row_base(i0, i1, i2);
      for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) t[b + j] = f(t[b + j]);
    });
  };
  if (r.combine == Combine::Max) {
    each([&](V v) { return ar.max_finish(v); });
    return;
  }
  if (r.finalize == Finalize::None) return;
  ValueHints h = hints;
  if (r.finalize == Finalize::RootMean) {  // the mean only feeds the opaque sqrt (keyed on p)
    h.need_p = true;
    h.need_q = false;
  }
  V scale = ar.prepare_divisor(ar.from_int(count), h);
  if (r.finalize == Finalize::Mean) {
    each([&](V v) { return ar.div_prepared(v, scale); });
    return;
  }
  V e = ar.from_scalar(eps);
  OpAttrs none;
  each([&](V v) {
    V m = ar.div_prepared(v, scale);
    if (eps != 0.0) m = ar.add(m, e);
    return ar.opaque(OpKind::Sqrt, m, none);
  });
}

/// A Reduce op (sum, mean, max, … by the reduction family) of `x` along padded dim `d`.
template <class A>
void reduce_op(const A& ar, OpKind kind, int d, const ValueHints& hints, const Tensor<A>& x,
               Tensor<A>& out, const Box& box, int threads) {
  const ReductionInfo& r = *op_reduction(kind);
  combine_op(ar, r, d, x, out, box, threads);
  int64_t g = padded_dims(x.shape)[d] / padded_dims(out.shape)[d];
  finish_reduction(ar, r, g, 0.0, hints, out, box);
}

/// rms_norm along padded dim `d`: x / SQRT(mean(x², d) + eps), composed from the ops above so
/// that every domain applies its own square, mean, opaque sqrt and division.
template <class A>
void rms_norm_op(const A& ar, int d, double eps, const ValueHints& hints, const Tensor<A>& x,
                 Tensor<A>& out, const Box& box, int threads) {
  Box fibers = box;  // the x elements the norms of `box` read
  fibers.lo[d] = 0;
  fibers.hi[d] = padded_dims(x.shape)[d];
  Shape ns = x.shape;
  ns[d - (4 - x.shape.rank())] = 1;
  Tensor<A> s(ns);
  Box nbox = box;
  nbox.lo[d] = 0;
  nbox.hi[d] = 1;
  const ReductionInfo& r = *op_reduction(OpKind::RmsNorm);
  combine_op(ar, r, d, x, s, nbox, threads);
  finish_reduction(ar, r, padded_dims(x.shape)[d], eps, hints, s, nbox);
  binary_op(ar, OpKind::Div, hints, x, s, out, box, threads);
}

/// transpose: out[…, i, j] = x[…, j, i] (the last two padded dims swapped).
template <class A>
void transpose_op(const Tensor<A>& x, Tensor<A>& out, const Box& box, int threads) {
  Operand ox = Operand::of(x.shape), oo = Operand::of(out.shape);
  for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
    int64_t ob = oo.row_base(i0, i1, i2);
    int64_t xb = ox.row_base(i0, i1, 0) + i2;  // x[i0, i1, j, i2]
    for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) out[ob + j] = x[xb + j * ox.strides[2]];
  });
}

/// slice along padded dim d: out[…, i, …] = x[…, start + i, …].
template <class A>
void slice_op(int d, int64_t start, const Tensor<A>& x, Tensor<A>& out, const Box& box,
              int threads) {
  Operand ox = Operand::of(x.shape), oo = Operand::of(out.shape);
  for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
    int64_t idx[3] = {i0, i1, i2};
    if (d < 3) idx[d] += start;
    int64_t xb = ox.row_base(idx[0], idx[1], idx[2]) + (d == 3 ? start : 0);
    int64_t ob = oo.row_base(i0, i1, i2);
    for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) out[ob + j] = x[xb + j];
  });
}

/// concat(a, b) along padded dim d.
template <class A>
void concat_op(int d, const Tensor<A>& a, const Tensor<A>& b, Tensor<A>& out, const Box& box,
               int threads) {
  Operand oa = Operand::of(a.shape), ob = Operand::of(b.shape), oo = Operand::of(out.shape);
  int64_t split = oa.dims[d];
  for_each_row(box, threads, [&](int64_t i0, int64_t i1, int64_t i2) {
    int64_t outb = oo.row_base(i0, i1, i2);
    int64_t idx[3] = {i0, i1, i2};
    if (d == 3) {
      int64_t ab = oa.row_base(i0, i1, i2), bb = ob.row_base(i0, i1, i2);
      for (int64_t j = box.lo[3]; j < box.hi[3]; ++j)
        out[outb + j] = j < split ? a[ab + j] : b[bb + j - split];
      return;
    }
    const Tensor<A>* src = &a;
    const Operand* os = &oa;
    if (idx[d] >= split) {
      idx[d] -= split;
      src = &b;
      os = &ob;
    }
    int64_t sb = os->row_base(idx[0], idx[1], idx[2]);
    for (int64_t j = box.lo[3]; j < box.hi[3]; ++j) out[outb + j] = (*src)[sb + j];
  });
}

/// Whether an evaluation's stop flag (ExecConfig::stop; null: none) is set.
inline bool stop_requested(const std::atomic<bool>* stop) {
  return stop && stop->load(std::memory_order_relaxed);
}

/// Batched matmul A[…, m, k] × B[…, k, n] on the elements of `box`.
template <class A>
void matmul_op(const A& ar, const ValueHints& hints, const Tensor<A>& a, const Tensor<A>& b,
               Tensor<A>& out, const Box& box, int threads,
               const std::atomic<bool>* stop = nullptr) {
  auto ad = padded_dims(a.shape), bd = padded_dims(b.shape), od = padded_dims(out.shape);
  int64_t k = ad[3];
  constexpr int64_t kRows = 64, kCols = 128;
  int64_t nb0 = box.hi[0] - box.lo[0], nb1 = box.hi[1] - box.lo[1];
  int64_t rows = box.hi[2] - box.lo[2], cols = box.hi[3] - box.lo[3];
  int64_t rchunks = (rows + kRows - 1) / kRows, cchunks = (cols + kCols - 1) / kCols;
  int64_t items = nb0 * nb1 * rchunks * cchunks;
  parallel_for(items, threads, [&](int64_t it) {
    if (stop_requested(stop)) return;  // the caller reports it
    int64_t cc = it % cchunks, rc = (it / cchunks) % rchunks;
    int64_t b1 = box.lo[1] + (it / (cchunks * rchunks)) % nb1;
    int64_t b0 = box.lo[0] + it / (cchunks * rchunks * nb1);
    int64_t r0 = box.lo[2] + rc * kRows, r1 = std::min(box.hi[2], r0 + kRows);
    int64_t c0 = box.lo[3] + cc * kCols, c1 = std::min(box.hi[3], c0 + kCols);
    const auto* A0 = a.data.data() + (b0 * ad[1] + b1) * ad[2] * k + r0 * k;
    const auto* B0 = b.data.data() + (b0 * bd[1] + b1) * bd[2] * bd[3] + c0;
    auto* C0 = out.data.data() + (b0 * od[1] + b1) * od[2] * od[3] + r0 * od[3] + c0;
    ar.matmul(A0, k, B0, bd[3], C0, od[3], r1 - r0, k, c1 - c0, hints);
  });
}

/// Any compute op (categories Matmul, Unary, Binary, Reduce, Norm, Concat, Layout) on `box` of
/// `out`. `hints.exp_lax` bit 0 applies to an exp. (Scan ops carry state across iterations:
/// the executor runs them, see scan_update.)
template <class A>
void compute_op(const A& ar, OpKind kind, const OpAttrs& attrs,
                const std::vector<const Tensor<A>*>& in, Tensor<A>& out, const Box& box,
                const ValueHints& hints, int threads, const std::atomic<bool>* stop = nullptr) {
  int pad = 4 - out.shape.rank();
  switch (op_category(kind)) {
    case Category::Matmul:  // the one op whose cost grows faster than its output: stoppable
      matmul_op(ar, hints, *in[0], *in[1], out, box, threads, stop);
      return;
    case Category::Unary:
      unary_op(ar, kind, attrs, hints.exp_lax & 1, *in[0], out, box, threads);
      return;
    case Category::Binary:
      binary_op(ar, kind, hints, *in[0], *in[1], out, box, threads);
      return;
    case Category::Reduce:
      reduce_op(ar, kind, attrs.dim + pad, hints, *in[0], out, box, threads);
      return;
    case Category::Norm:
      rms_norm_op(ar, attrs.dim + pad, attrs.scalar, hints, *in[0], out, box, threads);
      return;
    case Category::Concat:
      concat_op<A>(attrs.dim + pad, *in[0], *in[1], out, box, threads);
      return;
    case Category::Layout:
      if (kind == OpKind::Transpose)
        transpose_op<A>(*in[0], out, box, threads);
      else
        slice_op<A>(attrs.dim + pad, attrs.start, *in[0], out, box, threads);
      return;
    case Category::Collective:
      // all_reduce over one rank: the identity. The executor refuses graphs over several
      // ranks; they are evaluated in their unsharded form (expand_ranks).
      slice_op<A>(3, 0, *in[0], out, box, threads);  // a copy
      return;
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Scan:
    case Category::Accum:
    case Category::Fused:
      return;  // not a stateless compute op
  }
}

/// A thread graph: its elementwise chain evaluated step by step on whole tiles. Step j's
/// components are computed as `hints.step_need_*` bit j says (all when unset).
template <class A>
void thread_graph_op(const A& ar, const std::vector<ThreadStep>& chain,
                     const std::vector<const Tensor<A>*>& in, Tensor<A>& out,
                     const ValueHints& hints) {
  std::vector<const Tensor<A>*> vals = in;
  std::vector<Tensor<A>> steps(chain.size());
  for (size_t j = 0; j < chain.size(); ++j) {
    const ThreadStep& s = chain[j];
    int n = op_info(s.kind).arity;
    Shape shape = vals[s.args[0]]->shape;
    if (n == 2) {
      auto bs = broadcast_shapes(shape, vals[s.args[1]]->shape);
      if (bs) shape = *bs;
    }
    steps[j] = Tensor<A>(shape);
    ValueHints sh;
    sh.need_p = (hints.step_need_p >> j) & 1;
    sh.need_q = (hints.step_need_q >> j) & 1;
    bool lax = (hints.exp_lax >> j) & 1;
    Box box = Box::full(shape);
    if (n == 1)
      unary_op(ar, s.kind, step_attrs(s), lax, *vals[s.args[0]], steps[j], box, 1);
    else
      binary_op(ar, s.kind, sh, *vals[s.args[0]], *vals[s.args[1]], steps[j], box, 1);
    vals.push_back(&steps[j]);
  }
  out = std::move(steps.back());
}

}  // namespace strata::interp
