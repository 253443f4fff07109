// Test support: block graphs whose matmuls have tile extents that are not multiples of the mma
// step (N: 8, K: 16), which the code generator pads to run them on tensor cores
// (docs/codegen.md, "Ragged tiles": padding to the mma step), alone and together with ragged
// tiles; each with the naive program it implements where one exists. The CPU emulation test
// (codegen_mma_padding_test) and the GPU test (runtime_gpu_test) run them against the float64
// interpreter.
#pragma once

#include <string>
#include <vector>

#include "support/ragged_graphs.h"

namespace strata::testing {

/// silu(X·W) for X [m, k], W [k, n] in one block and one iteration: odd K and N tiles, the
/// product stored through its epilogue.
inline RaggedCase padded_matmul_epilogue(int64_t m, int64_t k, int64_t n) {
  KernelGraph prog;
  {
    int x = must(prog.add_input("X", Shape{m, k}, DType::f16));
    int w = must(prog.add_input("W", Shape{k, n}, DType::f16));
    must(prog.mark_output(
        must(prog.add_op(OpKind::Silu, {must(prog.add_op(OpKind::Matmul, {x, w}))}, {}, "O"))));
  }
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, P));
  int wi = must(b.add_input(Shape{k, n}, {P, P, P}, P));
  int s = must(b.add_op(OpKind::Silu, {must(b.add_op(OpKind::Matmul, {xi, wi}))}));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {s})), {P, P, P}));
  must(g.mark_output(must(g.add_customized({x, w}, std::move(b), {"O"}))[0]));
  return {"pad_epilogue_k" + std::to_string(k) + "_n" + std::to_string(n), g, prog};
}

/// S = X·Wᵀ over a batch of two, E = exp(S / 8), O = E·V, in one block and one iteration:
/// B read transposed from a [batch, n, k] tile whose padded rows lie inside each batch, and a
/// computed A operand (E) whose contraction is padded.
inline RaggedCase padded_batched_chain(int64_t m, int64_t k, int64_t n, int64_t d) {
  auto build = [&](KernelGraph& g, bool kernel) {
    int x = must(g.add_input("X", Shape{2, m, k}, DType::f16));
    int w = must(g.add_input("W", Shape{2, n, k}, DType::f16));
    int v = must(g.add_input("V", Shape{2, n, d}, DType::f16));
    if (!kernel) {
      int s = must(g.add_op(OpKind::Matmul, {x, must(g.add_op(OpKind::Transpose, {w}))}));
      int e =
          must(g.add_op(OpKind::Exp, {must(g.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)))}));
      must(g.mark_output(must(g.add_op(OpKind::Matmul, {e, v}, {}, "O"))));
      return;
    }
    BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 1));
    int xi = must(b.add_input(Shape{2, m, k}, {P, P, P}, P));
    int wi = must(b.add_input(Shape{2, n, k}, {P, P, P}, P));
    int vi = must(b.add_input(Shape{2, n, d}, {P, P, P}, P));
    int s = must(b.add_op(OpKind::Matmul, {xi, must(b.add_op(OpKind::Transpose, {wi}))}));
    int e =
        must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)))}));
    int o = must(b.add_op(OpKind::Matmul, {e, vi}));
    must(b.add_output(must(b.add_op(OpKind::AccumSum, {o})), {P, P, P}));
    must(g.mark_output(must(g.add_customized({x, w, v}, std::move(b), {"O"}))[0]));
  };
  KernelGraph prog, g;
  build(prog, false);
  build(g, true);
  return {"pad_batched_chain_k" + std::to_string(k) + "_n" + std::to_string(n), g, prog};
}

/// The first kernel of split-KV decode attention (the form the search finds for
/// llama3_8b_attn_d1_kv4097): `heads` blocks along x, the n keys split over `splits` blocks
/// along y and each block's part over `loops` iterations; per block the rescaled row sums L,
/// the rescaled partial product O and the row maxima M of its keys. Tiles of keys that are no
/// multiple of 8 / 16 pad Q·Kᵀ's N and E·V's K; splits and loops that do not divide n make the
/// last tiles ragged too.
inline KernelGraph split_kv_attention(int64_t heads, int64_t rows, int64_t n, int64_t d, int splits,
                                      int loops) {
  KernelGraph g;
  int q = must(g.add_input("Q", Shape{heads, rows, d}, DType::f16));
  int k = must(g.add_input("K", Shape{heads, n, d}, DType::f16));
  int v = must(g.add_input("V", Shape{heads, n, d}, DType::f16));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(heads), splits, 1}, 128, loops));
  int qi = must(b.add_input(Shape{heads, rows, d}, {0, P, P}, P));
  int ki = must(b.add_input(Shape{heads, n, d}, {0, 1, P}, 1));
  int vi = must(b.add_input(Shape{heads, n, d}, {0, 1, P}, 1));
  int s = must(b.add_op(OpKind::Matmul, {qi, must(b.add_op(OpKind::Transpose, {ki}))}));
  s = must(b.add_op(OpKind::MulScalar, {s}, scalar_attr(0.125)));
  int m = must(b.add_op(OpKind::RunningMax, {s}));
  int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Sub, {s, m}))}));
  int l = must(b.add_op(OpKind::Sum, {e}, dim_attr(2)));
  int o = must(b.add_op(OpKind::Matmul, {e, vi}));
  int la = must(b.add_op(OpKind::AccumRescale, {l, m}));
  int oa = must(b.add_op(OpKind::AccumRescale, {o, m}));
  int ma = must(b.add_op(OpKind::AccumMaxLd, {s}));
  must(b.add_output(la, {0, 2, P}));
  must(b.add_output(oa, {0, 2, P}));
  must(b.add_output(ma, {0, 2, P}));
  auto outs = must(g.add_customized({q, k, v}, std::move(b), {"L", "O", "M"}));
  for (int t : outs) must(g.mark_output(t));
  return g;
}

/// Every case: plain padded matmuls (odd K and N tiles, a register accumulator over a loop,
/// a batch with transposed B and a computed A) and padding together with ragged tiles (a
/// ragged loop over K, split-KV attention over 300 and 521 keys).
inline std::vector<RaggedCase> mma_padding_cases() {
  std::vector<RaggedCase> cases;
  // [16, 40] × [40, 21]: K 40 → 48, N 21 → 24 (an odd N: the last pair holds one column).
  cases.push_back(padded_matmul_epilogue(16, 40, 21));
  // [20, 24] × [24, 3]: a tiny N padded to one step.
  cases.push_back(padded_matmul_epilogue(20, 24, 3));
  // X [16, 120] · W [120, 75]: N in 3 blocks of 25 (→ 32), K in 3 iterations of 40 (→ 48),
  // added into a register accumulator whose odd last column pair is dumped alone.
  cases.push_back(
      {"pad_loop_k120_n75", matmul_ragged(16, 120, 75, 3, 3), matmul_program(16, 120, 75)});
  // K = 110 in 3 iterations of 37 (the last 36: ragged) padded to 48; N 75 over 3 blocks of 25.
  cases.push_back(
      {"pad_ragged_loop_k110_n75", matmul_ragged(16, 110, 75, 3, 3), matmul_program(16, 110, 75)});
  cases.push_back(padded_batched_chain(16, 40, 21, 24));
  // 300 keys in 4 splits of 75, 2 iterations of 38 (the last 37): N 38 → 40, K 38 → 48.
  cases.push_back(
      {"pad_splitkv_n300_s4", split_kv_attention(2, 4, 300, 64, 4, 2), std::nullopt, 2.0});
  // 300 keys in 7 splits of 43 (the last 42), one iteration: N 43 → 48, K 43 → 48.
  cases.push_back(
      {"pad_splitkv_n300_s7", split_kv_attention(2, 4, 300, 64, 7, 1), std::nullopt, 2.0});
  // 521 keys in 4 splits of 131 (the last 128), 2 iterations of 66 (ragged in the last block's
  // second iteration): the shape of kv4097's 129 keys in tiles of 65.
  cases.push_back(
      {"pad_splitkv_n521_s4", split_kv_attention(2, 4, 521, 64, 4, 2), std::nullopt, 2.0});
  return cases;
}

}  // namespace strata::testing
