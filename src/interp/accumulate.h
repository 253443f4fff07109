// For-loop accumulators and running (scan) ops of block graphs (docs/mugraph-semantics.md): how
// per-iteration tiles become loop results. Everything but accum's concatenation and the
// rescaling is read off the reduction family of the op table.
//
//   accum, fmap φ          Σ_i x_i
//   accum, fmap d          the F tiles x_0 … x_{F−1} concatenated along d
//   accum_sum_ld           Σ_i Σ_last x_i
//   accum_mean_ld          (Σ_i Σ_last x_i) / (F·n_last)
//   accum_rms_ld           SQRT((Σ_i Σ_last x_i²) / (F·n_last) + eps), SQRT the domain's sqrt
//   accum_sum_to_dimx(r)   Σ_i, then the last dim reduced to r by groups of consecutive elements
//   accum_max_ld           max_i max_last x_i
//   accum_rescale(y, m)    Σ_i y_i · exp(m_i − m_{F−1})       (m broadcast to y)
//   accum_rescale_ld(y, m) Σ_i Σ_last y_i · exp(m_i − m_{F−1})
//   running_max(x)         (a loop-body op) at iteration i: max_{j ≤ i} max_last x_j
//
// The rescaling accumulators are computed by the recurrence acc_i = acc_{i−1}·exp(m_{i−1} − m_i)
// + y_i, which telescopes to the sum above in exact arithmetic (and exactly in the finite
// fields, where exp(a)·exp(b) = exp(a + b)). With m a running max of scores s and
// y_i = exp(s_i − m_i)·v_i this is the online-softmax update: the result is Σ_i exp(s_i − M)·v_i
// with M the overall max.
#pragma once

#include "interp/ops.h"

namespace strata::interp {

/// What an accumulator or running op keeps between iterations.
template <class A>
struct LoopState {
  Tensor<A> acc;         ///< the combined state (for max: not yet finished)
  Tensor<A> last_shift;  ///< accum_rescale(_ld): the shift tile m of the previous iteration
  int64_t count = 0;     ///< elements combined into each state element (for means)
};

/// Starts the state of an accumulator or running op whose result has shape `shape`.
template <class A>
LoopState<A> loop_state_init(const A& ar, OpKind kind, const Shape& shape) {
  const ReductionInfo* r = op_reduction(kind);
  bool max = r && r->combine == Combine::Max;
  return LoopState<A>{Tensor<A>(shape, max ? ar.max_identity() : ar.zero()), Tensor<A>()};
}

/// Combines iteration `iter`'s tiles `in` (the accumulated tile, and for accum_rescale(_ld) the
/// shift) into the state.
template <class A>
void accum_update(const A& ar, OpKind kind, const OpAttrs& attrs, int iter,
                  const std::vector<const Tensor<A>*>& in, LoopState<A>& st,
                  const ValueHints& hints) {
  const Tensor<A>& x = *in[0];
  Tensor<A>& acc = st.acc;
  Box whole = Box::full(acc.shape);
  if (kind == OpKind::AccumSum && attrs.fmap != kReplicate) {
    int d = attrs.fmap + 4 - x.shape.rank();
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
  // This iteration's contribution: the tile itself, or its last dim reduced (not finished).
  const ReductionInfo* r = op_reduction(kind);
  Tensor<A> part;
  if (r) {
    part = Tensor<A>(acc.shape);
    combine_op(ar, *r, 3, x, part, whole, 1);
  }
  const Tensor<A>& y = r ? part : x;
  bool max = r && r->combine == Combine::Max;
  st.count += r ? x.shape[x.shape.rank() - 1] / acc.shape[acc.shape.rank() - 1] : 1;
  if (op_info(kind).arity == 2) {  // rescale: acc·exp(m_prev − m) + y
    const Tensor<A>& m = *in[1];
    if (iter > 0) {
      Tensor<A> shift(m.shape);
      binary_op(ar, OpKind::Sub, hints, st.last_shift, m, shift, Box::full(m.shape), 1);
      Tensor<A> factor(m.shape);
      unary_op(ar, OpKind::Exp, OpAttrs{}, true, shift, factor, Box::full(m.shape), 1);
      binary_op(ar, OpKind::Mul, hints, acc, factor, acc, whole, 1);
    }
    st.last_shift = m;
  }
  if (max) {
    for (size_t i = 0; i < acc.data.size(); ++i)
      acc.data[i] = ar.max_combine(acc.data[i], y.data[i]);
    return;
  }
  binary_op(ar, OpKind::Add, hints, acc, y, acc, whole, 1);
}

/// The loop result of an accumulator after the last iteration: the state finished (max),
/// divided by the count of elements combined (mean; the last iteration of a ragged loop
/// contributes fewer) or turned into a root mean (rms).
template <class A>
void accum_finalize(const A& ar, OpKind kind, const OpAttrs& attrs, LoopState<A>& st,
                    const ValueHints& hints) {
  const ReductionInfo* r = op_reduction(kind);
  if (!r) return;
  finish_reduction(ar, *r, st.count, attrs.scalar, hints, st.acc, Box::full(st.acc.shape));
}

/// A running (Scan) op at iteration `iter`: combines the tile into the state and writes the
/// running value (the state finished) into `out`.
template <class A>
void scan_update(const A& ar, OpKind kind, const Tensor<A>& x, LoopState<A>& st, Tensor<A>& out,
                 const ValueHints& hints) {
  const ReductionInfo& r = *op_reduction(kind);
  Box whole = Box::full(st.acc.shape);
  Tensor<A> part(st.acc.shape);
  combine_op(ar, r, 3, x, part, whole, 1);
  const bool max = r.combine == Combine::Max;
  for (size_t i = 0; i < part.data.size(); ++i)
    st.acc.data[i] =
        max ? ar.max_combine(st.acc.data[i], part.data[i]) : ar.add(st.acc.data[i], part.data[i]);
  out = st.acc;
  finish_reduction(ar, r, 1, 0.0, hints, out, whole);
}

}  // namespace strata::interp
