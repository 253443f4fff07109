// Tests of the executor: hand-computed kernel ops, block-graph semantics against kernel-level
// equivalents in doubles, and agreement of the double and finite-field domains.
#include <gtest/gtest.h>

#include <cmath>

#include "interp/executor.h"
#include "strata/interp/interpreter.h"
#include "verify/field_arith.h"

namespace strata {
namespace {

constexpr int X = 0, Y = 1, Z = 2;
constexpr int kPhi = kReplicate;

HostTensor T(Shape s, std::vector<double> v) {
  return HostTensor(s, std::move(v));
}

std::vector<HostTensor> run(const KernelGraph& g, const std::vector<HostTensor>& in,
                            int threads = 0) {
  auto r = run_reference(g, in, ExecOptions{threads});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::vector<HostTensor>{};
}

/// A one-op kernel graph over inputs of the given shapes.
KernelGraph one_op(OpKind kind, std::vector<Shape> shapes, OpAttrs attrs = {}) {
  KernelGraph g;
  std::vector<int> ins;
  for (size_t i = 0; i < shapes.size(); ++i)
    ins.push_back(*g.add_input("I" + std::to_string(i), shapes[i], DType::f32));
  auto t = g.add_op(kind, ins, attrs, "O");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  EXPECT_TRUE(g.mark_output(*t).ok());
  return g;
}

void expect_near(const HostTensor& a, const HostTensor& b, double tol = 1e-12) {
  ASSERT_EQ(a.shape, b.shape);
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << "element " << index_str(a.shape, i);
}

// ---- kernel ops, hand-computed ----------------------------------------------------------

TEST(KernelOps, SumWithToSumsConsecutiveGroups) {
  OpAttrs a;
  a.dim = 1;
  a.to = 2;
  auto out = run(one_op(OpKind::Sum, {{2, 6}}, a),
                 {T({2, 6}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60})});
  EXPECT_EQ(out[0].shape, (Shape{2, 2}));
  EXPECT_EQ(out[0].data, (std::vector<double>{6, 15, 60, 150}));
  a.dim = 0;
  a.to = 1;
  out = run(one_op(OpKind::Sum, {{3, 2}}, a), {T({3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(out[0].shape, (Shape{1, 2}));
  EXPECT_EQ(out[0].data, (std::vector<double>{9, 12}));
}

TEST(KernelOps, MeanDividesByGroupSize) {
  OpAttrs a;
  a.dim = 0;
  a.to = 2;
  auto out = run(one_op(OpKind::Mean, {{4, 2}}, a), {T({4, 2}, {1, 2, 3, 4, 5, 6, 7, 9})});
  EXPECT_EQ(out[0].data, (std::vector<double>{2, 3, 6, 7.5}));
}

TEST(KernelOps, RmsNormOnEachDim) {
  HostTensor x = T({2, 2}, {3, 4, 0, 5});
  OpAttrs a;
  a.dim = 1;  // rows: rms(3,4) = sqrt(12.5), rms(0,5) = sqrt(12.5)
  auto out = run(one_op(OpKind::RmsNorm, {{2, 2}}, a), {x});
  double r = std::sqrt(12.5);
  expect_near(out[0], T({2, 2}, {3 / r, 4 / r, 0, 5 / r}));
  a.dim = 0;  // columns: rms(3,0) = sqrt(4.5), rms(4,5) = sqrt(20.5)
  out = run(one_op(OpKind::RmsNorm, {{2, 2}}, a), {x});
  expect_near(out[0], T({2, 2}, {3 / std::sqrt(4.5), 4 / std::sqrt(20.5), 0, 5 / std::sqrt(20.5)}));
}

TEST(KernelOps, ConcatAlongEachDim) {
  OpAttrs a;
  a.dim = 1;
  auto out = run(one_op(OpKind::Concat, {{2, 1}, {2, 2}}, a),
                 {T({2, 1}, {1, 2}), T({2, 2}, {3, 4, 5, 6})});
  EXPECT_EQ(out[0].data, (std::vector<double>{1, 3, 4, 2, 5, 6}));
  a.dim = 0;
  out = run(one_op(OpKind::Concat, {{1, 2}, {2, 2}}, a),
            {T({1, 2}, {1, 2}), T({2, 2}, {3, 4, 5, 6})});
  EXPECT_EQ(out[0].data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(KernelOps, BinaryOpsBroadcast) {
  HostTensor a = T({2, 3}, {1, 2, 3, 4, 5, 6}), row = T({3}, {10, 20, 30}), col = T({2, 1}, {2, 4});
  EXPECT_EQ(run(one_op(OpKind::Add, {{2, 3}, {3}}), {a, row})[0].data,
            (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(run(one_op(OpKind::Sub, {{2, 1}, {2, 3}}), {col, a})[0].data,
            (std::vector<double>{1, 0, -1, 0, -1, -2}));
  EXPECT_EQ(run(one_op(OpKind::Mul, {{2, 3}, {2, 1}}), {a, col})[0].data,
            (std::vector<double>{2, 4, 6, 16, 20, 24}));
  EXPECT_EQ(run(one_op(OpKind::Div, {{2, 3}, {2, 1}}), {a, col})[0].data,
            (std::vector<double>{0.5, 1, 1.5, 1, 1.25, 1.5}));
  EXPECT_EQ(run(one_op(OpKind::Pow, {{2, 3}, {2, 1}}), {a, col})[0].data,
            (std::vector<double>{1, 4, 9, 256, 625, 1296}));
  // both operands broadcast: [2,1] ⊕ [1,3]
  auto out = run(one_op(OpKind::Add, {{2, 1}, {1, 3}}), {col, T({1, 3}, {1, 2, 3})});
  EXPECT_EQ(out[0].shape, (Shape{2, 3}));
  EXPECT_EQ(out[0].data, (std::vector<double>{3, 4, 5, 5, 6, 7}));
}

TEST(KernelOps, UnaryOps) {
  HostTensor x = T({4}, {-2, -0.5, 0, 3});
  auto un = [&](OpKind k, OpAttrs a = {}) { return run(one_op(k, {{4}}, a), {x})[0]; };
  expect_near(un(OpKind::Exp), T({4}, {std::exp(-2), std::exp(-0.5), 1, std::exp(3)}));
  EXPECT_EQ(un(OpKind::Square).data, (std::vector<double>{4, 0.25, 0, 9}));
  EXPECT_EQ(un(OpKind::Relu).data, (std::vector<double>{0, 0, 0, 3}));
  OpAttrs s;
  s.scalar = -1.5;
  EXPECT_EQ(un(OpKind::MulScalar, s).data, (std::vector<double>{3, 0.75, 0, -4.5}));
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  expect_near(un(OpKind::Silu), T({4}, {silu(-2), silu(-0.5), 0, silu(3)}));
  auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  expect_near(un(OpKind::Gelu), T({4}, {gelu(-2), gelu(-0.5), 0, gelu(3)}));
  auto r = run(one_op(OpKind::Sqrt, {{3}}), {T({3}, {4, 9, 2})})[0];
  expect_near(r, T({3}, {2, 3, std::sqrt(2)}));
}

TEST(KernelOps, BatchedMatmul) {
  // batch 2 of [2,3] × [3,2]
  HostTensor a = T({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  HostTensor b = T({2, 3, 2}, {1, 0, 0, 1, 1, 1, 7, 8, 9, 10, 11, 12});
  auto out = run(one_op(OpKind::Matmul, {{2, 2, 3}, {2, 3, 2}}), {a, b})[0];
  EXPECT_EQ(out.shape, (Shape{2, 2, 2}));
  EXPECT_EQ(out.data, (std::vector<double>{4, 5, 10, 11, 7, 8, 9, 10}));
}

TEST(KernelOps, BadInputsAreErrorsNotCrashes) {
  KernelGraph g = one_op(OpKind::Add, {{2, 3}, {2, 3}});
  auto r = run_reference(g, {T({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("2 input(s)"), std::string::npos) << r.error().message;
  r = run_reference(g, {T({2, 3}, {1, 2, 3, 4, 5, 6}), T({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("input 1 (I1) has shape [3, 2]"), std::string::npos)
      << r.error().message;
  HostTensor bad({2, 3});
  bad.data.resize(2);
  r = run_reference(g, {bad, bad});
  ASSERT_FALSE(r.ok());
  KernelGraph empty;
  EXPECT_FALSE(run_reference(empty, {}).ok());
}

// ---- block graphs against kernel-level equivalents -----------------------------------------

/// Builds a kernel graph with one customized op; `build` adds the block ops.
template <class Fn>
KernelGraph customized(std::vector<Shape> inputs, Dim3 grid, int forloop, Fn&& build) {
  KernelGraph g;
  std::vector<int> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(*g.add_input("I" + std::to_string(i), inputs[i], DType::f32));
  auto made = BlockGraph::make(grid, 128, forloop);
  EXPECT_TRUE(made.ok());
  BlockGraph b = std::move(made).value();
  build(b);
  auto outs = g.add_customized(ins, std::move(b));
  EXPECT_TRUE(outs.ok()) << (outs.ok() ? "" : outs.error().message);
  for (int t : *outs) EXPECT_TRUE(g.mark_output(t).ok());
  return g;
}

int must(Result<int> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : 0;
}

OpAttrs fmap(int d) {
  OpAttrs a;
  a.fmap = d;
  return a;
}

TEST(BlockGraphs, ImapAndOmapOnEveryGridAxis) {
  // Each block scales its [2,3,4] tile; tiles are placed back by omap: the identity layout.
  Shape s{4, 6, 8};
  KernelGraph g = customized({s}, {2, 2, 2}, 1, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {0, 1, 2}, kPhi));
    int acc = must(b.add_op(OpKind::AccumSum, {x}));
    OpAttrs sc;
    sc.scalar = 3;
    int y = must(b.add_op(OpKind::MulScalar, {acc}, sc));
    EXPECT_TRUE(b.add_output(y, {0, 1, 2}).ok());
  });
  auto in = random_inputs(g, 1);
  OpAttrs sc;
  sc.scalar = 3;
  expect_near(run(g, in)[0], run(one_op(OpKind::MulScalar, {s}, sc), in)[0]);
  // Permuted axes: x→2, y→0, z→1 on input and output.
  KernelGraph h = customized({s}, {2, 2, 2}, 1, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {2, 0, 1}, kPhi));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSum, {x})), {2, 0, 1}).ok());
  });
  expect_near(run(h, in)[0], in[0]);
}

TEST(BlockGraphs, OmapPlacesTilesOnAnotherDim) {
  // Block b reads rows [2b, 2b+2) and writes them at columns [3b, 3b+3): out[r, 3b+c] = X[2b+r, c].
  Shape s{4, 3};
  KernelGraph g = customized({s}, {2, 1, 1}, 1, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {0, kPhi, kPhi}, kPhi));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSum, {x})), {1, kPhi, kPhi}).ok());
  });
  HostTensor x = T(s, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto out = run(g, {x})[0];
  EXPECT_EQ(out.shape, (Shape{2, 6}));
  EXPECT_EQ(out.data, (std::vector<double>{1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12}));
}

TEST(BlockGraphs, ConcatenatingAndSummingAccumulators) {
  Shape s{4, 12};
  // fmap 1 with a concatenating accumulator rebuilds each block's rows: exp(X).
  KernelGraph cat = customized({s}, {2, 1, 1}, 3, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {0, kPhi, kPhi}, 1));
    int e = must(b.add_op(OpKind::Exp, {x}));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSum, {e}, fmap(1))), {0, kPhi, kPhi}).ok());
  });
  auto in = random_inputs(cat, 2);
  expect_near(run(cat, in)[0], run(one_op(OpKind::Exp, {s}), in)[0]);
  // fmap 1 with a summing accumulator adds the three [2,4] column blocks: sum(X, dim 1, to 4)
  // would add consecutive columns, so compare with the explicit sum instead.
  KernelGraph sum = customized({s}, {2, 1, 1}, 3, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {0, kPhi, kPhi}, 1));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSum, {x})), {0, kPhi, kPhi}).ok());
  });
  HostTensor out = run(sum, in)[0];
  ASSERT_EQ(out.shape, (Shape{4, 4}));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(out[r * 4 + c], in[0][r * 12 + c] + in[0][r * 12 + 4 + c] + in[0][r * 12 + 8 + c],
                  1e-12);
  // fmap 0 with a concatenating accumulator along dim 0, grid over columns.
  KernelGraph rows = customized({s}, {3, 1, 1}, 2, [&](BlockGraph& b) {
    int x = must(b.add_input(s, {1, kPhi, kPhi}, 0));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSum, {x}, fmap(0))), {1, kPhi, kPhi}).ok());
  });
  expect_near(run(rows, in)[0], in[0]);
}

TEST(BlockGraphs, EveryFusedAccumulator) {
  Shape s{4, 16};
  auto acc_graph = [&](OpKind kind, int64_t to = 1) {
    return customized({s}, {2, 1, 1}, 4, [&](BlockGraph& b) {
      int x = must(b.add_input(s, {0, kPhi, kPhi}, 1));  // tile [2, 4]
      OpAttrs a;
      a.to = to;
      EXPECT_TRUE(b.add_output(must(b.add_op(kind, {x}, a)), {0, kPhi, kPhi}).ok());
    });
  };
  KernelGraph sum_ld = acc_graph(OpKind::AccumSumLd);
  auto in = random_inputs(sum_ld, 3);
  OpAttrs red;
  red.dim = 1;
  expect_near(run(sum_ld, in)[0], run(one_op(OpKind::Sum, {s}, red), in)[0]);
  expect_near(run(acc_graph(OpKind::AccumMeanLd), in)[0],
              run(one_op(OpKind::Mean, {s}, red), in)[0]);
  // accum_rms_ld = sqrt(mean over i and the last dim of x²)
  HostTensor rms = run(acc_graph(OpKind::AccumRmsLd), in)[0];
  ASSERT_EQ(rms.shape, (Shape{4, 1}));
  for (int r = 0; r < 4; ++r) {
    double ss = 0;
    for (int c = 0; c < 16; ++c) ss += in[0][r * 16 + c] * in[0][r * 16 + c];
    EXPECT_NEAR(rms[r], std::sqrt(ss / 16), 1e-12);
  }
  // accum_sum_to_dimx(to=2): Σ_i, then the tile's last dim (4) reduced to 2 by pairs.
  HostTensor dimx = run(acc_graph(OpKind::AccumSumToDimx, 2), in)[0];
  ASSERT_EQ(dimx.shape, (Shape{4, 2}));
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 2; ++j) {
      double want = 0;
      for (int i = 0; i < 4; ++i)
        for (int t = 0; t < 2; ++t) want += in[0][r * 16 + 4 * i + 2 * j + t];
      EXPECT_NEAR(dimx[r * 2 + j], want, 1e-12);
    }
}

/// The RMSNorm + MatMul reference μGraph of docs/mugraph-semantics.md §6 at X[m,k], W[k,n].
KernelGraph rmsnorm_graph(int64_t m, int64_t k, int64_t n, int grid, int forloop) {
  return customized({{m, k}, {k, n}}, {grid, 1, 1}, forloop, [&](BlockGraph& b) {
    int x = must(b.add_input(Shape{m, k}, kAllReplicated, 1));
    int w = must(b.add_input(Shape{k, n}, {1, kPhi, kPhi}, 0));
    int mm = must(b.add_op(OpKind::Matmul, {x, w}));
    int am = must(b.add_op(OpKind::AccumSum, {mm}));
    int ax = must(b.add_op(OpKind::AccumRmsLd, {x}));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {am, ax})), {1, kPhi, kPhi}).ok());
  });
}

KernelGraph rmsnorm_program(int64_t m, int64_t k, int64_t n) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{m, k}, DType::f16);
  int w = *g.add_input("W", Shape{k, n}, DType::f16);
  OpAttrs a;
  a.dim = -1;
  int y = *g.add_op(OpKind::RmsNorm, {x}, a);
  EXPECT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {y, w})).ok());
  return g;
}

TEST(BlockGraphs, PostLoopOpsRmsNormReference) {
  KernelGraph graph = rmsnorm_graph(4, 256, 512, 8, 4), prog = rmsnorm_program(4, 256, 512);
  auto in = random_inputs(prog, 4);
  expect_near(run(graph, in)[0], run(prog, in)[0], 1e-10);
  // The result does not depend on the thread count, bit for bit.
  EXPECT_EQ(run(graph, in, 1)[0].data, run(graph, in, 3)[0].data);
  EXPECT_EQ(run(prog, in, 1)[0].data, run(prog, in, 4)[0].data);
}

TEST(BlockGraphs, ThreadGraphsInLoopAndAfterIt) {
  // GatedMLP silu(X·W1) ⊙ (X·W3): two matmuls in the body, the post-loop chain as a thread graph.
  Shape xs{4, 32}, ws{32, 16};
  KernelGraph fused = customized({xs, ws, ws}, {2, 1, 1}, 4, [&](BlockGraph& b) {
    int x = must(b.add_input(xs, kAllReplicated, 1));
    int w1 = must(b.add_input(ws, {1, kPhi, kPhi}, 0));
    int w3 = must(b.add_input(ws, {1, kPhi, kPhi}, 0));
    int a1 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w1}))}));
    int a3 = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w3}))}));
    int o = must(b.add_thread_graph(
        {a1, a3}, {ThreadStep{OpKind::Silu, {0, 0}}, ThreadStep{OpKind::Mul, {2, 1}}}));
    EXPECT_TRUE(b.add_output(o, {1, kPhi, kPhi}).ok());
  });
  KernelGraph prog;
  int x = *prog.add_input("X", xs, DType::f16);
  int w1 = *prog.add_input("W1", ws, DType::f16);
  int w3 = *prog.add_input("W3", ws, DType::f16);
  int s = *prog.add_op(OpKind::Silu, {*prog.add_op(OpKind::Matmul, {x, w1})});
  ASSERT_TRUE(
      prog.mark_output(*prog.add_op(OpKind::Mul, {s, *prog.add_op(OpKind::Matmul, {x, w3})})).ok());
  auto in = random_inputs(prog, 5);
  expect_near(run(fused, in)[0], run(prog, in)[0], 1e-12);

  // A loop-body thread graph: Σ_i exp(2·x_i) over column tiles equals sum(exp(2X)) per row.
  Shape s2{2, 8};
  KernelGraph body = customized({s2}, {2, 1, 1}, 2, [&](BlockGraph& b) {
    int xi = must(b.add_input(s2, {0, kPhi, kPhi}, 1));
    int t = must(b.add_thread_graph(
        {xi}, {ThreadStep{OpKind::MulScalar, {0, 0}, 2.0}, ThreadStep{OpKind::Exp, {1, 0}}}));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::AccumSumLd, {t})), {0, kPhi, kPhi}).ok());
  });
  auto in2 = random_inputs(body, 6);
  HostTensor out = run(body, in2)[0];
  for (int r = 0; r < 2; ++r) {
    double want = 0;
    for (int c = 0; c < 8; ++c) want += std::exp(2 * in2[0][r * 8 + c]);
    EXPECT_NEAR(out[r], want, 1e-12);
  }
}

TEST(BlockGraphs, PartialPlanRunsOnlyTheChosenBlocks) {
  KernelGraph g = rmsnorm_graph(4, 64, 256, 4, 2);
  auto in = random_inputs(g, 7);
  HostTensor full = run(g, in)[0];
  interp::PartialPlan plan;
  plan.blocks.resize(g.ops().size());
  plan.blocks[2] = std::vector<int64_t>{2};  // block x = 2 writes columns [128, 192)
  std::vector<const HostTensor*> ptrs{&in[0], &in[1]};
  interp::ExecConfig cfg;
  cfg.partial = &plan;
  auto part = interp::execute(interp::DoubleArith{}, g, ptrs, cfg);
  ASSERT_TRUE(part.ok());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 256; ++c) {
      double v = (*part)[0][r * 256 + c];
      if (c >= 128 && c < 192)
        EXPECT_EQ(v, full[r * 256 + c]);
      else
        EXPECT_EQ(v, 0.0);  // not evaluated
    }
}

// ---- double and field domains agree on Lax graphs with small integer inputs ---------------

/// Runs `g` in the field domain on inputs whose components are the given small integers.
std::vector<TensorData<ff::F2>> run_field(const KernelGraph& g, const std::vector<HostTensor>& in) {
  verify::FieldTrial trial = verify::FieldTrial::make(1, 0);
  verify::FieldArith ar(trial);
  std::vector<TensorData<ff::F2>> fin;
  for (const HostTensor& t : in) {
    TensorData<ff::F2> f(t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      auto n = static_cast<int64_t>(t[i]);
      f[i] = {ff::ModP::from_int(n), ff::ModQ::from_int(n)};
    }
    fin.push_back(std::move(f));
  }
  std::vector<const TensorData<ff::F2>*> ptrs;
  for (auto& f : fin) ptrs.push_back(&f);
  auto r = interp::execute(ar, g, ptrs, interp::ExecConfig{});
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<TensorData<ff::F2>>{};
}

void expect_domains_agree(const KernelGraph& g, uint64_t seed) {
  std::vector<HostTensor> in = random_inputs(g, seed);
  for (HostTensor& t : in)
    for (double& v : t.data) v = std::round(v * 8);  // small integers in [−8, 8]
  auto d = run(g, in);
  auto f = run_field(g, in);
  ASSERT_EQ(d.size(), f.size());
  for (size_t o = 0; o < d.size(); ++o)
    for (int64_t i = 0; i < d[o].numel(); ++i) {
      ASSERT_EQ(f[o][i].p, ff::from_double<ff::ModP>(d[o][i]))
          << "output " << o << " element " << i;
      ASSERT_EQ(f[o][i].q, ff::from_double<ff::ModQ>(d[o][i]))
          << "output " << o << " element " << i;
    }
}

TEST(Domains, DoubleAndFieldAgreeOnLaxGraphs) {
  OpAttrs red;
  red.dim = 1;
  red.to = 2;
  expect_domains_agree(one_op(OpKind::Sum, {{3, 8}}, red), 1);
  OpAttrs mean;
  mean.dim = 0;
  expect_domains_agree(one_op(OpKind::Mean, {{4, 3}}, mean), 2);  // ÷4 is exact in doubles
  expect_domains_agree(one_op(OpKind::Matmul, {{2, 3, 5}, {2, 5, 4}}), 3);
  expect_domains_agree(one_op(OpKind::Sub, {{3, 4}, {4}}), 4);
  expect_domains_agree(one_op(OpKind::Mul, {{3, 1}, {1, 4}}), 5);
  OpAttrs sc;
  sc.scalar = -0.375;
  expect_domains_agree(one_op(OpKind::MulScalar, {{5}}, sc), 6);
  OpAttrs cat;
  cat.dim = 0;
  expect_domains_agree(one_op(OpKind::Concat, {{1, 3}, {2, 3}}, cat), 7);
  // Block graphs: matmul in the loop, summing and concatenating accumulators, fused ones.
  Shape xs{4, 16}, ws{16, 8};
  expect_domains_agree(
      customized(
          {xs, ws}, {2, 1, 1}, 4,
          [&](BlockGraph& b) {
            int x = must(b.add_input(xs, kAllReplicated, 1));
            int w = must(b.add_input(ws, {1, kPhi, kPhi}, 0));
            int mm = must(b.add_op(OpKind::Matmul, {x, w}));
            int a = must(b.add_op(OpKind::AccumSum, {mm}));
            int c = must(b.add_op(OpKind::AccumSum, {x}, fmap(1)));
            int s = must(b.add_op(OpKind::AccumSumLd, {x}));
            int m = must(b.add_op(OpKind::AccumMeanLd, {x}));  // ÷16
            OpAttrs to;
            to.to = 2;
            int d = must(b.add_op(OpKind::AccumSumToDimx, {x}, to));
            int post = must(b.add_thread_graph(
                {a, s}, {ThreadStep{OpKind::Sub, {0, 1}}, ThreadStep{OpKind::Square, {2, 0}}}));
            EXPECT_TRUE(b.add_output(post, {1, kPhi, kPhi}).ok());
            OpAttrs half;
            half.scalar = 0.5;
            for (int t : {c, m, d})  // each block writes its own copy: grid x maps to dim 0
              EXPECT_TRUE(
                  b.add_output(must(b.add_op(OpKind::MulScalar, {t}, half)), {0, kPhi, kPhi}).ok());
          }),
      8);
}


// ---- new ops, the online softmax, ragged splits ---------------------------------------------

TEST(KernelOps, NewElementwiseReductionAndLayoutOps) {
  HostTensor x = T({2, 3}, {-2, 0.5, 3, 1, -1, 4});
  auto un = [&](OpKind k, OpAttrs a = {}) { return run(one_op(k, {{2, 3}}, a), {x})[0]; };
  EXPECT_NEAR(un(OpKind::Sigmoid)[0], 1 / (1 + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(un(OpKind::Tanh)[2], std::tanh(3.0), 1e-15);
  EXPECT_NEAR(un(OpKind::Log)[5], std::log(4.0), 1e-15);
  OpAttrs c;
  c.scalar = -1;
  c.scalar2 = 2;
  EXPECT_EQ(un(OpKind::Clamp, c).data, (std::vector<double>{-1, 0.5, 2, 1, -1, 2}));
  OpAttrs add;
  add.scalar = 0.25;
  EXPECT_EQ(un(OpKind::AddScalar, add).data, (std::vector<double>{-1.75, 0.75, 3.25, 1.25, -0.75, 4.25}));
  HostTensor y = T({2, 3}, {0, 1, 1, 2, 2, 2});
  EXPECT_EQ(run(one_op(OpKind::Maximum, {{2, 3}, {2, 3}}), {x, y})[0].data,
            (std::vector<double>{0, 1, 3, 2, 2, 4}));
  EXPECT_EQ(run(one_op(OpKind::Minimum, {{2, 3}, {2, 3}}), {x, y})[0].data,
            (std::vector<double>{-2, 0.5, 1, 1, -1, 2}));
  OpAttrs red;
  red.dim = 1;
  EXPECT_EQ(un(OpKind::Max, red).data, (std::vector<double>{3, 4}));
  red.dim = 0;
  EXPECT_EQ(un(OpKind::Max, red).data, (std::vector<double>{1, 0.5, 4}));
  HostTensor t = un(OpKind::Transpose);
  EXPECT_EQ(t.shape, (Shape{3, 2}));
  EXPECT_EQ(t.data, (std::vector<double>{-2, 1, 0.5, -1, 3, 4}));
  OpAttrs sl;
  sl.dim = 1;
  sl.start = 1;
  sl.end = 3;
  EXPECT_EQ(un(OpKind::Slice, sl).data, (std::vector<double>{0.5, 3, -1, 4}));
  // rms_norm's epsilon sits under the root
  OpAttrs eps;
  eps.dim = 1;
  eps.scalar = 0.5;
  EXPECT_NEAR(un(OpKind::RmsNorm, eps)[0], -2 / std::sqrt((4 + 0.25 + 9) / 3.0 + 0.5), 1e-15);
}

/// Safe attention over S = Q·K (optionally scaled): the program (with max, sub, exp, sum,
/// div) and the fused μGraph with the online softmax, F iterations over the keys.
KernelGraph attention_program(int64_t b, int64_t m, int64_t d, int64_t n, double scale) {
  KernelGraph g;
  int q = *g.add_input("Q", Shape{b, m, d}, DType::f32);
  int k = *g.add_input("K", Shape{b, d, n}, DType::f32);
  int v = *g.add_input("V", Shape{b, n, d}, DType::f32);
  OpAttrs sc;
  sc.scalar = scale;
  OpAttrs r;
  r.dim = 2;
  int s = *g.add_op(OpKind::MulScalar, {*g.add_op(OpKind::Matmul, {q, k})}, sc);
  int e = *g.add_op(OpKind::Exp, {*g.add_op(OpKind::Sub, {s, *g.add_op(OpKind::Max, {s}, r)})});
  int p = *g.add_op(OpKind::Div, {e, *g.add_op(OpKind::Sum, {e}, r)});
  EXPECT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {p, v})).ok());
  return g;
}

KernelGraph flash_graph(int64_t b, int64_t m, int64_t d, int64_t n, double scale, int forloop,
                        OpKind o_accum = OpKind::AccumRescale, bool shift = true) {
  return customized({{b, m, d}, {b, d, n}, {b, n, d}}, {static_cast<int>(b), 1, 1}, forloop,
                    [&](BlockGraph& g) {
                      int q = must(g.add_input(Shape{b, m, d}, {0, kPhi, kPhi}, kPhi));
                      int k = must(g.add_input(Shape{b, d, n}, {0, kPhi, kPhi}, 2));
                      int v = must(g.add_input(Shape{b, n, d}, {0, kPhi, kPhi}, 1));
                      OpAttrs sc;
                      sc.scalar = scale;
                      int s = must(g.add_op(OpKind::MulScalar,
                                            {must(g.add_op(OpKind::Matmul, {q, k}))}, sc));
                      int mx = must(g.add_op(OpKind::RunningMax, {s}));
                      int e = shift ? must(g.add_op(OpKind::Exp,
                                                    {must(g.add_op(OpKind::Sub, {s, mx}))}))
                                    : must(g.add_op(OpKind::Exp, {s}));
                      int pv = must(g.add_op(OpKind::Matmul, {e, v}));
                      int o = op_info(o_accum).arity == 2 ? must(g.add_op(o_accum, {pv, mx}))
                                                          : must(g.add_op(o_accum, {pv}));
                      int l = must(g.add_op(OpKind::AccumRescaleLd, {e, mx}));
                      EXPECT_TRUE(
                          g.add_output(must(g.add_op(OpKind::Div, {o, l})), {0, kPhi, kPhi}).ok());
                    });
}

TEST(BlockGraphs, OnlineSoftmaxEqualsTheSafeProgram) {
  KernelGraph prog = attention_program(2, 4, 8, 32, 0.125);
  auto in = random_inputs(prog, 7);
  // Large scores: the unshifted exponentials would overflow doubles (e^(40·8·…)).
  for (double& v : in[0].data) v *= 40;
  for (double& v : in[1].data) v *= 40;
  HostTensor want = run(prog, in)[0];
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_TRUE(std::isfinite(want[i]));
  for (int F : {1, 2, 4}) expect_near(run(flash_graph(2, 4, 8, 32, 0.125, F), in)[0], want, 1e-9);
}

TEST(BlockGraphs, RaggedSplitsClipTheLastTile) {
  // X[5, 40]·W[40, 50]: W's 50 columns over 4 blocks of 13 (the last one 11), K = 40 over 3
  // iterations of 14 (the last one 12); the row RMS (a mean over a ragged loop) too.
  Shape xs{5, 40}, ws{40, 50};
  KernelGraph g = customized({xs, ws}, {4, 1, 1}, 3, [&](BlockGraph& b) {
    int x = must(b.add_input(xs, kAllReplicated, 1));
    int w = must(b.add_input(ws, {1, kPhi, kPhi}, 0));
    EXPECT_EQ(b.tensor(w).shape, (Shape{14, 13}));
    int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w}))}));
    int ax = must(b.add_op(OpKind::AccumRmsLd, {x}));
    EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {am, ax})), {1, kPhi, kPhi}).ok());
  });
  EXPECT_EQ(g.tensor(g.outputs()[0]).shape, (Shape{5, 50}));
  KernelGraph prog = rmsnorm_program(5, 40, 50);
  auto in = random_inputs(prog, 9);
  expect_near(run(g, in)[0], run(prog, in)[0], 1e-12);
  // Ragged extents must agree where tiles meet, and a ragged dim must be saved.
  auto b = *BlockGraph::make({4, 1, 1}, 128, 1);
  int w = must(b.add_input(ws, {1, kPhi, kPhi}, kPhi));       // 50 in 4: tiles of 13
  int u = must(b.add_input(Shape{40, 52}, {1, kPhi, kPhi}, kPhi));  // 52 in 4: 13 exactly
  EXPECT_FALSE(b.add_op(OpKind::Add, {w, u}).ok());
  OpAttrs sl;
  sl.dim = 1;
  sl.start = 0;
  sl.end = 4;
  EXPECT_FALSE(b.add_op(OpKind::Slice, {w}, sl).ok());
  EXPECT_FALSE(b.add_output(must(b.add_op(OpKind::AccumSum, {w})), kAllReplicated).ok());
}

TEST(Domains, FieldRunsTheNewOpsLikeDoubles) {
  OpAttrs add;
  add.scalar = 3;  // an exact constant
  expect_domains_agree(one_op(OpKind::AddScalar, {{2, 5}}, add), 11);
  expect_domains_agree(one_op(OpKind::Transpose, {{2, 3, 5}}), 12);
  OpAttrs sl;
  sl.dim = 0;
  sl.start = 1;
  sl.end = 3;
  expect_domains_agree(one_op(OpKind::Slice, {{4, 5}}, sl), 13);
}

}  // namespace
}  // namespace strata
