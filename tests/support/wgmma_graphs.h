// Test support: block matmuls shaped for warpgroup MMA (PlanOptions::wgmma; docs/codegen.md,
// "wgmma"), shared by the emulation tests (codegen_wgmma_test) and the GPU tests
// (wgmma_gpu_test).
#pragma once

#include "support/benchmark_graphs.h"

namespace strata::testing {

/// Y = X · W (+ an epilogue) over a for-loop along K: X [m, k], W [k, n], tiles of kt along K;
/// `threads` per block, one block.
inline KernelGraph plain_matmul(int64_t m, int64_t k, int64_t n, int64_t kt, int threads,
                                bool gelu, DType dt) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, dt));
  int w = must(g.add_input("W", Shape{k, n}, dt));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, threads, static_cast<int>(k / kt)));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, 1));
  int wi = must(b.add_input(Shape{k, n}, {P, P, P}, 0));
  int mm = must(b.add_op(OpKind::Matmul, {xi, wi}));
  if (gelu) mm = must(b.add_op(OpKind::Gelu, {mm}));
  int acc = must(b.add_op(OpKind::AccumSum, {mm}));
  must(b.add_output(acc, {P, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"Y"}));
  must(g.mark_output(outs[0]));
  return g;
}

/// Y = gelu(X · Wᵀ) with W stored [n, k] (a K-major B read through a transpose in place), one
/// iteration of K = k.
inline KernelGraph plain_matmul_nt(int64_t m, int64_t k, int64_t n, int threads, DType dt) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, dt));
  int w = must(g.add_input("W", Shape{n, k}, dt));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, threads, 1));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, P));
  int wi = must(b.add_input(Shape{n, k}, {P, P, P}, P));
  int wt = must(b.add_op(OpKind::Transpose, {wi}));
  int y = must(b.add_op(OpKind::Gelu, {must(b.add_op(OpKind::Matmul, {xi, wt}))}));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {y})), {P, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"Y"}));
  must(g.mark_output(outs[0]));
  return g;
}

/// Y = Σ_it f(X_it) · W_it over a ragged loop: K = k in `loops` iterations whose tile does not
/// divide it (the last one shorter; loads zero-fill the absent rows). With `computed_a` the A
/// operand is log(X²), a computed tile that is −inf at absent indices (−inf · 0 is NaN): the
/// contraction must zero A past the present extent (warpgroup_mma's MASK_A).
inline KernelGraph ragged_matmul(int64_t m, int64_t k, int64_t n, int loops, bool computed_a) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, loops));
  int xi = must(b.add_input(Shape{m, k}, {P, P, P}, 1));
  int wi = must(b.add_input(Shape{k, n}, {P, P, P}, 0));
  if (computed_a) xi = must(b.add_op(OpKind::Log, {must(b.add_op(OpKind::Square, {xi}))}));
  int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, wi}))}));
  must(b.add_output(acc, {P, P, P}));
  auto outs = must(g.add_customized({x, w}, std::move(b), {"Y"}));
  must(g.mark_output(outs[0]));
  return g;
}

}  // namespace strata::testing
