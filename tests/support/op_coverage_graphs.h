// Test support: μGraphs with the ops of the reduction family beyond sums (max, rms eps), the
// elementwise ops without a fast path of their own, layout ops as views, running maxima and the
// rescaling accumulators (the online softmax), at the block and the kernel level. Shared by the
// emulation and the nvcc compile tests.
#pragma once

#include "support/coverage_graphs.h"

namespace strata::testing {

inline OpAttrs norm_attr(int dim, double eps) {
  OpAttrs a;
  a.dim = dim;
  a.scalar = eps;
  return a;
}

inline OpAttrs clamp_attr(double lo, double hi) {
  OpAttrs a;
  a.scalar = lo;
  a.scalar2 = hi;
  return a;
}

inline OpAttrs slice_attr(int dim, int64_t start, int64_t end) {
  OpAttrs a;
  a.dim = dim;
  a.start = start;
  a.end = end;
  return a;
}

// A rowwise kernel (F = 1) with a max reduction (the safe softmax of each row), rms_norm with
// eps, accum_max_ld, accum_rms_ld with eps, and every elementwise op that has no fast path of its
// own (sigmoid, tanh, log, add_scalar, clamp, maximum, minimum).
inline KernelGraph rowwise_max_eps() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{8, 256}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{8, 256}, {0, P, P}, P));  // [4, 256]
  int m = must(b.add_op(OpKind::Max, {xi}, dim_attr(1)));   // [4, 1]
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {xi, m}))}));
  int q = must(b.add_op(OpKind::Div, {e, must(b.add_op(OpKind::Sum, {e}, dim_attr(1)))}));
  int n = must(b.add_op(OpKind::RmsNorm, {xi}, norm_attr(1, 0.5)));
  int t = must(b.add_op(OpKind::Tanh, {n}));
  int sg = must(b.add_op(OpKind::Sigmoid, {xi}));
  int c = must(b.add_op(OpKind::Clamp, {xi}, clamp_attr(-0.2, 0.3)));
  int mn = must(b.add_op(OpKind::Minimum, {must(b.add_op(OpKind::Maximum, {t, sg})), c}));
  int as = must(b.add_op(OpKind::AddScalar, {mn}, scalar_attr(0.25)));
  int lg = must(b.add_op(OpKind::Log,
                         {must(b.add_op(OpKind::AddScalar, {must(b.add_op(OpKind::Square, {xi}))},
                                        scalar_attr(1.0)))}));
  int o1 = must(b.add_op(OpKind::AccumSum, {q}));
  int o2 = must(b.add_op(OpKind::AccumMaxLd, {xi}));
  int o3 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Add, {as, lg}))}));
  int o4 = must(b.add_op(OpKind::AccumRmsLd, {xi}, scalar_attr(0.1)));
  must(b.add_output(o1, {0, P, P}));
  must(b.add_output(o2, {0, P, P}));
  must(b.add_output(o3, {0, P, P}));
  must(b.add_output(o4, {0, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b), {"Soft", "Mx", "Ew", "Rms"}));
  for (int o : outs) must(g.mark_output(o));
  return g;
}

// Looped max reductions: accum_max_ld over rows of 384 (per-thread partial maxima combined
// atomically in shared memory, 48 chunks per row), accum_rms_ld with eps, a max with `to` in the
// loop summed over the iterations; and a second kernel with block-wide reductions (one row of
// 1024 per iteration): a max and an rms_norm with eps.
inline KernelGraph looped_max_eps() {
  KernelGraph g;
  int y = must(g.add_input("Y", Shape{4, 1536}, DType::f16));
  int z = must(g.add_input("Z", Shape{1, 2048}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 4));
  int yi = must(b.add_input(Shape{4, 1536}, {P, P, P}, 1));  // [4, 384]
  int a1 = must(b.add_op(OpKind::AccumMaxLd, {yi}));
  int a2 = must(b.add_op(OpKind::AccumRmsLd, {yi}, scalar_attr(0.05)));
  int mr = must(b.add_op(OpKind::Max, {yi}, dim_attr(1, 4)));  // [4, 4]
  int a3 = must(b.add_op(OpKind::AccumSum, {mr}));
  int a4 = must(b.add_op(OpKind::AccumMeanLd, {must(b.add_op(OpKind::Relu, {yi}))}));
  int p = must(b.add_op(OpKind::Div, {a3, a2}));
  must(b.add_output(a1, {P, P, P}));
  must(b.add_output(p, {P, P, P}));
  must(b.add_output(a4, {P, P, P}));
  auto outs = must(g.add_customized({y}, std::move(b), {"Mx", "P", "Mean"}));
  for (int o : outs) must(g.mark_output(o));
  BlockGraph r = must(BlockGraph::make({1, 1, 1}, 256, 2));
  int zi = must(r.add_input(Shape{1, 2048}, {P, P, P}, 1));  // [1, 1024]
  int mz = must(r.add_op(OpKind::Max, {zi}, dim_attr(1)));
  int nz = must(r.add_op(OpKind::RmsNorm, {zi}, norm_attr(1, 0.25)));
  int am = must(r.add_op(OpKind::AccumSum, {mz}));
  int an = must(r.add_op(OpKind::AccumSum, {nz}, fmap_attr(1)));
  int ax = must(r.add_op(OpKind::AccumMaxLd, {zi}));
  must(r.add_output(am, {P, P, P}));
  must(r.add_output(an, {P, P, P}));
  must(r.add_output(ax, {P, P, P}));
  auto routs = must(g.add_customized({z}, std::move(r), {"MZ", "NZ", "XZ"}));
  for (int o : routs) must(g.mark_output(o));
  return g;
}

// rms_norm with eps folded into matmuls over either operand's contraction dim, and a matmul
// chain whose row reductions include a max (accum_max_ld of exp(Q·K), fed from the fragments).
inline KernelGraph folded_eps_and_chain_max() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 128}, DType::f16));
  int w = must(g.add_input("W", Shape{128, 64}, DType::f16));
  int q = must(g.add_input("Q", Shape{32, 64}, DType::f16));
  int k = must(g.add_input("K", Shape{64, 128}, DType::f16));
  int v = must(g.add_input("V", Shape{128, 64}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int xi = must(b.add_input(Shape{16, 128}, {P, P, P}, 1));  // [16, 64]
  int wi = must(b.add_input(Shape{128, 64}, {P, P, P}, 0));  // [64, 64]
  int nx = must(b.add_op(OpKind::RmsNorm, {xi}, norm_attr(1, 0.5)));
  int nw = must(b.add_op(OpKind::RmsNorm, {wi}, norm_attr(0, 2.0)));
  int a1 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {nx, wi}))}));
  int a2 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, nw}))}));
  must(b.add_output(a1, {P, P, P}));
  must(b.add_output(a2, {P, P, P}));
  auto o1 = must(g.add_customized({x, w}, std::move(b), {"A1", "A2"}));
  for (int o : o1) must(g.mark_output(o));
  BlockGraph c = must(BlockGraph::make({1, 1, 1}, 128, 4));
  int qi = must(c.add_input(Shape{32, 64}, {P, P, P}, P));
  int ki = must(c.add_input(Shape{64, 128}, {P, P, P}, 1));  // [64, 32]
  int vi = must(c.add_input(Shape{128, 64}, {P, P, P}, 0));  // [32, 64]
  int e = must(c.add_op(OpKind::Exp, {must(c.add_op(OpKind::Matmul, {qi, ki}))}));
  int ev = must(c.add_op(OpKind::AccumSum, {must(c.add_op(OpKind::Matmul, {e, vi}))}));
  int es = must(c.add_op(OpKind::AccumSumLd, {e}));
  int em = must(c.add_op(OpKind::AccumMaxLd, {e}));
  must(c.add_output(must(c.add_op(OpKind::Div, {ev, es})), {P, P, P}));
  must(c.add_output(em, {P, P, P}));
  auto o2 = must(g.add_customized({q, k, v}, std::move(c), {"O", "EM"}));
  for (int o : o2) must(g.mark_output(o));
  return g;
}

// K stored as [N, D] (keys by head dim) and multiplied as matmul(Q, transpose(K_i)): the
// transpose is read in place from the [n, d] tile (ldmatrix without .trans, MmaSpec's TB), in a
// matmul chain (exp epilogue, row sums), two heads per block (batch dims).
inline KernelGraph transposed_key_chain(DType dt = DType::f16) {
  KernelGraph g;
  int q = must(g.add_input("Q", Shape{2, 32, 64}, dt));
  int k = must(g.add_input("K", Shape{2, 256, 64}, dt));
  int v = must(g.add_input("V", Shape{2, 256, 64}, dt));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 4));
  int qi = must(b.add_input(Shape{2, 32, 64}, {P, P, P}, P));
  int ki = must(b.add_input(Shape{2, 256, 64}, {P, P, P}, 1));  // [2, 64, 64]
  int vi = must(b.add_input(Shape{2, 256, 64}, {P, P, P}, 1));  // [2, 64, 64]
  int kt = must(b.add_op(OpKind::Transpose, {ki}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Matmul, {qi, kt}))}));
  int ev = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {e, vi}))}));
  int es = must(b.add_op(OpKind::AccumSumLd, {e}));
  must(b.add_output(must(b.add_op(OpKind::Div, {ev, es})), {P, P, P}));
  auto outs = must(g.add_customized({q, k, v}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

// Layout ops in every position: a transposed A (X stored as [K, M], MmaSpec's TA), a slice of
// rows as an A operand, a slice of columns at a 64-element offset as a B operand (the host then
// gives up its swizzle), a slice at an offset ldmatrix cannot read (a copy), a transpose of a
// transpose; elementwise ops, a SIMT matmul and accumulators reading views; a transpose of an
// accumulator after the loop, saved.
inline KernelGraph layout_views() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{128, 32}, DType::f16));   // [K, M]
  int w = must(g.add_input("W", Shape{128, 136}, DType::f16));  // [K, N + 8]
  int y = must(g.add_input("Y", Shape{3, 40, 24}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int xi = must(b.add_input(Shape{128, 32}, {P, P, P}, 0));              // [64, 32]
  int wi = must(b.add_input(Shape{128, 136}, {P, P, P}, 0));             // [64, 136]
  int xt = must(b.add_op(OpKind::Transpose, {xi}));                      // [32, 64]
  int wl = must(b.add_op(OpKind::Slice, {wi}, slice_attr(1, 64, 128)));  // [64, 64], col +64
  int wo = must(b.add_op(OpKind::Slice, {wi}, slice_attr(1, 4, 68)));    // [64, 64], col +4
  int m1 = must(b.add_op(OpKind::Matmul, {xt, wl}));                     // [32, 64]
  int m2 = must(b.add_op(OpKind::Matmul, {xt, wo}));
  int xr = must(b.add_op(OpKind::Slice, {xt}, slice_attr(0, 16, 32)));  // rows 16..31 of X^T
  int m3 = must(b.add_op(OpKind::Matmul, {xr, wl}));                    // [16, 64]
  int xtt = must(b.add_op(OpKind::Transpose, {xt}));                    // X_i again
  int sq = must(b.add_op(OpKind::Square, {xtt}));
  int a1 = must(b.add_op(OpKind::AccumSum, {m1}));
  int a2 = must(b.add_op(OpKind::AccumSum, {m2}));
  int a3 = must(b.add_op(OpKind::AccumSum, {m3}));
  int a4 = must(b.add_op(OpKind::AccumSumLd, {sq}));  // [64, 1]
  int a5 = must(b.add_op(OpKind::AccumMaxLd, {xt}));  // [32, 1]
  int at = must(b.add_op(OpKind::Transpose, {a1}));   // [64, 32]
  must(b.add_output(at, {P, P, P}));
  must(b.add_output(a2, {P, P, P}));
  must(b.add_output(a3, {P, P, P}));
  must(b.add_output(a4, {P, P, P}));
  must(b.add_output(a5, {P, P, P}));
  auto o1 = must(g.add_customized({x, w}, std::move(b), {"AT", "A2", "A3", "A4", "A5"}));
  for (int o : o1) must(g.mark_output(o));
  // Odd extents: views of a [3, 40, 24] tile through a SIMT matmul (K = 40 is no multiple of
  // 16) and elementwise ops.
  BlockGraph c = must(BlockGraph::make({3, 1, 1}, 64, 1));
  int yi = must(c.add_input(Shape{3, 40, 24}, {0, P, P}, P));          // [1, 40, 24]
  int yt = must(c.add_op(OpKind::Transpose, {yi}));                    // [1, 24, 40]
  int ys = must(c.add_op(OpKind::Slice, {yi}, slice_attr(2, 3, 19)));  // [1, 40, 16]
  int mm = must(c.add_op(OpKind::Matmul, {yt, ys}));                   // [1, 24, 16]
  int ya = must(c.add_op(OpKind::Slice, {yt}, slice_attr(1, 5, 21)));  // [1, 16, 40]
  int yb = must(c.add_op(OpKind::Transpose, {ys}));                    // [1, 16, 40]
  int d = must(c.add_op(OpKind::Sub, {ya, yb}));
  must(c.add_output(must(c.add_op(OpKind::AccumSum, {mm})), {0, P, P}));
  // A transpose of a one-iteration accumulator (itself stored in place in its input).
  int ad = must(c.add_op(OpKind::AccumSum, {d}));
  must(c.add_output(must(c.add_op(OpKind::Transpose, {ad})), {0, P, P}));
  auto o2 = must(g.add_customized({y}, std::move(c), {"MM", "D"}));
  for (int o : o2) must(g.mark_output(o));
  // A slice at a column offset of 8 read by ldmatrix in place: 16-byte aligned, but not at the
  // swizzle's period, so the [64, 128] host is padded instead of swizzled.
  int u = must(g.add_input("U", Shape{16, 64}, DType::f16));
  int h = must(g.add_input("H", Shape{64, 128}, DType::f16));
  BlockGraph e = must(BlockGraph::make({1, 1, 1}, 128, 1));
  int ui = must(e.add_input(Shape{16, 64}, {P, P, P}, P));
  int hi = must(e.add_input(Shape{64, 128}, {P, P, P}, P));
  int hs = must(e.add_op(OpKind::Slice, {hi}, slice_attr(1, 8, 72)));
  must(e.add_output(must(e.add_op(OpKind::AccumSum, {must(e.add_op(OpKind::Matmul, {ui, hs}))})),
                    {P, P, P}));
  auto o3 = must(g.add_customized({u, h}, std::move(e), {"UH"}));
  must(g.mark_output(o3[0]));
  return g;
}

// Rotary embedding's rotate-half, slices of the head dim read in place:
// x·cos + concat(−x[…, 32:], x[…, :32])·sin, for two heads of 16 rows per block; then a
// matmul of the result (tensor cores reading the concat).
inline KernelGraph rotary_rotate_half() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{4, 16, 64}, DType::f16));
  int cs = must(g.add_input("Cos", Shape{16, 64}, DType::f16));
  int sn = must(g.add_input("Sin", Shape{16, 64}, DType::f16));
  int w = must(g.add_input("W", Shape{4, 64, 32}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 64, 1));
  int xi = must(b.add_input(Shape{4, 16, 64}, {0, P, P}, P));  // [2, 16, 64]
  int ci = must(b.add_input(Shape{16, 64}, {P, P, P}, P));
  int si = must(b.add_input(Shape{16, 64}, {P, P, P}, P));
  int wi = must(b.add_input(Shape{4, 64, 32}, {0, P, P}, P));  // [2, 64, 32]
  int lo = must(b.add_op(OpKind::Slice, {xi}, slice_attr(2, 0, 32)));
  int hi = must(b.add_op(OpKind::Slice, {xi}, slice_attr(2, 32, 64)));
  int rot =
      must(b.add_op(OpKind::Concat,
                    {must(b.add_op(OpKind::MulScalar, {hi}, scalar_attr(-1.0))), lo}, dim_attr(2)));
  int r = must(b.add_op(OpKind::Add, {must(b.add_op(OpKind::Mul, {xi, ci})),
                                      must(b.add_op(OpKind::Mul, {rot, si}))}));
  int m = must(b.add_op(OpKind::Matmul, {r, wi}));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {r})), {0, P, P}));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {m})), {0, P, P}));
  auto outs = must(g.add_customized({x, cs, sn, w}, std::move(b), {"R", "RW"}));
  for (int o : outs) must(g.mark_output(o));
  return g;
}

// Online-softmax statistics of the rows of X over a loop of F column tiles, through shared
// memory (no matmul): m = running_max(X_i), L = accum_rescale_ld(exp(X_i − m), m) (the row's
// Σ e^(x − M) with M the final max), M = accum_max_ld(X_i), log-sum-exp M + log L, the
// running maxima summed over the iterations (accum of the running value itself), and
// accum_rescale of the shifted exponentials divided by L. `F` = 1 makes it rowwise.
inline KernelGraph softmax_statistics(int F = 4, int64_t rows = 4, int64_t n = 1024) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{2, rows, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, F));
  int xi = must(b.add_input(Shape{2, rows, n}, {0, P, P}, F > 1 ? 2 : P));  // [1, rows, n/F]
  int m = must(b.add_op(OpKind::RunningMax, {xi}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {xi, m}))}));
  int l = must(b.add_op(OpKind::AccumRescaleLd, {e, m}));
  int mx = must(b.add_op(OpKind::AccumMaxLd, {xi}));
  int sm = must(b.add_op(OpKind::AccumSum, {m}));
  int e2 = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {xi, m}))}));
  int o = must(b.add_op(OpKind::AccumRescale, {e2, m}));
  int lse = must(b.add_op(OpKind::Add, {mx, must(b.add_op(OpKind::Log, {l}))}));
  must(b.add_output(lse, {0, P, P}));
  must(b.add_output(mx, {0, P, P}));
  must(b.add_output(sm, {0, P, P}));
  must(b.add_output(must(b.add_op(OpKind::Div, {o, l})), {0, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b), {"LSE", "M", "SumM", "P"}));
  for (int t : outs) must(g.mark_output(t));
  return g;
}

// The fused safe attention of one block (FlashAttention's online softmax): per iteration i,
// S = Q·K_iᵀ · scale (K stored as [N, D] and read through transpose, or as [D, N]),
// m = running_max(S), E = exp(S − m), P = E·V_i, then O = accum_rescale(P, m),
// L = accum_rescale_ld(E, m) and R = O / L after the loop. GQA-like batch dims: the queries of
// `heads` KV heads per block, `rows` query rows each (all the queries of a KV group stacked as
// rows), F = n / 64 iterations over the keys. `extra` adds accum_sum_ld(E), whose value
// depends on the shifts along the way (so loop groups may not split the loop).
inline KernelGraph online_attention(DType dt = DType::f16, bool transposed_k = true,
                                    bool scaled = true, bool extra = false, int64_t heads = 2,
                                    int64_t rows = 64, int64_t n = 256) {
  KernelGraph g;
  const int64_t B = 2, H = 2 * heads, d = 64;
  int q = must(g.add_input("Q", Shape{B, H, rows, d}, dt));
  int k = must(g.add_input("K", transposed_k ? Shape{B, H, n, d} : Shape{B, H, d, n}, dt));
  int v = must(g.add_input("V", Shape{B, H, n, d}, dt));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(B), 2, 1}, 128, static_cast<int>(n / 64)));
  int qi = must(b.add_input(Shape{B, H, rows, d}, {0, 1, P}, P));  // [1, heads, rows, 64]
  int ki = must(b.add_input(g.tensor(k).shape, {0, 1, P}, transposed_k ? 2 : 3));
  int vi = must(b.add_input(Shape{B, H, n, d}, {0, 1, P}, 2));  // [1, heads, 64, 64]
  int kt = transposed_k ? must(b.add_op(OpKind::Transpose, {ki})) : ki;
  int s = must(b.add_op(OpKind::Matmul, {qi, kt}));
  if (scaled) s = must(b.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)));
  int m = must(b.add_op(OpKind::RunningMax, {s}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {s, m}))}));
  int p = must(b.add_op(OpKind::Matmul, {e, vi}));
  int o = must(b.add_op(OpKind::AccumRescale, {p, m}));
  int l = must(b.add_op(OpKind::AccumRescaleLd, {e, m}));
  int es = extra ? must(b.add_op(OpKind::AccumSumLd, {e})) : -1;
  must(b.add_output(must(b.add_op(OpKind::Div, {o, l})), {0, 1, P}));
  if (extra) must(b.add_output(es, {0, 1, P}));
  auto outs = must(g.add_customized(
      {q, k, v}, std::move(b),
      extra ? std::vector<std::string>{"R", "SumE"} : std::vector<std::string>{"R"}));
  for (int t : outs) must(g.mark_output(t));
  return g;
}

// Kernel-level transposes and slices read in place by customized kernels (no kernel, no
// memory): K stored as [B, N, D] and transposed for an attention kernel (its tiles are loaded
// as stored and read through a transposed map: MmaSpec's TB), a transposed A (X stored as
// [K, M]: TA), slices of columns for a rowwise kernel (one aligned to a vector, one not), a
// transpose of a slice for a general kernel; and a transpose read by a predefined op, which
// stays a kernel of its own.
inline KernelGraph kernel_level_views() {
  KernelGraph g;
  int q = must(g.add_input("Q", Shape{2, 32, 64}, DType::f16));
  int k = must(g.add_input("K", Shape{2, 256, 64}, DType::f16));
  int v = must(g.add_input("V", Shape{2, 256, 64}, DType::f16));
  int x = must(g.add_input("X", Shape{4, 320}, DType::f16));
  int y = must(g.add_input("Y", Shape{48, 32}, DType::f16));
  int w = must(g.add_input("W", Shape{64, 32}, DType::f16));
  int z = must(g.add_input("Z", Shape{64, 48}, DType::f16));
  int kt = must(g.add_op(OpKind::Transpose, {k}, {}, "Kt"));  // [2, 64, 256]
  BlockGraph a = must(BlockGraph::make({2, 1, 1}, 128, 4));
  int qi = must(a.add_input(Shape{2, 32, 64}, {0, P, P}, P));
  int ki = must(a.add_input(Shape{2, 64, 256}, {0, P, P}, 2));  // [1, 64, 64]
  int vi = must(a.add_input(Shape{2, 256, 64}, {0, P, P}, 1));  // [1, 64, 64]
  int e = must(a.add_op(OpKind::Exp, {must(a.add_op(OpKind::Matmul, {qi, ki}))}));
  int ev = must(a.add_op(OpKind::AccumSum, {must(a.add_op(OpKind::Matmul, {e, vi}))}));
  int es = must(a.add_op(OpKind::AccumSumLd, {e}));
  must(a.add_output(must(a.add_op(OpKind::Div, {ev, es})), {0, P, P}));
  must(g.mark_output(must(g.add_customized({q, kt, v}, std::move(a), {"Attn"}))[0]));
  // Column slices of X for rowwise kernels.
  for (int64_t start : {64, 3}) {
    int xs = must(g.add_op(OpKind::Slice, {x}, slice_attr(1, start, start + 256)));  // [4, 256]
    BlockGraph r = must(BlockGraph::make({2, 1, 1}, 64, 1));
    int xi = must(r.add_input(Shape{4, 256}, {0, P, P}, P));
    int n = must(r.add_op(OpKind::RmsNorm, {xi}, norm_attr(1, 0.5)));
    must(r.add_output(must(r.add_op(OpKind::AccumSum, {n})), {0, P, P}));
    must(g.mark_output(
        must(g.add_customized({xs}, std::move(r), {"RN" + std::to_string(start)}))[0]));
  }
  // transpose(Y[8:40, :]) [32, 32], and matmul(transpose(W), Z) with W stored as [K, M].
  int yt =
      must(g.add_op(OpKind::Transpose,
                    {must(g.add_op(OpKind::Slice, {y}, slice_attr(0, 8, 40), "Ys"))}, {}, "Yt"));
  int wt = must(g.add_op(OpKind::Transpose, {w}, {}, "Wt"));  // [32, 64]
  BlockGraph c = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int yi = must(c.add_input(Shape{32, 32}, {P, P, P}, P));
  int wi = must(c.add_input(Shape{32, 64}, {P, P, P}, 1));  // [32, 32]
  int zi = must(c.add_input(Shape{64, 48}, {P, P, P}, 0));  // [32, 48]
  int sq = must(c.add_op(OpKind::Sigmoid, {yi}));
  int mm = must(c.add_op(OpKind::Matmul, {wi, zi}));  // [32, 48]
  must(c.add_output(must(c.add_op(OpKind::AccumSum, {mm})), {P, P, P}));
  must(c.add_output(must(c.add_op(OpKind::AccumMaxLd, {sq})), {P, P, P}));
  auto co = must(g.add_customized({yt, wt, z}, std::move(c), {"WZ", "YM"}));
  for (int o : co) must(g.mark_output(o));
  // A transpose read by a predefined op: a copy kernel.
  must(g.mark_output(
      must(g.add_op(OpKind::Relu, {must(g.add_op(OpKind::Transpose, {y}, {}, "Yc"))}, {}, "RY"))));
  return g;
}

}  // namespace strata::testing
