// Test support: the six paper benchmarks (bench/README.md) built with the IR API — both the naive
// program (predefined kernel ops) and the reference μGraph of docs/mugraph-semantics.md §6 — at any
// extents.
#pragma once

#include <stdexcept>
#include <string>

#include "strata/ir/kernel_graph.h"

namespace strata::testing {

template <class T>
T must(Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}
inline void must(Status s) {
  if (!s.ok()) throw std::runtime_error(s.error().message);
}

inline constexpr int P = kReplicate;

inline OpAttrs dim_attr(int d, int64_t to = 1) {
  OpAttrs a;
  a.dim = d;
  a.to = to;
  return a;
}

/// matmul(rms_norm(X), W) as one customized kernel: grid n/tn, loop k/tk.
inline KernelGraph rmsnorm_graph(int64_t m, int64_t k, int64_t n, int64_t tn = 64,
                                 int64_t tk = 64) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  BlockGraph b =
      must(BlockGraph::make({static_cast<int>(n / tn), 1, 1}, 128, static_cast<int>(k / tk)));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, 1));
  int wi = must(b.add_input(Shape{k, n}, {1, P, P}, 0));
  int mm = must(b.add_op(OpKind::Matmul, {xi, wi}));
  int am = must(b.add_op(OpKind::AccumSum, {mm}));
  int ax = must(b.add_op(OpKind::AccumRmsLd, {xi}));
  int o = must(b.add_op(OpKind::Div, {am, ax}));
  must(b.add_output(o, {1, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

inline KernelGraph rmsnorm_program(int64_t m, int64_t k, int64_t n) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  int y = must(g.add_op(OpKind::RmsNorm, {x}, dim_attr(1), "Y"));
  int o = must(g.add_op(OpKind::Matmul, {y, w}, {}, "O"));
  must(g.mark_output(o));
  return g;
}

/// silu(X·W1) ⊙ (X·W3): two matmuls in one body, silu and mul after the loop.
inline KernelGraph gatedmlp_graph(int64_t m, int64_t k, int64_t n, int64_t tn = 64,
                                  int64_t tk = 64) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{k, n}, DType::f16));
  int w3 = must(g.add_input("W3", Shape{k, n}, DType::f16));
  BlockGraph b =
      must(BlockGraph::make({static_cast<int>(n / tn), 1, 1}, 128, static_cast<int>(k / tk)));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, 1));
  int w1i = must(b.add_input(Shape{k, n}, {1, P, P}, 0));
  int w3i = must(b.add_input(Shape{k, n}, {1, P, P}, 0));
  int m1 = must(b.add_op(OpKind::Matmul, {xi, w1i}));
  int m3 = must(b.add_op(OpKind::Matmul, {xi, w3i}));
  int a1 = must(b.add_op(OpKind::AccumSum, {m1}));
  int a3 = must(b.add_op(OpKind::AccumSum, {m3}));
  int s = must(b.add_op(OpKind::Silu, {a1}));
  int o = must(b.add_op(OpKind::Mul, {s, a3}));
  must(b.add_output(o, {1, P, P}));
  auto outs = must(g.add_customized({x, w1, w3}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

/// X·W + (X·A)·B through [X | X·A] · [W ; B], forloop 1.
inline KernelGraph lora_graph(int64_t m, int64_t k, int64_t n, int64_t r, int64_t tn = 64) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  int a = must(g.add_input("A", Shape{k, r}, DType::f16));
  int bm = must(g.add_input("B", Shape{r, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(n / tn), 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, P));
  int wi = must(b.add_input(Shape{k, n}, {1, P, P}, P));
  int ai = must(b.add_input(Shape{k, r}, {P, P, P}, P));
  int bi = must(b.add_input(Shape{r, n}, {1, P, P}, P));
  int xa = must(b.add_op(OpKind::Matmul, {xi, ai}));
  int left = must(b.add_op(OpKind::Concat, {xi, xa}, dim_attr(1)));
  int right = must(b.add_op(OpKind::Concat, {wi, bi}, dim_attr(0)));
  int mm = must(b.add_op(OpKind::Matmul, {left, right}));
  int o = must(b.add_op(OpKind::AccumSum, {mm}));
  must(b.add_output(o, {1, P, P}));
  auto outs = must(g.add_customized({x, w, a, bm}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

/// rms_norm(X + α ⊙ (rms_norm(H) − X)), one block per row.
inline KernelGraph ntrans_graph(int64_t rows, int64_t d) {
  KernelGraph g;
  int h = must(g.add_input("H", Shape{rows, d}, DType::f16));
  int x = must(g.add_input("X", Shape{rows, d}, DType::f16));
  int al = must(g.add_input("Alpha", Shape{rows, d}, DType::f16));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(rows), 1, 1}, 128, 1));
  GridMap row = rows > 1 ? GridMap{0, P, P} : GridMap{P, P, P};
  int hi = must(b.add_input(Shape{rows, d}, row, P));
  int xi = must(b.add_input(Shape{rows, d}, row, P));
  int ai = must(b.add_input(Shape{rows, d}, row, P));
  int ni = must(b.add_op(OpKind::RmsNorm, {hi}, dim_attr(1)));
  int di = must(b.add_op(OpKind::Sub, {ni, xi}));
  int mi = must(b.add_op(OpKind::Mul, {ai, di}));
  int si = must(b.add_op(OpKind::Add, {xi, mi}));
  int ri = must(b.add_op(OpKind::RmsNorm, {si}, dim_attr(1)));
  int o = must(b.add_op(OpKind::AccumSum, {ri}));
  must(b.add_output(o, row));
  auto outs = must(g.add_customized({h, x, al}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

/// FlashDecoding GQA (optionally with the QK norms): kernel 1 over (batch, KV split, query
/// chunk), kernel 2 over the splits.
inline KernelGraph attention_graph(int64_t B, int64_t q, int64_t d, int64_t L, int G, int64_t T,
                                   int64_t tq, bool qknorm, DType dt = DType::f16, int Z = 1) {
  KernelGraph g;
  int Q = must(g.add_input("Q", Shape{B, q, d}, dt));
  int K = must(g.add_input("K", Shape{B, d, L}, dt));
  int V = must(g.add_input("V", Shape{B, L, d}, dt));
  const int F1 = static_cast<int>(L / (G * T));
  BlockGraph k1 = must(BlockGraph::make({static_cast<int>(B), G, Z}, 128, F1));
  const int zq = Z > 1 ? 1 : P;
  int qi = must(k1.add_input(Shape{B, q, d}, {0, P, zq}, P));
  int ki = must(k1.add_input(Shape{B, d, L}, {0, 2, P}, 2));
  int vi = must(k1.add_input(Shape{B, L, d}, {0, 1, P}, 1));
  if (qknorm) {
    qi = must(k1.add_op(OpKind::RmsNorm, {qi}, dim_attr(2)));
    ki = must(k1.add_op(OpKind::RmsNorm, {ki}, dim_attr(1)));
  }
  int s = must(k1.add_op(OpKind::Matmul, {qi, ki}));
  int e = must(k1.add_op(OpKind::Exp, {s}));
  int ev = must(k1.add_op(OpKind::Matmul, {e, vi}));
  int aev = must(k1.add_op(OpKind::AccumSum, {ev}));
  int ae = must(k1.add_op(OpKind::AccumSumLd, {e}));
  must(k1.add_output(aev, {0, 2, zq}));
  must(k1.add_output(ae, {0, 2, zq}));
  auto parts = must(g.add_customized({Q, K, V}, std::move(k1), {"PartEV", "PartE"}));
  BlockGraph k2 =
      must(BlockGraph::make({static_cast<int>(B), static_cast<int>(q / tq), 1}, 128, G));
  int pi = must(k2.add_input(Shape{B, q, d * G}, {0, 1, P}, 2));
  int zi = must(k2.add_input(Shape{B, q, G}, {0, 1, P}, 2));
  int sev = must(k2.add_op(OpKind::AccumSum, {pi}));
  int se = must(k2.add_op(OpKind::AccumSum, {zi}));
  int o = must(k2.add_op(OpKind::Div, {sev, se}));
  must(k2.add_output(o, {0, 1, P}));
  auto outs = must(g.add_customized({parts[0], parts[1]}, std::move(k2), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

inline KernelGraph attention_program(int64_t B, int64_t q, int64_t d, int64_t L, bool qknorm,
                                     DType dt = DType::f16) {
  KernelGraph g;
  int Q = must(g.add_input("Q", Shape{B, q, d}, dt));
  int K = must(g.add_input("K", Shape{B, d, L}, dt));
  int V = must(g.add_input("V", Shape{B, L, d}, dt));
  if (qknorm) {
    Q = must(g.add_op(OpKind::RmsNorm, {Q}, dim_attr(2), "Qn"));
    K = must(g.add_op(OpKind::RmsNorm, {K}, dim_attr(1), "Kn"));
  }
  int s = must(g.add_op(OpKind::Matmul, {Q, K}, {}, "S"));
  int e = must(g.add_op(OpKind::Exp, {s}, {}, "E"));
  int z = must(g.add_op(OpKind::Sum, {e}, dim_attr(2), "Z"));
  int p = must(g.add_op(OpKind::Div, {e, z}, {}, "P"));
  int o = must(g.add_op(OpKind::Matmul, {p, V}, {}, "O"));
  must(g.mark_output(o));
  return g;
}

inline KernelGraph gatedmlp_program(int64_t m, int64_t k, int64_t n) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{k, n}, DType::f16));
  int w3 = must(g.add_input("W3", Shape{k, n}, DType::f16));
  int a = must(g.add_op(OpKind::Matmul, {x, w1}, {}, "A"));
  int b = must(g.add_op(OpKind::Matmul, {x, w3}, {}, "B"));
  int s = must(g.add_op(OpKind::Silu, {a}, {}, "S"));
  int o = must(g.add_op(OpKind::Mul, {s, b}, {}, "O"));
  must(g.mark_output(o));
  return g;
}

inline KernelGraph lora_program(int64_t m, int64_t k, int64_t n, int64_t r) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  int a = must(g.add_input("A", Shape{k, r}, DType::f16));
  int b = must(g.add_input("B", Shape{r, n}, DType::f16));
  int y = must(g.add_op(OpKind::Matmul, {x, w}, {}, "Y"));
  int t = must(g.add_op(OpKind::Matmul, {x, a}, {}, "T"));
  int z = must(g.add_op(OpKind::Matmul, {t, b}, {}, "Z"));
  int o = must(g.add_op(OpKind::Add, {y, z}, {}, "O"));
  must(g.mark_output(o));
  return g;
}

inline KernelGraph ntrans_program(int64_t rows, int64_t d) {
  KernelGraph g;
  int h = must(g.add_input("H", Shape{rows, d}, DType::f16));
  int x = must(g.add_input("X", Shape{rows, d}, DType::f16));
  int al = must(g.add_input("Alpha", Shape{rows, d}, DType::f16));
  int n = must(g.add_op(OpKind::RmsNorm, {h}, dim_attr(1), "N"));
  int dd = must(g.add_op(OpKind::Sub, {n, x}, {}, "D"));
  int m = must(g.add_op(OpKind::Mul, {al, dd}, {}, "M"));
  int s = must(g.add_op(OpKind::Add, {x, m}, {}, "S"));
  int o = must(g.add_op(OpKind::RmsNorm, {s}, dim_attr(1), "O"));
  must(g.mark_output(o));
  return g;
}

}  // namespace strata::testing
