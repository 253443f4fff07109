// Test support: customized kernels whose results are cut into parts by predefined slices (a fused
// QKV projection's Q, K and V), for the routed outputs of docs/codegen.md ("Routed outputs"):
// the emulation tests run them, the optimizer and cost-model tests check which are routed.
#pragma once

#include <string>
#include <vector>

#include "support/op_coverage_graphs.h"  // slice_attr

namespace strata::testing {

/// Adds one slice of `t` along `dim` per range [starts[i], ends[i]), each a graph output P<i>.
inline void slice_outputs(KernelGraph& g, int t, int dim, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends) {
  for (size_t i = 0; i < starts.size(); ++i)
    must(g.mark_output(must(g.add_op(OpKind::Slice, {t}, slice_attr(dim, starts[i], ends[i]),
                                     "P" + std::to_string(i)))));
}

/// T = 0.5 · X·W with X f16[16, 64], W f16[64, 96]: the grid splits W's (and T's) 96 columns in
/// tiles of `tn`, the for-loop K in 4 steps of 16; then T's columns sliced into
/// [starts[i], ends[i]) as outputs. With `extra_reader` a predefined relu of T is an output too.
inline KernelGraph sliced_projection(const std::vector<int64_t>& starts,
                                     const std::vector<int64_t>& ends, int64_t tn = 16,
                                     bool extra_reader = false) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 64}, DType::f16));
  int w = must(g.add_input("W", Shape{64, 96}, DType::f16));
  BlockGraph b = must(BlockGraph::make({static_cast<int>(96 / tn), 1, 1}, 128, 4));
  int xi = must(b.add_input(Shape{16, 64}, {P, P, P}, 1));  // [16, 16]
  int wi = must(b.add_input(Shape{64, 96}, {1, P, P}, 0));  // [16, tn]
  int m = must(b.add_op(OpKind::Matmul, {xi, wi}));
  int acc = must(b.add_op(OpKind::AccumSum, {m}));
  OpAttrs half;
  half.scalar = 0.5;
  int s = must(b.add_op(OpKind::MulScalar, {acc}, half));
  must(b.add_output(s, {1, P, P}));
  int t = must(g.add_customized({x, w}, std::move(b), {"T"}))[0];
  slice_outputs(g, t, 1, starts, ends);
  if (extra_reader) must(g.mark_output(must(g.add_op(OpKind::Relu, {t}, {}, "R"))));
  return g;
}

/// T = rms_norm(X) over X f16[8, 64] rows, two rows per block (a rowwise kernel), then T's rows
/// sliced into [starts[i], ends[i]) as outputs.
inline KernelGraph sliced_norm_rows(const std::vector<int64_t>& starts,
                                    const std::vector<int64_t>& ends) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{8, 64}, DType::f16));
  BlockGraph b = must(BlockGraph::make({4, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{8, 64}, {0, P, P}, P));  // [2, 64]
  int n = must(b.add_op(OpKind::RmsNorm, {xi}, dim_attr(1)));
  int o = must(b.add_op(OpKind::AccumSum, {n}));
  must(b.add_output(o, {0, P, P}));
  int t = must(g.add_customized({x}, std::move(b), {"T"}))[0];
  slice_outputs(g, t, 0, starts, ends);
  return g;
}

}  // namespace strata::testing
