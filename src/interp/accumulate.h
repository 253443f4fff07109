// For-loop accumulators of block graphs (docs/mugraph-semantics.md §3): how a per-iteration tile
// becomes a loop
// result. Each accumulator's own arithmetic lives here.
//
//   accum, fmap φ          Σ_i x_i
//   accum, fmap d          the F tiles x_0 … x_{F−1} concatenated along d
//   accum_sum_ld           Σ_i Σ_last x_i
//   accum_mean_ld          (Σ_i Σ_last x_i) / (F·n_last)
//   accum_rms_ld           SQRT((Σ_i Σ_last x_i²) / (F·n_last)), SQRT the domain's opaque sqrt
//   accum_sum_to_dimx(r)   Σ_i, then the last dim reduced to r by groups of consecutive elements
#pragma once

#include "interp/ops.h"

namespace strata::interp {

/// Adds iteration `iter`'s tile `x` into `acc`, which has the accumulator's output shape and
/// starts out zero.
template <class A>
void accum_update(const A& ar, OpKind kind, const OpAttrs& attrs, int iter, const Tensor<A>& x,
                  Tensor<A>& acc, const ValueHints& hints) {
  int pad = 4 - x.shape.rank();
  int last = 3;
  Box whole = Box::full(acc.shape);
  if (kind == OpKind::AccumSum && attrs.fmap != kReplicate) {
    int d = attrs.fmap + pad;
    Operand ox = Operand::of(x.shape), oa = Operand::of(acc.shape);
    int64_t off = iter * ox.dims[d];
    for_each_row(Box::full(x.shape), 1, [&](int64_t i0, int64_t i1, int64_t i2) {
      int64_t idx[3] = {i0, i1, i2};
      int64_t xb = ox.row_base(i0, i1, i2);
      if (d < 3) idx[d] += off;
      int64_t ab = oa.row_base(idx[0], idx[1], idx[2]) + (d == 3 ? off : 0);
      for (int64_t j = 0; j < ox.dims[3]; ++j) acc[ab + j] = x[xb + j];
    });
    return;
  }
  if (kind == OpKind::AccumSum) {
    binary_op(ar, OpKind::Add, hints, acc, x, acc, whole, 1);
    return;
  }
  // The fused accumulators reduce the tile's last dim first (to 1, or to `to`).
  const Tensor<A>* src = &x;
  Tensor<A> sq;
  if (kind == OpKind::AccumRmsLd) {
    sq = Tensor<A>(x.shape);
    unary_op(ar, OpKind::Square, 0.0, true, x, sq, Box::full(x.shape), 1);
    src = &sq;
  }
  Tensor<A> part(acc.shape);
  reduce_op(ar, false, last, hints, *src, part, whole, 1);
  binary_op(ar, OpKind::Add, hints, acc, part, acc, whole, 1);
}

/// Turns the summed state into the loop result after the last iteration. `tile` is the shape
/// of the per-iteration tile and `forloop` the number of iterations.
template <class A>
void accum_finalize(const A& ar, OpKind kind, int forloop, const Shape& tile, Tensor<A>& acc,
                    const ValueHints& hints) {
  if (kind != OpKind::AccumMeanLd && kind != OpKind::AccumRmsLd) return;
  int64_t count = int64_t{forloop} * tile[tile.rank() - 1];
  ValueHints h = hints;
  if (kind == OpKind::AccumRmsLd) {  // the mean only feeds the opaque sqrt (keyed on p)
    h.need_p = true;
    h.need_q = false;
  }
  auto scale = ar.prepare_divisor(ar.from_int(count), h);
  for (auto& v : acc.data) v = ar.div_prepared(v, scale);
  if (kind == OpKind::AccumRmsLd)
    for (auto& v : acc.data) v = ar.opaque(OpKind::Sqrt, v);
}

}  // namespace strata::interp
