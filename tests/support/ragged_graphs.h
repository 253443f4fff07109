// Test support: block graphs whose grid or loop splits do not divide their extents (ragged
// tiles, docs/codegen.md "Ragged tiles"), each with the naive program it implements where one
// exists. The CPU emulation test (codegen_ragged_test) and the GPU test (runtime_gpu_test) run
// them against the float64 interpreter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/benchmark_graphs.h"
#include "support/coverage_graphs.h"

namespace strata::testing {

struct RaggedCase {
  std::string name;
  KernelGraph graph;
  std::optional<KernelGraph> program;  ///< the naive program the graph implements
  double amp = 0.5;                    ///< inputs uniform in ±amp
};

/// matmul(rms_norm(X), W) as one kernel (the reference RMSNorm μGraph) with a grid of `grid`
/// blocks over N and `loops` iterations over K: ragged wherever they do not divide.
inline KernelGraph rmsnorm_ragged(int64_t m, int64_t k, int64_t n, int grid, int loops) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, loops));
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

/// X·W with the contraction K split over `loops` iterations and N over `grid` blocks.
inline KernelGraph matmul_ragged(int64_t m, int64_t k, int64_t n, int grid, int loops) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, loops));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, 1));
  int wi = must(b.add_input(Shape{k, n}, {1, P, P}, 0));
  int mm = must(b.add_op(OpKind::Matmul, {xi, wi}));
  int am = must(b.add_op(OpKind::AccumSum, {mm}));
  must(b.add_output(am, {1, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

inline KernelGraph matmul_program(int64_t m, int64_t k, int64_t n) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  must(g.mark_output(must(g.add_op(OpKind::Matmul, {x, w}, {}, "O"))));
  return g;
}

// N = 1000 over 9 blocks: tiles of 112, the last 104 wide (loads zero-filled, stores clipped).
inline RaggedCase ragged_rmsnorm_n1000() {
  return {"rmsnorm_n1000", rmsnorm_ragged(4, 256, 1000, 9, 4), rmsnorm_program(4, 256, 1000)};
}

// N = 1000 over 7 blocks (tiles of 143, the last 142: scalar copies) and K = 300 over 7
// iterations (43 each, the last 42): the RMS divides by the 300 elements present, not 7 · 43.
inline RaggedCase ragged_rmsnorm_k300() {
  return {"rmsnorm_k300", rmsnorm_ragged(4, 300, 1000, 7, 7), rmsnorm_program(4, 300, 1000)};
}

// K = 1100 in 35 iterations of 32 (the last 12: a k-step of 16 half present), tensor cores.
inline RaggedCase ragged_matmul_k1100_tc() {
  return {"matmul_k1100_tc", matmul_ragged(16, 1100, 256, 4, 35), matmul_program(16, 1100, 256)};
}

// K = 1100 in 9 iterations of 123 (the last 116), N = 250 over 2 blocks of 125.
inline RaggedCase ragged_matmul_k1100_odd() {
  return {"matmul_k1100_odd", matmul_ragged(8, 1100, 250, 2, 9), matmul_program(8, 1100, 250)};
}

// Gated MLP silu(X·W1) ⊙ (X·W3) with hidden 1100 over 23 blocks (tiles of 48, the last 44).
inline RaggedCase ragged_gatedmlp_h1100() {
  KernelGraph prog = gatedmlp_program(8, 256, 1100);
  KernelGraph g;
  int x = must(g.add_input("X", Shape{8, 256}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{256, 1100}, DType::f16));
  int w3 = must(g.add_input("W3", Shape{256, 1100}, DType::f16));
  BlockGraph b = must(BlockGraph::make({23, 1, 1}, 128, 4));
  int xi = must(b.add_input(Shape{8, 256}, {P, P, P}, 1));
  int w1i = must(b.add_input(Shape{256, 1100}, {1, P, P}, 0));
  int w3i = must(b.add_input(Shape{256, 1100}, {1, P, P}, 0));
  int a1 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, w1i}))}));
  int a3 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, w3i}))}));
  int o = must(b.add_op(OpKind::Mul, {must(b.add_op(OpKind::Silu, {a1})), a3}));
  must(b.add_output(o, {1, P, P}));
  must(g.mark_output(must(g.add_customized({x, w1, w3}, std::move(b), {"O"}))[0]));
  return {"gatedmlp_h1100", g, prog};
}

// The whole gated MLP (silu(X·W1) ⊙ (X·W3))·W2 in one kernel: the loop runs over hidden 1100 in
// 23 iterations of 48 (the last 44), so the second matmul's contraction is ragged per
// iteration and its A operand is computed: its fragments are zeroed at absent indices.
inline RaggedCase ragged_gatedmlp_down_h1100() {
  const int64_t m = 8, k = 64, h = 1100, n = 128;
  KernelGraph prog;
  {
    int x = must(prog.add_input("X", Shape{m, k}, DType::f16));
    int w1 = must(prog.add_input("W1", Shape{k, h}, DType::f16));
    int w3 = must(prog.add_input("W3", Shape{k, h}, DType::f16));
    int w2 = must(prog.add_input("W2", Shape{h, n}, DType::f16));
    int s = must(prog.add_op(OpKind::Silu, {must(prog.add_op(OpKind::Matmul, {x, w1}))}));
    int a = must(prog.add_op(OpKind::Mul, {s, must(prog.add_op(OpKind::Matmul, {x, w3}))}));
    must(prog.mark_output(must(prog.add_op(OpKind::Matmul, {a, w2}, {}, "O"))));
  }
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{k, h}, DType::f16));
  int w3 = must(g.add_input("W3", Shape{k, h}, DType::f16));
  int w2 = must(g.add_input("W2", Shape{h, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, 23));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, P));
  int w1i = must(b.add_input(Shape{k, h}, {P, P, P}, 1));
  int w3i = must(b.add_input(Shape{k, h}, {P, P, P}, 1));
  int w2i = must(b.add_input(Shape{h, n}, {1, P, P}, 0));
  int s = must(b.add_op(OpKind::Silu, {must(b.add_op(OpKind::Matmul, {xi, w1i}))}));
  int a = must(b.add_op(OpKind::Mul, {s, must(b.add_op(OpKind::Matmul, {xi, w3i}))}));
  int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {a, w2i}))}));
  must(b.add_output(acc, {1, P, P}));
  must(g.mark_output(must(g.add_customized({x, w1, w3, w2}, std::move(b), {"O"}))[0]));
  return {"gatedmlp_down_h1100", g, prog};
}

// Row reductions over a dim split raggedly across 9 blocks (tiles of 112, the last 104): a max
// of −x² (whose zero-filled absent elements would win), a mean (divided by the elements
// present), a softmax (exp of absent elements left out of the sum), an RMS norm.
inline RaggedCase ragged_rows_grid() {
  const int64_t rows = 4, n = 1000;
  const int grid = 9;
  KernelGraph g;
  int x = must(g.add_input("X", Shape{rows, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{rows, n}, {1, P, P}, P));
  int neg =
      must(b.add_op(OpKind::MulScalar, {must(b.add_op(OpKind::Square, {xi}))}, scalar_attr(-1)));
  int mx = must(b.add_op(OpKind::Max, {neg}, dim_attr(1)));
  int mean = must(b.add_op(OpKind::Mean, {xi}, dim_attr(1)));
  int mxx = must(b.add_op(OpKind::Max, {xi}, dim_attr(1)));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {xi, mxx}))}));
  int sm = must(b.add_op(OpKind::Div, {e, must(b.add_op(OpKind::Sum, {e}, dim_attr(1)))}));
  OpAttrs norm = dim_attr(1);
  norm.scalar = 1e-5;
  int rn = must(b.add_op(OpKind::RmsNorm, {xi}, norm));
  // (One iteration: each accumulator is its input.)
  for (int t : {mx, mean, sm, rn})
    must(b.add_output(must(b.add_op(OpKind::AccumSum, {t})), {1, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b), {"MX", "MEAN", "SM", "RN"}));
  for (int o : outs) must(g.mark_output(o));
  return {"rows_ragged_grid", g, std::nullopt, 2.0};
}

// Row reductions over a loop split of 1000 into 7 iterations of 143 (the last 142), rows split
// raggedly over 3 blocks (3, 3, 2): running maxima, means and RMS values over the loop, checked
// against the naive program. The maximum is of −e^x: every value is negative, so a zero read at
// an absent position would win, and the result (about −e^−2) is far from f16's subnormals.
inline RaggedCase ragged_rows_loop() {
  const int64_t rows = 8, n = 1000;
  KernelGraph prog;
  {
    int x = must(prog.add_input("X", Shape{rows, n}, DType::f16));
    int neg = must(
        prog.add_op(OpKind::MulScalar, {must(prog.add_op(OpKind::Exp, {x}))}, scalar_attr(-1)));
    must(prog.mark_output(must(prog.add_op(OpKind::Max, {neg}, dim_attr(1), "MX"))));
    must(prog.mark_output(must(prog.add_op(OpKind::Mean, {x}, dim_attr(1), "MEAN"))));
  }
  KernelGraph g;
  int x = must(g.add_input("X", Shape{rows, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({3, 1, 1}, 128, 7));
  int xi = must(b.add_input(Shape{rows, n}, {0, P, P}, 1));
  int neg =
      must(b.add_op(OpKind::MulScalar, {must(b.add_op(OpKind::Exp, {xi}))}, scalar_attr(-1)));
  int mx = must(b.add_op(OpKind::AccumMaxLd, {neg}));
  int mean = must(b.add_op(OpKind::AccumMeanLd, {xi}));
  must(b.add_output(mx, {0, P, P}));
  must(b.add_output(mean, {0, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b), {"MX", "MEAN"}));
  for (int o : outs) must(g.mark_output(o));
  return {"rows_ragged_loop", g, prog, 2.0};
}

// A computed operand that is not finite at absent indices (log((X·W1)²) is −inf there, and
// −inf · 0 is NaN) reaches a ragged contraction: its fragments must be zeroed past the present
// extent.
inline RaggedCase ragged_log_down_h220() {
  const int64_t m = 16, k = 32, h = 220, n = 64;
  KernelGraph prog;
  {
    int x = must(prog.add_input("X", Shape{m, k}, DType::f16));
    int w1 = must(prog.add_input("W1", Shape{k, h}, DType::f16));
    int w2 = must(prog.add_input("W2", Shape{h, n}, DType::f16));
    int e = must(prog.add_op(
        OpKind::Log,
        {must(prog.add_op(OpKind::Square, {must(prog.add_op(OpKind::Matmul, {x, w1}))}))}));
    must(prog.mark_output(must(prog.add_op(OpKind::Matmul, {e, w2}, {}, "O"))));
  }
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w1 = must(g.add_input("W1", Shape{k, h}, DType::f16));
  int w2 = must(g.add_input("W2", Shape{h, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 7));  // 220 = 6 · 32 + 28
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, P));
  int w1i = must(b.add_input(Shape{k, h}, {P, P, P}, 1));
  int w2i = must(b.add_input(Shape{h, n}, {P, P, P}, 0));
  int e = must(b.add_op(
      OpKind::Log, {must(b.add_op(OpKind::Square, {must(b.add_op(OpKind::Matmul, {xi, w1i}))}))}));
  int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {e, w2i}))}));
  must(b.add_output(acc, {P, P, P}));
  must(g.mark_output(must(g.add_customized({x, w1, w2}, std::move(b), {"O"}))[0]));
  return {"log_down_h220", g, prog, 0.25};
}

/// Safe attention over n keys in `loops` iterations that do not divide n (the last tile is
/// shorter): the online softmax (running max, rescaling accumulators) over a ragged key loop,
/// K stored as [N, D] and read through a transpose. Two heads of `rows` query rows, one block
/// each. Scores at absent keys must leave the running max, the row sums and the product
/// with V alone (docs/codegen.md, "Ragged tiles").
inline KernelGraph attention_ragged_program(int64_t rows, int64_t n, int64_t d) {
  KernelGraph prog;
  int q = must(prog.add_input("Q", Shape{2, rows, d}, DType::f16));
  int k = must(prog.add_input("K", Shape{2, n, d}, DType::f16));
  int v = must(prog.add_input("V", Shape{2, n, d}, DType::f16));
  int kt = must(prog.add_op(OpKind::Transpose, {k}));
  int s = must(prog.add_op(OpKind::MulScalar, {must(prog.add_op(OpKind::Matmul, {q, kt}))},
                           scalar_attr(0.125)));
  int m = must(prog.add_op(OpKind::Max, {s}, dim_attr(2)));
  int e = must(prog.add_op(OpKind::Exp, {must(prog.add_op(OpKind::Sub, {s, m}))}));
  int p = must(prog.add_op(OpKind::Div, {e, must(prog.add_op(OpKind::Sum, {e}, dim_attr(2)))}));
  must(prog.mark_output(must(prog.add_op(OpKind::Matmul, {p, v}, {}, "O"))));
  return prog;
}

inline KernelGraph attention_ragged(int64_t rows, int64_t n, int64_t d, int loops) {
  KernelGraph g;
  int q = must(g.add_input("Q", Shape{2, rows, d}, DType::f16));
  int k = must(g.add_input("K", Shape{2, n, d}, DType::f16));
  int v = must(g.add_input("V", Shape{2, n, d}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, 1, 1}, 128, loops));
  int qi = must(b.add_input(Shape{2, rows, d}, {0, P, P}, P));
  int ki = must(b.add_input(Shape{2, n, d}, {0, P, P}, 1));
  int vi = must(b.add_input(Shape{2, n, d}, {0, P, P}, 1));
  int s = must(b.add_op(OpKind::Matmul, {qi, must(b.add_op(OpKind::Transpose, {ki}))}));
  s = must(b.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)));
  int m = must(b.add_op(OpKind::RunningMax, {s}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {s, m}))}));
  int l = must(b.add_op(OpKind::Sum, {e}, dim_attr(2)));
  int o = must(b.add_op(OpKind::AccumRescale, {must(b.add_op(OpKind::Matmul, {e, vi})), m}));
  int ls = must(b.add_op(OpKind::AccumRescale, {l, m}));
  must(b.add_output(must(b.add_op(OpKind::Div, {o, ls})), {0, P, P}));
  must(g.mark_output(must(g.add_customized({q, k, v}, std::move(b), {"O"}))[0]));
  return g;
}

// 1025 keys in 65 iterations of 16 (the last holds one key): tensor-core steps throughout.
inline RaggedCase ragged_attention_k1025() {
  return {"attention_k1025", attention_ragged(4, 1025, 64, 65),
          attention_ragged_program(4, 1025, 64), 2.0};
}

// 203 keys in 4 iterations of 51 (the last 50): odd tiles, the general matmul path.
inline RaggedCase ragged_attention_k203() {
  return {"attention_k203", attention_ragged(16, 203, 32, 4), attention_ragged_program(16, 203, 32),
          2.0};
}

/// Safe attention as the search writes it (the row sums as accum_rescale_ld of the exps):
/// two heads of `rows` query rows, n keys in `loops` iterations of a tile of 32 whose last
/// one is partly absent (1000 keys: the last iteration holds 8). The chain runs on fragments
/// (FlashAttention style) and masks the absent columns of the scores (docs/codegen.md,
/// "Ragged tiles").
/// With `row_blocks` > 1 the query rows are split across blocks too, raggedly where they do not
/// divide (the last block's rows absent: read as zeros, never saved).
inline KernelGraph attention_ragged_chain(int64_t rows, int64_t n, int64_t d, int loops,
                                          int row_blocks = 1) {
  KernelGraph g;
  int q = must(g.add_input("Q", Shape{2, rows, d}, DType::f16));
  int k = must(g.add_input("K", Shape{2, n, d}, DType::f16));
  int v = must(g.add_input("V", Shape{2, n, d}, DType::f16));
  BlockGraph b = must(BlockGraph::make({2, row_blocks, 1}, 128, loops));
  int qi = must(b.add_input(Shape{2, rows, d}, {0, row_blocks > 1 ? 1 : P, P}, P));
  int ki = must(b.add_input(Shape{2, n, d}, {0, P, P}, 1));
  int vi = must(b.add_input(Shape{2, n, d}, {0, P, P}, 1));
  int s = must(b.add_op(OpKind::Matmul, {qi, must(b.add_op(OpKind::Transpose, {ki}))}));
  s = must(b.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)));
  int m = must(b.add_op(OpKind::RunningMax, {s}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {s, m}))}));
  int o = must(b.add_op(OpKind::AccumRescale, {must(b.add_op(OpKind::Matmul, {e, vi})), m}));
  int ls = must(b.add_op(OpKind::AccumRescaleLd, {e, m}));
  must(b.add_output(must(b.add_op(OpKind::Div, {o, ls})), {0, row_blocks > 1 ? 1 : P, P}));
  must(g.mark_output(must(g.add_customized({q, k, v}, std::move(b), {"O"}))[0]));
  return g;
}

// 56 query rows in 2 blocks of 32 (the last holds 24) over 1000 keys in 32 iterations of 32.
inline RaggedCase ragged_attention_chain_rows56_k1000() {
  return {"attention_chain_rows56_k1000", attention_ragged_chain(56, 1000, 64, 32, 2),
          attention_ragged_program(56, 1000, 64), 2.0};
}

// 1000 keys in 32 iterations of 32 (the last holds 8), 32 query rows per head: the chain.
inline RaggedCase ragged_attention_chain_k1000() {
  return {"attention_chain_k1000", attention_ragged_chain(32, 1000, 64, 32),
          attention_ragged_program(32, 1000, 64), 2.0};
}

/// Every case above.
inline std::vector<RaggedCase> ragged_cases() {
  return {ragged_rmsnorm_n1000(),    ragged_rmsnorm_k300(),   ragged_matmul_k1100_tc(),
          ragged_matmul_k1100_odd(), ragged_gatedmlp_h1100(), ragged_gatedmlp_down_h1100(),
          ragged_rows_grid(),        ragged_rows_loop(),      ragged_log_down_h220(),
          ragged_attention_k1025(),  ragged_attention_k203(),  ragged_attention_chain_k1000(),
          ragged_attention_chain_rows56_k1000()};
}

}  // namespace strata::testing
