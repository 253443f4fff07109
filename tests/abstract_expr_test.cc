// Tests of abstract expressions: the hash-consing pool, the per-op rules at the kernel and
// block levels, and the normal form.
#include "strata/expr/abstract_expr.h"

#include <gtest/gtest.h>

#include <thread>

#include "expr_test_util.h"
#include "strata/expr/expr_normal_form.h"

namespace strata {
namespace {

using exprtest::dim_attr;
using exprtest::ExprReader;
using exprtest::fmap_attr;
using exprtest::must;
using exprtest::P;

TEST(ExprPool, HashConsesAndNormalizesFreeAxioms) {
  ExprPool pool;
  ExprId x = pool.var(0), y = pool.var(1);
  EXPECT_EQ(pool.var(0), x);
  EXPECT_NE(x, y);
  EXPECT_EQ(pool.add(x, y), pool.add(y, x));  // commutativity is free
  EXPECT_EQ(pool.mul(y, x), pool.mul(x, y));
  EXPECT_NE(pool.div(x, y), pool.div(y, x));
  EXPECT_NE(pool.concat(x, y), pool.concat(y, x));
  EXPECT_EQ(pool.sum(1, x), x);
  EXPECT_EQ(pool.sum(2, pool.sum(3, x)), pool.sum(6, x));
  EXPECT_EQ(pool.count(pool.sum(6, x)), 6);
  EXPECT_NE(pool.rms(4, x), pool.rms(8, x));
  EXPECT_EQ(pool.fn(OpKind::Silu, x), pool.fn(OpKind::Silu, x));
  EXPECT_NE(pool.fn(OpKind::Silu, x), pool.fn(OpKind::Gelu, x));
  EXPECT_EQ(pool.kind(pool.fn(OpKind::Pow, x, y)), ExprKind::Fn);
  EXPECT_EQ(pool.children(pool.fn(OpKind::Pow, x, y)).size(), 2u);
  // associativity is not free: it is the normal form's business
  ExprId z = pool.var(2);
  EXPECT_NE(pool.add(pool.add(x, y), z), pool.add(x, pool.add(y, z)));
}

TEST(ExprPool, PrintsTheDocumentedNotation) {
  ExprPool pool;
  ExprReader read(pool);
  ExprId e = read("div(sum(256, mul(W, X)), rms(256, X))");
  // operands of add/mul print in canonical order: variables by index (W is input 0 here)
  EXPECT_EQ(pool.str(e, read.names()), "div(sum(256, mul(W, X)), rms(256, X))");
  EXPECT_EQ(pool.str(e), "div(sum(256, mul(x0, x1)), rms(256, x1))");
  // same kind: ordered by the op table (silu before pow)
  EXPECT_EQ(pool.str(read("add(pow(a, b), silu(concat(b, a)))"), read.names()),
            "add(silu(concat(b, a)), pow(a, b))");
}

TEST(ExprPool, ConcurrentInterningAgrees) {
  ExprPool pool;
  constexpr int kThreads = 8;
  std::vector<std::vector<ExprId>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&pool, &got, t] {
      // every thread builds the same 3000 terms, each starting at a different point
      got[t].resize(3000);
      for (int j = 0; j < 3000; ++j) {
        int i = (j + t * 397) % 3000;
        ExprId a = pool.var(i % 7), b = pool.var(i % 5 + 7);
        ExprId e = pool.sum(1 + i % 13, pool.mul(pool.exp(pool.add(a, b)), pool.div(b, a)));
        got[t][i] = pool.rms(i, e);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(got[t], got[0]);
  ExprPool fresh;
  for (int i = 0; i < 3000; i += 499) {
    ExprId a = fresh.var(i % 7), b = fresh.var(i % 5 + 7);
    ExprId e = fresh.sum(1 + i % 13, fresh.mul(fresh.exp(fresh.add(a, b)), fresh.div(b, a)));
    EXPECT_EQ(fresh.str(fresh.rms(i, e)), pool.str(got[0][i]));
  }
}

TEST(ExprRules, RmsNormReferenceBlockGraph) {
  // docs/mugraph-semantics.md §6 at X[4,256], W[256,512], grid (8,1,1), forloop 4
  exprtest::Benchmark b = exprtest::rmsnorm_benchmark();
  ExprPool pool;
  std::vector<ExprId> ex = kernel_graph_exprs(pool, b.reference);
  auto names = exprtest::input_names(b.reference);
  EXPECT_EQ(pool.str(ex[b.reference.outputs()[0]], names), "div(sum(256, mul(X, W)), rms(256, X))");
  // the block tensors, one by one
  const BlockGraph& body = *b.reference.op(2).body;
  std::vector<ExprId> bx = block_graph_exprs(pool, body, {pool.var(0), pool.var(1)});
  std::vector<std::string> want = {"X",
                                   "W",
                                   "sum(64, mul(X, W))",
                                   "sum(256, mul(X, W))",
                                   "rms(256, X)",
                                   "div(sum(256, mul(X, W)), rms(256, X))"};
  ASSERT_EQ(bx.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(pool.str(bx[i], names), want[i]) << i;
  // the program: division before the matmul
  std::vector<ExprId> px = kernel_graph_exprs(pool, b.program);
  EXPECT_EQ(pool.str(px[b.program.outputs()[0]], names), "sum(256, mul(W, div(X, rms(256, X))))");
}

TEST(ExprRules, KernelLevelOps) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{8, 64}, DType::f16));
  int y = must(g.add_input("Y", Shape{8, 64}, DType::f16));
  int w = must(g.add_input("W", Shape{64, 32}, DType::f16));
  OpAttrs sc;
  sc.scalar = 0.5;
  OpAttrs clamp;
  clamp.scalar = -1;
  clamp.scalar2 = 2;
  OpAttrs eps = dim_attr(1);
  eps.scalar = 1e-6;
  OpAttrs slice;
  slice.dim = 1;
  slice.start = 16;
  slice.end = 48;
  OpAttrs to;
  to.dim = 1;
  to.to = 4;
  std::vector<std::pair<int, std::string>> cases = {
      {must(g.add_op(OpKind::Matmul, {x, w})), "sum(64, mul(X, W))"},
      {must(g.add_op(OpKind::Sub, {x, y})), "add(X, Y)"},
      {must(g.add_op(OpKind::Square, {x})), "mul(X, X)"},
      {must(g.add_op(OpKind::MulScalar, {x}, sc)), "mul(X, c(0.5))"},  // constants are kept
      {must(g.add_op(OpKind::Pow, {x, y})), "pow(X, Y)"},
      {must(g.add_op(OpKind::Sqrt, {x})), "sqrt(X)"},
      {must(g.add_op(OpKind::Exp, {y})), "exp(Y)"},
      {must(g.add_op(OpKind::Div, {x, y})), "div(X, Y)"},
      {must(g.add_op(OpKind::Sum, {x}, dim_attr(1))), "sum(64, X)"},
      {must(g.add_op(OpKind::Sum, {x}, to)), "sum(16, X)"},  // groups of 64/4
      {must(g.add_op(OpKind::Mean, {x}, dim_attr(0))), "sum(8, X)"},
      {must(g.add_op(OpKind::RmsNorm, {x}, dim_attr(0))), "div(X, rms(8, X))"},
      {must(g.add_op(OpKind::Concat, {x, y}, dim_attr(0))), "concat(X, Y)"},
      {must(g.add_op(OpKind::AddScalar, {x}, sc)), "add(X, c(0.5))"},
      {must(g.add_op(OpKind::Sigmoid, {x})), "sigmoid(X)"},
      {must(g.add_op(OpKind::Clamp, {x}, clamp)), "clamp(X, c(-1), c(2))"},
      {must(g.add_op(OpKind::Maximum, {x, y})), "maximum(X, Y)"},
      {must(g.add_op(OpKind::Max, {x}, dim_attr(1))), "max(64, X)"},
      {must(g.add_op(OpKind::RmsNorm, {x}, eps)), "div(X, rms(64, X, c(1e-06)))"},
      {must(g.add_op(OpKind::Transpose, {x})), "perm(X)"},
      {must(g.add_op(OpKind::Slice, {x}, slice)), "slice(X, 1, c(16), c(48))"},
  };
  ExprPool pool;
  std::vector<ExprId> ex = kernel_graph_exprs(pool, g);
  for (auto& [t, want] : cases) EXPECT_EQ(pool.str(ex[t], {"X", "Y", "W"}), want);
  // the incremental API gives the same ids
  std::vector<ExprId> inc(g.tensors().size(), kNoExpr);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    auto outs = kernel_op_exprs(pool, g, i, inc);
    ASSERT_EQ(outs.size(), 1u);
    inc[g.op(i).outputs[0]] = outs[0];
  }
  EXPECT_EQ(inc, ex);
}

TEST(ExprRules, ConcatThenMatmul) {
  KernelGraph g;
  int a1 = must(g.add_input("a1", Shape{16, 256}, DType::f16));
  int a2 = must(g.add_input("a2", Shape{16, 16}, DType::f16));
  int b1 = must(g.add_input("b1", Shape{256, 64}, DType::f16));
  int b2 = must(g.add_input("b2", Shape{16, 64}, DType::f16));
  int r1 = must(g.add_input("r1", Shape{8, 272}, DType::f16));
  int c1 = must(g.add_input("c1", Shape{272, 32}, DType::f16));
  int a = must(g.add_op(OpKind::Concat, {a1, a2}, dim_attr(1)));  // [16, 272]
  int b = must(g.add_op(OpKind::Concat, {b1, b2}, dim_attr(0)));  // [272, 64]
  int both = must(g.add_op(OpKind::Matmul, {a, b}));
  int rows = must(g.add_op(OpKind::Concat, {a, r1}, dim_attr(0)));  // [24, 272]: rows
  int stacked = must(g.add_op(OpKind::Matmul, {rows, b}));
  int cols = must(g.add_op(OpKind::Concat, {b, c1}, dim_attr(1)));  // [272, 96]: columns
  int side = must(g.add_op(OpKind::Matmul, {r1, cols}));
  int only_a = must(g.add_op(OpKind::Matmul, {a, c1}));
  ExprPool pool;
  std::vector<ExprId> ex = kernel_graph_exprs(pool, g);
  auto names = exprtest::input_names(g);
  EXPECT_EQ(pool.str(ex[both], names), "add(sum(16, mul(a2, b2)), sum(256, mul(a1, b1)))");
  ExprReader read(pool);
  for (const auto& n : names) read(n);  // same variable numbering as the graph
  auto equivalent = [&](int t, const char* want) {
    return normal_form(pool, ex[t]) == normal_form(pool, read(want));
  };
  EXPECT_TRUE(equivalent(stacked,
                         "add(sum(256, mul(a1, b1)), sum(16, mul(a2, b2)), "
                         "sum(256, mul(r1, b1)), sum(16, mul(r1, b2)))"))
      << pool.str(ex[stacked], names);
  EXPECT_TRUE(equivalent(side,
                         "add(sum(256, mul(r1, b1)), sum(16, mul(r1, b2)), "
                         "sum(272, mul(r1, c1)))"))
      << pool.str(ex[side], names);
  EXPECT_TRUE(equivalent(only_a, "add(sum(256, mul(a1, c1)), sum(16, mul(a2, c1)))"))
      << pool.str(ex[only_a], names);
}

TEST(ExprRules, AccumulatorsAndThreadGraphs) {
  auto b = must(BlockGraph::make({1, 1, 1}, 128, 4));
  int x = must(b.add_input(Shape{8, 256}, {P, P, P}, 1));  // [8, 64]
  OpAttrs dimx = fmap_attr(P);
  dimx.to = 4;
  std::vector<std::pair<int, std::string>> cases = {
      {must(b.add_op(OpKind::AccumSum, {x})), "sum(4, X)"},
      {must(b.add_op(OpKind::AccumSum, {x}, fmap_attr(1))), "X"},
      {must(b.add_op(OpKind::AccumSumLd, {x})), "sum(256, X)"},
      {must(b.add_op(OpKind::AccumMeanLd, {x})), "sum(256, X)"},
      {must(b.add_op(OpKind::AccumRmsLd, {x})), "rms(256, X)"},
      {must(b.add_op(OpKind::AccumSumToDimx, {x}, dimx)), "sum(64, X)"},
  };
  int chain = must(b.add_thread_graph(
      {x, x}, {ThreadStep{OpKind::Exp, {0, 0}}, ThreadStep{OpKind::MulScalar, {2, 0}, 2.0},
               ThreadStep{OpKind::Sub, {3, 1}}, ThreadStep{OpKind::Square, {4, 0}}}));
  cases.push_back({chain, "mul(add(X, mul(exp(X), c(2))), add(X, mul(exp(X), c(2))))"});
  int rn = must(b.add_op(OpKind::RmsNorm, {x}, dim_attr(1)));  // tile extent, not the kernel's
  cases.push_back({rn, "div(X, rms(64, X))"});
  ExprPool pool;
  std::vector<ExprId> ex = block_graph_exprs(pool, b, {pool.var(0)});
  for (auto& [t, want] : cases) EXPECT_EQ(pool.str(ex[t], {"X"}), want) << want;
  int last = static_cast<int>(b.ops().size()) - 1;
  EXPECT_EQ(block_op_expr(pool, b, last, ex, {pool.var(0)}), ex[rn]);
}

// A ragged for-loop (docs/abstract-expressions.md, "Ragged loops"): K = 1100 in 35 iterations
// of 32 (the last 12) covers 1100 elements, not 35 · 32 = 1120. Every accumulator and the
// running max count the 1100, whether the iteration's term is a sum at its top (the matmul)
// or not (the scaled matmul, through its normal form).
TEST(ExprRules, RaggedLoopsCountTheElementsTheyCover) {
  auto b = must(BlockGraph::make({1, 1, 1}, 128, 35));
  int x = must(b.add_input(Shape{8, 1100}, {P, P, P}, 1));   // [8, 32]
  int w = must(b.add_input(Shape{1100, 16}, {P, P, P}, 0));  // [32, 16]
  EXPECT_EQ(b.loop_extent(), 1100);
  EXPECT_TRUE(b.ragged_loop());
  int mm = must(b.add_op(OpKind::Matmul, {x, w}));
  OpAttrs half;
  half.scalar = 0.5;
  int scaled = must(b.add_op(OpKind::MulScalar, {mm}, half));
  int acc = must(b.add_op(OpKind::AccumSum, {mm}));
  int acc_scaled = must(b.add_op(OpKind::AccumSum, {scaled}));
  int ld = must(b.add_op(OpKind::AccumSumLd, {x}));
  int mx = must(b.add_op(OpKind::AccumMaxLd, {x}));
  int run = must(b.add_op(OpKind::RunningMax, {x}));
  ExprPool pool;
  std::vector<ExprId> ex = block_graph_exprs(pool, b, {pool.var(0), pool.var(1)});
  EXPECT_EQ(pool.str(ex[acc], {"X", "W"}), "sum(1100, mul(X, W))");
  EXPECT_EQ(pool.str(ex[ld], {"X", "W"}), "sum(1100, X)");
  EXPECT_EQ(pool.str(ex[mx], {"X", "W"}), "max(1100, X)");
  EXPECT_EQ(pool.str(ex[run], {"X", "W"}), "max(1100, X)");
  const ExprId want =
      pool.mul(pool.sum(1100, pool.mul(pool.var(0), pool.var(1))), pool.constant(0.5));
  EXPECT_EQ(normal_form(pool, ex[acc_scaled]), normal_form(pool, want));
  // A dividing loop keeps F · tile: 1024 in 32 iterations of 32.
  auto d = must(BlockGraph::make({1, 1, 1}, 128, 32));
  int xd = must(d.add_input(Shape{8, 1024}, {P, P, P}, 1));
  int ldd = must(d.add_op(OpKind::AccumSumLd, {xd}));
  std::vector<ExprId> dx = block_graph_exprs(pool, d, {pool.var(0)});
  EXPECT_EQ(pool.str(dx[ldd], {"X"}), "sum(1024, X)");
  EXPECT_FALSE(d.ragged_loop());
}

TEST(ExprRules, CustomizedOpsInlineTheirBody) {
  exprtest::Benchmark b = exprtest::gqa_benchmark(false);
  ExprPool pool;
  auto names = exprtest::input_names(b.reference);
  std::vector<ExprId> ex = kernel_graph_exprs(pool, b.reference);
  // kernel 1's outputs are the partial sums over a quarter of the sequence
  EXPECT_EQ(pool.str(ex[3], names), "sum(1024, mul(V, exp(sum(64, mul(Q, K)))))");
  EXPECT_EQ(pool.str(ex[4], names), "sum(1024, exp(sum(64, mul(Q, K))))");
  EXPECT_EQ(pool.str(ex[5], names),
            "div(sum(4096, mul(V, exp(sum(64, mul(Q, K))))), sum(4096, exp(sum(64, mul(Q, K)))))");
  std::vector<ExprId> px = kernel_graph_exprs(pool, b.program);
  EXPECT_EQ(pool.str(px[b.program.outputs()[0]], names),
            "sum(4096, mul(V, div(exp(sum(64, mul(Q, K))), sum(4096, exp(sum(64, mul(Q, K)))))))");
  EXPECT_EQ(normal_form(pool, px[b.program.outputs()[0]]), normal_form(pool, ex[5]));
}

// The normal form decides the equivalence axioms: each axiom's sides meet, and terms that
// differ only by what the axioms do not allow (cancellation, other counts) stay apart.
TEST(NormalForm, DecidesTheEquivalenceAxioms) {
  ExprPool pool;
  ExprReader read(pool);
  auto same = [&](const char* a, const char* b) {
    return normal_form(pool, read(a)) == normal_form(pool, read(b));
  };
  EXPECT_TRUE(same("add(x, add(y, z))", "add(add(z, x), y)"));
  EXPECT_TRUE(same("mul(x, mul(y, z))", "mul(mul(z, x), y)"));
  EXPECT_TRUE(same("add(mul(x, z), mul(y, z))", "mul(add(x, y), z)"));
  EXPECT_TRUE(same("add(div(x, z), div(y, z))", "div(add(x, y), z)"));
  EXPECT_TRUE(same("mul(x, div(y, z))", "div(mul(x, y), z)"));
  EXPECT_TRUE(same("sum(1, x)", "x"));
  EXPECT_TRUE(same("sum(2, sum(3, x))", "sum(6, x)"));
  EXPECT_TRUE(same("sum(5, mul(x, y))", "mul(sum(5, x), y)"));
  EXPECT_TRUE(same("sum(5, div(x, y))", "div(sum(5, x), y)"));
  EXPECT_TRUE(same("mul(sum(2, x), sum(3, y))", "sum(6, mul(x, y))"));
  EXPECT_TRUE(same("mul(div(x, r), w)", "div(mul(x, w), r)"));  // (x/r)·W = (x·W)/r
  EXPECT_TRUE(same("mul(add(a, b), add(c, d))", "add(mul(a, c), mul(a, d), mul(b, c), mul(b, d))"));
  EXPECT_TRUE(same("exp(add(x, y))", "exp(add(y, x))"));  // congruence
  EXPECT_TRUE(same("div(div(mul(x, y), a), b)", "div(div(mul(x, y), b), a)"));
  // the two axioms the normal form adds (docs/abstract-expressions.md)
  EXPECT_TRUE(same("sum(4, add(x, y))", "add(sum(4, x), sum(4, y))"));
  EXPECT_TRUE(same("div(div(x, a), b)", "div(div(x, b), a)"));

  EXPECT_FALSE(same("div(mul(x, y), y)", "x"));  // no cancellation
  EXPECT_FALSE(same("add(x, x)", "x"));
  EXPECT_FALSE(same("sum(2, x)", "add(x, x)"));
  EXPECT_FALSE(same("sum(4, x)", "sum(8, x)"));
  EXPECT_FALSE(same("div(x, mul(a, b))", "div(div(x, a), b)"));
  EXPECT_FALSE(same("div(x, y)", "div(y, x)"));
  EXPECT_FALSE(same("exp(add(x, y))", "mul(exp(x), exp(y))"));
  EXPECT_FALSE(same("rms(4, mul(x, y))", "mul(rms(4, x), y)"));
  EXPECT_FALSE(same("sum(4, exp(x))", "exp(sum(4, x))"));
  // a normal form prints as a term with the same normal form
  ExprId e = *normal_form(pool, read("mul(sum(4, div(x, z)), add(y, w))"));
  std::string text = pool.str(e, read.names());
  EXPECT_EQ(*normal_form(pool, read(text)), e) << text;
  EXPECT_EQ(pool.kind(e), ExprKind::Poly);
  EXPECT_EQ(pool.children(e).size(), 2u);
}

TEST(NormalForm, IsIdempotentAndGivesUpOnHugeExpansions) {
  ExprPool pool;
  ExprReader read(pool);
  ExprId e = read("div(mul(add(x, sum(3, y)), exp(add(z, mul(x, x)))), rms(9, add(x, y)))");
  ExprId n = *normal_form(pool, e);
  EXPECT_EQ(normal_form(pool, n), n);
  // (x0 + x1)·(x2 + x3)·… over 13 factors expands to 2^13 monomials
  ExprId big = pool.add(pool.var(0), pool.var(1));
  for (int i = 1; i < 13; ++i) big = pool.mul(big, pool.add(pool.var(2 * i), pool.var(2 * i + 1)));
  EXPECT_FALSE(normal_form(pool, big).has_value());
  EXPECT_FALSE(normal_form(pool, pool.exp(big)).has_value());
}

}  // namespace
}  // namespace strata
