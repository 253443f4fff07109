// Test support: μGraphs of the megakernel's generated ops (include/strata/mpk/generated_ops.h) at
// a model's decode shapes, with the weights in the nn.Linear layout read through a transpose in
// place: one customized kernel per op, a grid over the output columns and a loop over the
// contraction.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "strata/ir/graph_json.h"
#include "strata/mpk/generated_ops.h"
#include "strata/mpk/model_config.h"
#include "support/benchmark_graphs.h"

namespace strata::testing {

/// y = matmul(rms_norm(x, eps) · gain, transpose(w)): tiles of tn columns, tk inputs per
/// iteration (the rms statistic accumulated over the loop).
inline KernelGraph mpk_norm_matmul_graph(int64_t B, int64_t K, int64_t N, double eps, int64_t tn,
                                         int64_t tk) {
  KernelGraph g;
  int x = must(g.add_input("x", Shape{B, K}, DType::f16));
  int gain = must(g.add_input("gain", Shape{K}, DType::f16));
  int w = must(g.add_input("w", Shape{N, K}, DType::f16));
  int wt = must(g.add_op(OpKind::Transpose, {w}));
  const int grid = static_cast<int>((N + tn - 1) / tn), loop = static_cast<int>(K / tk);
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, loop));
  int xi = must(b.add_input(Shape{B, K}, {P, P, P}, 1));
  int gi = must(b.add_input(Shape{K}, {P, P, P}, 0));
  int wi = must(b.add_input(Shape{K, N}, {grid > 1 ? 1 : P, P, P}, 0));
  int xg = must(b.add_op(OpKind::Mul, {xi, gi}));
  int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xg, wi}))}));
  OpAttrs e;
  e.scalar = eps;
  int ax = must(b.add_op(OpKind::AccumRmsLd, {xi}, e));
  must(b.add_output(must(b.add_op(OpKind::Div, {am, ax})), {grid > 1 ? 1 : P, P, P}));
  must(g.mark_output(must(g.add_customized({x, gain, wt}, std::move(b)))[0], "y"));
  return g;
}

/// y = residual + matmul(a, transpose(w)).
inline KernelGraph mpk_matmul_residual_graph(int64_t B, int64_t K, int64_t N, int64_t tn,
                                             int64_t tk) {
  KernelGraph g;
  int a = must(g.add_input("a", Shape{B, K}, DType::f16));
  int w = must(g.add_input("w", Shape{N, K}, DType::f16));
  int r = must(g.add_input("residual", Shape{B, N}, DType::f16));
  int wt = must(g.add_op(OpKind::Transpose, {w}));
  const int grid = static_cast<int>((N + tn - 1) / tn), loop = static_cast<int>(K / tk);
  const GridMap cols = {grid > 1 ? 1 : P, P, P};
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, loop));
  int ai = must(b.add_input(Shape{B, K}, {P, P, P}, 1));
  int wi = must(b.add_input(Shape{K, N}, {grid > 1 ? 1 : P, P, P}, 0));
  int ri = must(b.add_input(Shape{B, N}, cols, P));
  int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {ai, wi}))}));
  must(b.add_output(must(b.add_op(OpKind::Add, {ri, am})), cols));
  must(g.mark_output(must(g.add_customized({a, wt, r}, std::move(b)))[0], "y"));
  return g;
}

/// y = silu(n · transpose(w_gate)) · (n · transpose(w_up)), n = rms_norm(x, eps) · gain.
inline KernelGraph mpk_gated_graph(int64_t B, int64_t K, int64_t N, double eps, int64_t tn,
                                   int64_t tk) {
  KernelGraph g;
  int x = must(g.add_input("x", Shape{B, K}, DType::f16));
  int gain = must(g.add_input("gain", Shape{K}, DType::f16));
  int wg = must(g.add_input("w_gate", Shape{N, K}, DType::f16));
  int wu = must(g.add_input("w_up", Shape{N, K}, DType::f16));
  int wgt = must(g.add_op(OpKind::Transpose, {wg}));
  int wut = must(g.add_op(OpKind::Transpose, {wu}));
  const int grid = static_cast<int>((N + tn - 1) / tn), loop = static_cast<int>(K / tk);
  const GridMap cols = {grid > 1 ? 1 : P, P, P};
  BlockGraph b = must(BlockGraph::make({grid, 1, 1}, 128, loop));
  int xi = must(b.add_input(Shape{B, K}, {P, P, P}, 1));
  int gi = must(b.add_input(Shape{K}, {P, P, P}, 0));
  int wgi = must(b.add_input(Shape{K, N}, cols, 0));
  int wui = must(b.add_input(Shape{K, N}, cols, 0));
  int xg = must(b.add_op(OpKind::Mul, {xi, gi}));
  int a1 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xg, wgi}))}));
  int a3 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xg, wui}))}));
  OpAttrs e;
  e.scalar = eps;
  int ax = must(b.add_op(OpKind::AccumRmsLd, {xi}, e));
  int n1 = must(b.add_op(OpKind::Div, {a1, ax}));
  int n3 = must(b.add_op(OpKind::Div, {a3, ax}));
  int o = must(b.add_op(OpKind::Mul, {must(b.add_op(OpKind::Silu, {n1})), n3}));
  must(b.add_output(o, cols));
  must(g.mark_output(must(g.add_customized({x, gain, wgt, wut}, std::move(b)))[0], "y"));
  return g;
}

/// The largest divisor of k that is at most `most`.
inline int64_t divisor_at_most(int64_t k, int64_t most) {
  for (int64_t t = std::min(k, most); t > 1; --t)
    if (k % t == 0) return t;
  return 1;
}

/// The four generated ops' μGraphs of model `m` by op name (tiles of tn columns, up to 32
/// inputs per iteration).
inline std::map<std::string, KernelGraph> mpk_generated_graphs(const mpk::ModelConfig& m,
                                                               int64_t tn = 16) {
  const int64_t H = m.hidden, Q = m.q_width(), I = m.intermediate;
  return {{"norm_qkv",
           mpk_norm_matmul_graph(m.batch, H, m.qkv_width(), m.eps, tn, divisor_at_most(H, 32))},
          {"o_proj_residual", mpk_matmul_residual_graph(m.batch, Q, H, tn, divisor_at_most(Q, 32))},
          {"norm_gate_up_silu", mpk_gated_graph(m.batch, H, I, m.eps, tn, divisor_at_most(H, 32))},
          {"down_residual", mpk_matmul_residual_graph(m.batch, I, H, tn, divisor_at_most(I, 32))}};
}

/// mpk_generated_graphs(m, tn) verified and emitted (prepare_generated), as the compiler's
/// generated set; a failure is a test failure naming it (the op is then left out).
inline std::shared_ptr<const mpk::GeneratedSet> mpk_generated_set(const mpk::ModelConfig& m,
                                                                  int64_t tn = 16) {
  auto set = std::make_shared<mpk::GeneratedSet>();
  for (auto& [op, graph] : mpk_generated_graphs(m, tn)) {
    auto gg = mpk::prepare_generated(m, op, graph, "test " + op);
    EXPECT_TRUE(gg.ok()) << (gg.ok() ? "" : gg.error().message);
    if (gg.ok()) set->emplace(op, std::move(*gg));
  }
  return set;
}

}  // namespace strata::testing
