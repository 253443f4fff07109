// Test support: μGraphs that together exercise every op, accumulator, map and lowering path
// of the CUDA emitter (shared by the emulation and the nvcc compile tests).
#pragma once

#include "support/benchmark_graphs.h"

namespace strata::testing {

inline OpAttrs fmap_attr(int fmap, int64_t to = 1) {
  OpAttrs a;
  a.fmap = fmap;
  a.to = to;
  return a;
}

inline OpAttrs scalar_attr(double c) {
  OpAttrs a;
  a.scalar = c;
  return a;
}

// Every accumulator kind, imap and omap on all three grid axes (one of them permuted),
// broadcasting post-loop ops.
inline KernelGraph accumulators_and_maps() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{4, 6, 64}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 3, 2}, 64, 4));
  int xi = must(b.add_input(Shape{4, 6, 64}, {2, 1, 0}, 2));  // tile [2, 2, 8]
  int a = must(b.add_op(OpKind::MulScalar, {xi}, scalar_attr(0.5)));
  int r = must(b.add_op(OpKind::Relu, {xi}));
  int c = must(b.add_op(OpKind::Add, {a, r}));
  int acc1 = must(b.add_op(OpKind::AccumSum, {c}));
  int acc2 = must(b.add_op(OpKind::AccumSum, {xi}, fmap_attr(2)));
  int acc3 = must(b.add_op(OpKind::AccumSumLd, {xi}));
  int acc4 = must(b.add_op(OpKind::AccumMeanLd, {r}));
  int acc5 = must(b.add_op(OpKind::AccumRmsLd, {xi}));
  int acc6 = must(b.add_op(OpKind::AccumSumToDimx, {xi}, fmap_attr(P, 2)));
  int p1 = must(b.add_op(OpKind::Div, {acc1, acc5}));
  int p2 = must(b.add_op(OpKind::Sub, {acc2, acc3}));
  int p3 = must(b.add_op(OpKind::Mul, {acc4, acc6}));
  must(b.add_output(p1, {2, 1, 0}));
  must(b.add_output(p2, {2, 1, 0}));
  must(b.add_output(p3, {2, 1, 0}));
  must(b.add_output(acc3, {1, 0, 2}));
  auto outs = must(g.add_customized({x}, std::move(b), {"O1", "O2", "O3", "O4"}));
  for (int o : outs) must(g.mark_output(o));
  return g;
}

// SIMT matmul (f32 × f16 operands, K not a multiple of 16), reductions and norms in the loop
// and after it, post-loop concat, a post-loop matmul of accumulators.
inline KernelGraph simt_and_reductions() {
  KernelGraph g;
  int A = must(g.add_input("A", Shape{3, 5, 12}, DType::f32));
  int B = must(g.add_input("B", Shape{3, 12, 7}, DType::f16));
  int C = must(g.add_input("C", Shape{3, 7, 5}, DType::f16));
  BlockGraph b = must(BlockGraph::make({3, 1, 1}, 96, 3));
  int ai = must(b.add_input(Shape{3, 5, 12}, {0, P, P}, 2));  // [1, 5, 4]
  int bi = must(b.add_input(Shape{3, 12, 7}, {0, P, P}, 1));  // [1, 4, 7]
  int ci = must(b.add_input(Shape{3, 7, 5}, {0, P, P}, P));   // [1, 7, 5], invariant
  int m = must(b.add_op(OpKind::Matmul, {ai, bi}));
  int s = must(b.add_op(OpKind::Sum, {m}, dim_attr(2)));
  int cn = must(b.add_op(OpKind::RmsNorm, {ci}, dim_attr(2)));
  int am = must(b.add_op(OpKind::AccumSum, {m}));
  int as = must(b.add_op(OpKind::AccumSum, {s}));
  int ac = must(b.add_op(OpKind::AccumSum, {cn}));
  int n = must(b.add_op(OpKind::RmsNorm, {am}, dim_attr(1)));
  int mean = must(b.add_op(OpKind::Mean, {am}, dim_attr(2)));
  int t = must(b.add_op(OpKind::Sub, {as, mean}));
  int cat = must(b.add_op(OpKind::Concat, {n, as}, dim_attr(2)));
  int pm = must(b.add_op(OpKind::Matmul, {am, ac}));  // [1, 5, 5]
  must(b.add_output(cat, {0, P, P}));
  must(b.add_output(t, {0, P, P}));
  must(b.add_output(pm, {0, P, P}));
  auto outs = must(g.add_customized({A, B, C}, std::move(b), {"Cat", "T", "PM"}));
  for (int o : outs) must(g.mark_output(o));
  return g;
}

// bf16 tensor cores on batched tiles (two batches per block), an epilogue thread graph with a
// broadcast loop-invariant operand, register accumulation, N = 48 (an odd number of n8 pairs).
inline KernelGraph batched_tensor_cores() {
  KernelGraph g;
  int p = must(g.add_input("P", Shape{2, 32, 64}, DType::bf16));
  int q = must(g.add_input("Q", Shape{2, 64, 48}, DType::bf16));
  int bias = must(g.add_input("Bias", Shape{2, 1, 48}, DType::bf16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int pi = must(b.add_input(Shape{2, 32, 64}, {P, P, P}, 2));  // [2, 32, 32]
  int qi = must(b.add_input(Shape{2, 64, 48}, {P, P, P}, 1));  // [2, 32, 48]
  int bi = must(b.add_input(Shape{2, 1, 48}, {P, P, P}, P));
  int m = must(b.add_op(OpKind::Matmul, {pi, qi}));
  int e = must(b.add_thread_graph(
      {m, bi}, {ThreadStep{OpKind::Add, {0, 1}}, ThreadStep{OpKind::Gelu, {2, 0}}}));
  int m2 = must(b.add_op(OpKind::Matmul, {pi, qi}));
  int acc = must(b.add_op(OpKind::AccumSum, {e}));
  int acc2 = must(b.add_op(OpKind::AccumSum, {m2}));
  int o = must(b.add_op(OpKind::Sub, {acc, acc2}));
  must(b.add_output(o, {P, P, P}));
  must(b.add_output(acc2, {P, P, P}));
  auto outs = must(g.add_customized({p, q, bias}, std::move(b), {"O", "Acc"}));
  for (int t : outs) must(g.mark_output(t));
  return g;
}

// Concat operands stored in place in a swizzled host (column offset 64), with a tensor-core
// matmul reading both the view and the host; a block-wide rms_norm and sum with `to`.
inline KernelGraph views_and_block_reductions() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 64}, DType::f16));
  int u = must(g.add_input("U", Shape{64, 64}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{64, 128}, DType::f16));
  int w2 = must(g.add_input("W2", Shape{64, 128}, DType::f16));
  int y = must(g.add_input("Y", Shape{1, 2048}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{16, 64}, {P, P, P}, P));
  int ui = must(b.add_input(Shape{64, 64}, {P, P, P}, P));
  int w1i = must(b.add_input(Shape{64, 128}, {1, P, P}, P));  // [64, 64]
  int w2i = must(b.add_input(Shape{64, 128}, {1, P, P}, P));
  int xu = must(b.add_op(OpKind::Matmul, {xi, ui}));
  int left = must(b.add_op(OpKind::Concat, {xi, xu}, dim_attr(1)));     // [16, 128]
  int right = must(b.add_op(OpKind::Concat, {w1i, w2i}, dim_attr(0)));  // [128, 64]
  int mm = must(b.add_op(OpKind::Matmul, {left, right}));
  int o = must(b.add_op(OpKind::AccumSum, {mm}));
  must(b.add_output(o, {1, P, P}));
  auto outs = must(g.add_customized({x, u, w1, w2}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  BlockGraph r = must(BlockGraph::make({1, 1, 1}, 256, 2));
  int yi = must(r.add_input(Shape{1, 2048}, {P, P, P}, 1));  // [1, 1024]
  int s = must(r.add_op(OpKind::Sum, {yi}, dim_attr(1, 4)));
  int n = must(r.add_op(OpKind::RmsNorm, {yi}, dim_attr(1)));
  int as = must(r.add_op(OpKind::AccumSum, {s}));
  int an = must(r.add_op(OpKind::AccumSum, {n}, fmap_attr(1)));
  must(r.add_output(as, {P, P, P}));
  must(r.add_output(an, {P, P, P}));
  auto routs = must(g.add_customized({y}, std::move(r), {"S", "N"}));
  for (int t : routs) must(g.mark_output(t));
  return g;
}

// rms_norm folded into matmuls: over the contraction dim of A (row scales) and of B (column
// scales), in the loop, with register accumulation.
inline KernelGraph folded_norms() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 128}, DType::f16));
  int w = must(g.add_input("W", Shape{128, 64}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int xi = must(b.add_input(Shape{16, 128}, {P, P, P}, 1));  // [16, 64]
  int wi = must(b.add_input(Shape{128, 64}, {P, P, P}, 0));  // [64, 64]
  int nx = must(b.add_op(OpKind::RmsNorm, {xi}, dim_attr(1)));
  int nw = must(b.add_op(OpKind::RmsNorm, {wi}, dim_attr(0)));
  int m1 = must(b.add_op(OpKind::Matmul, {nx, wi}));
  int m2 = must(b.add_op(OpKind::Matmul, {xi, nw}));
  int a1 = must(b.add_op(OpKind::AccumSum, {m1}));
  int a2 = must(b.add_op(OpKind::AccumSum, {m2}));
  must(b.add_output(a1, {P, P, P}));
  must(b.add_output(a2, {P, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"A1", "A2"}));
  for (int t : outs) must(g.mark_output(t));
  return g;
}

// QK-norm attention with K's gain on Q (Q·diag(g)·Kᵀ = (Q∘g)·Kᵀ): K read as [B, L, d],
// normalized over the head dim and transposed for Q·Kᵀ, both orders — rms_norm(transpose(K),
// dim 1) (`norm_first` false) or transpose(rms_norm(K, dim 2)) — each a transpose read in place, so that
// K's rms_norm folds into Q·Kᵀ as column scales; one block per batch row streams the keys
// (F iterations).
inline KernelGraph qknorm_gain_on_q(int64_t B, int64_t q, int64_t d, int64_t L, int F,
                                    bool norm_first, DType dt = DType::f16) {
  KernelGraph g;
  int Q = must(g.add_input("Q", Shape{B, q, d}, dt));
  int K = must(g.add_input("K", Shape{B, L, d}, dt));
  int V = must(g.add_input("V", Shape{B, L, d}, dt));
  int G = must(g.add_input("G", Shape{d}, dt));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(B), 1, 1}, 128, F));
  int qi = must(b.add_input(Shape{B, q, d}, {0, P, P}, P));
  int ki = must(b.add_input(Shape{B, L, d}, {0, P, P}, 1));
  int vi = must(b.add_input(Shape{B, L, d}, {0, P, P}, 1));
  int gi = must(b.add_input(Shape{d}, {P, P, P}, P));
  int qn = must(b.add_op(OpKind::Mul, {must(b.add_op(OpKind::RmsNorm, {qi}, dim_attr(2))), gi}));
  int kn = norm_first ? must(b.add_op(OpKind::Transpose,
                                      {must(b.add_op(OpKind::RmsNorm, {ki}, dim_attr(2)))}))
                     : must(b.add_op(OpKind::RmsNorm,
                                      {must(b.add_op(OpKind::Transpose, {ki}))}, dim_attr(1)));
  int s = must(b.add_op(OpKind::Matmul, {qn, kn}));
  int e = must(b.add_op(OpKind::Exp, {s}));
  int ev = must(b.add_op(OpKind::Matmul, {e, vi}));
  int aev = must(b.add_op(OpKind::AccumSum, {ev}));
  int ae = must(b.add_op(OpKind::AccumSumLd, {e}));
  int o = must(b.add_op(OpKind::Div, {aev, ae}));
  must(b.add_output(o, {0, P, P}));
  auto outs = must(g.add_customized({Q, K, V, G}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

// Rowwise kernels: several rows per block, rows inside a warp (4 × 256: 32 chunks per row) and
// rows across warps (2 × 2048), row-shaped operands and outputs, every last-dim reduction.
inline KernelGraph rowwise_rows() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{8, 256}, DType::f16));
  int y = must(g.add_input("Y", Shape{4, 2048}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{8, 256}, {0, P, P}, P));  // [4, 256]
  int n = must(b.add_op(OpKind::RmsNorm, {xi}, dim_attr(1)));
  int mu = must(b.add_op(OpKind::Mean, {xi}, dim_attr(1)));  // [4, 1]
  int d = must(b.add_op(OpKind::Sub, {n, mu}));
  int e = must(b.add_op(OpKind::Exp, {d}));
  int s = must(b.add_op(OpKind::Sum, {e}, dim_attr(1)));
  int q = must(b.add_op(OpKind::Div, {e, s}));
  int o = must(b.add_op(OpKind::AccumSum, {q}));
  int r = must(b.add_op(OpKind::AccumRmsLd, {d}));
  must(b.add_output(o, {0, P, P}));
  must(b.add_output(r, {0, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b), {"O", "R"}));
  for (int t : outs) must(g.mark_output(t));
  BlockGraph c = must(BlockGraph::make({2, 1, 1}, 128, 1));
  int yi = must(c.add_input(Shape{4, 2048}, {0, P, P}, P));  // [2, 2048]
  int m = must(c.add_op(OpKind::Mean, {yi}, dim_attr(1)));   // [2, 1]
  int sq = must(c.add_op(OpKind::Square, {yi}));
  int t2 = must(c.add_op(OpKind::Mul, {sq, m}));
  int nn = must(c.add_op(OpKind::RmsNorm, {t2}, dim_attr(1)));
  int an = must(c.add_op(OpKind::AccumSum, {nn}));
  int ss = must(c.add_op(OpKind::AccumMeanLd, {t2}));
  must(c.add_output(an, {0, P, P}));
  must(c.add_output(ss, {0, P, P}));
  auto outs2 = must(g.add_customized({y}, std::move(c), {"N", "S"}));
  for (int t : outs2) must(g.mark_output(t));
  return g;
}

// Every predefined kernel op with broadcasting, reductions with `to`, a batched matmul lowered to
// tensor cores, a matmul that does not tile (generic kernel), and an input that is an output.
inline KernelGraph predefined_ops() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{4, 8, 16}, DType::f16));
  int y = must(g.add_input("Y", Shape{16}, DType::f16));
  int z = must(g.add_input("Z", Shape{4, 16, 24}, DType::f16));
  int x2 = must(g.add_input("X2", Shape{5, 7}, DType::f32));
  int z2 = must(g.add_input("Z2", Shape{7, 3}, DType::f16));
  int a = must(g.add_op(OpKind::Add, {x, y}, {}, "a"));
  int gl = must(g.add_op(OpKind::Gelu, {a}, {}, "gl"));
  int p = must(g.add_op(OpKind::Pow, {must(g.add_op(OpKind::Exp, {gl}, {}, "ex")), y}, {}, "p"));
  int q = must(g.add_op(OpKind::Sqrt, {must(g.add_op(OpKind::Square, {x}, {}, "sq"))}, {}, "q"));
  int mn = must(g.add_op(OpKind::Mean, {q}, dim_attr(1, 2), "mn"));
  int su = must(g.add_op(OpKind::Sum, {p}, dim_attr(2, 4), "su"));
  int cat = must(g.add_op(OpKind::Concat, {mn, mn}, dim_attr(1), "cat"));
  int rn = must(g.add_op(OpKind::RmsNorm, {x}, dim_attr(0), "rn"));
  int mm = must(g.add_op(OpKind::Matmul, {x, z}, {}, "mm"));
  int si = must(g.add_op(
      OpKind::Silu, {must(g.add_op(OpKind::MulScalar, {mm}, scalar_attr(-1.5), "ms"))}, {}, "si"));
  int d = must(g.add_op(OpKind::Div,
                        {must(g.add_op(OpKind::Relu, {rn}, {}, "re")),
                         must(g.add_op(OpKind::Sub, {q, rn}, {}, "sb"))},
                        {}, "d"));
  int mm2 = must(g.add_op(OpKind::Matmul, {x2, z2}, {}, "mm2"));
  int m2 = must(
      g.add_op(OpKind::Mul, {mm2, must(g.add_op(OpKind::Sum, {x2}, dim_attr(1), "s2"))}, {}, "m2"));
  for (int t : {su, cat, si, d, m2}) must(g.mark_output(t));
  must(g.mark_output(y));
  return g;
}

// The combine kernel of split attention (the second kernel of gqa at b = 8): per row, the sum
// of a loop-invariant tile of partial denominators (exp keeps them positive), then the sum over
// the loop of the partial numerators divided by it, accumulated in registers; the division is
// inlined into the accumulator and the numerator tile read with vector loads.
inline KernelGraph split_combine() {
  KernelGraph g;
  int s = must(g.add_input("S", Shape{2, 32, 8}, DType::f16));
  int p = must(g.add_input("P", Shape{2, 32, 256}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 2, 1}, 128, 4));
  int si = must(b.add_input(Shape{2, 32, 8}, {0, 1, P}, P));    // [1, 16, 8], invariant
  int pi = must(b.add_input(Shape{2, 32, 256}, {0, 1, P}, 2));  // [1, 16, 64]
  int e = must(b.add_op(OpKind::Exp, {si}));
  int sum = must(b.add_op(OpKind::Sum, {e}, dim_attr(2)));
  int q = must(b.add_op(OpKind::Div, {pi, sum}));
  int acc = must(b.add_op(OpKind::AccumSum, {q}));
  must(b.add_output(acc, {0, 1, P}));
  auto outs = must(g.add_customized({s, p}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

// Post-loop ops that read loop-invariant tiles (docs/mugraph-semantics.md §3.4): a matmul
// looped over K, then + bias and · a gain computed from an fmap-φ input (relu(G), invariant),
// both applied after the loop: add(matmul(X, W), B) · relu(G).
inline KernelGraph post_loop_invariants() {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 256}, DType::f16));
  int w = must(g.add_input("W", Shape{256, 128}, DType::f16));
  int bias = must(g.add_input("B", Shape{128}, DType::f16));
  int gain = must(g.add_input("G", Shape{128}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 2, 1}, 128, 4));
  int xi = must(b.add_input(Shape{16, 256}, {0, P, P}, 1));   // [8, 64]
  int wi = must(b.add_input(Shape{256, 128}, {P, 1, P}, 0));  // [64, 64]
  int bi = must(b.add_input(Shape{128}, {P, 0, P}, P));       // [64], invariant
  int gi = must(b.add_input(Shape{128}, {P, 0, P}, P));       // [64], invariant
  int rg = must(b.add_op(OpKind::Relu, {gi}));                // invariant loop tile
  int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, wi}))}));
  int o = must(b.add_op(OpKind::Mul, {must(b.add_op(OpKind::Add, {acc, bi})), rg}));
  must(b.add_output(o, {0, 1, P}));
  auto outs = must(g.add_customized({x, w, bias, gain}, std::move(b)));
  must(g.mark_output(outs[0]));
  return g;
}

}  // namespace strata::testing
