// Tests of the IR: checking constructors at the kernel and block levels, and JSON round trips.
#include <gtest/gtest.h>

#include "strata/graph_json.h"
#include "strata/kernel_graph.h"

namespace strata {
namespace {

/// The RMSNorm + MatMul reference block graph of docs/mugraph-semantics.md §6 at X[m,k], W[k,n].
BlockGraph rmsnorm_body(int64_t m, int64_t k, int64_t n) {
  auto g = BlockGraph::make({static_cast<int>(n / 64), 1, 1}, 128, static_cast<int>(k / 64));
  EXPECT_TRUE(g.ok());
  BlockGraph b = std::move(g).value();
  int x = *b.add_input(Shape{m, k}, kAllReplicated, 1);
  int w = *b.add_input(Shape{k, n}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {x, w});
  OpAttrs acc;
  int am = *b.add_op(OpKind::AccumSum, {mm}, acc);
  int ax = *b.add_op(OpKind::AccumRmsLd, {x}, acc);
  int o = *b.add_op(OpKind::Div, {am, ax});
  EXPECT_TRUE(b.add_output(o, {1, kReplicate, kReplicate}).ok());
  return b;
}

TEST(Shape, BroadcastAndNormalize) {
  EXPECT_EQ(*broadcast_shapes(Shape{16, 64}, Shape{16, 1}), (Shape{16, 64}));
  EXPECT_EQ(*broadcast_shapes(Shape{4, 16, 64}, Shape{64}), (Shape{4, 16, 64}));
  EXPECT_FALSE(broadcast_shapes(Shape{16, 64}, Shape{8, 64}).has_value());
  EXPECT_EQ(*Shape({2, 3}).normalize_dim(-1), 1);
  EXPECT_FALSE(Shape({2, 3}).normalize_dim(2).has_value());
  EXPECT_FALSE(Shape::make({2, 0}).ok());
  EXPECT_FALSE(Shape::make({1, 2, 3, 4, 5}).ok());
}

TEST(BlockGraph, RmsNormReferenceShapes) {
  BlockGraph b = rmsnorm_body(16, 4096, 6144);
  EXPECT_EQ(b.tensor(0).shape, (Shape{16, 64}));  // X tile per iteration
  EXPECT_EQ(b.tensor(1).shape, (Shape{64, 64}));  // W tile per iteration
  EXPECT_EQ(b.tensor(4).shape, (Shape{16, 1}));   // accum_rms_ld
  EXPECT_EQ(b.output_shape(0), (Shape{16, 6144}));
  EXPECT_EQ(b.tensor(3).stage, Stage::Post);
}

TEST(BlockGraph, RejectsRuleViolations) {
  auto b = *BlockGraph::make({4, 1, 1}, 128, 8);
  // a split that would leave a part empty (9 into 4 parts of 3); one that does not divide but
  // leaves every part non-empty is ragged (10 into 3, 3, 3, 1), which is allowed
  auto r = b.add_input(Shape{9, 64}, {0, kReplicate, kReplicate}, kReplicate);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("empty"), std::string::npos);
  // grid axis of size 1 mapped to a dim
  r = b.add_input(Shape{16, 64}, {kReplicate, 0, kReplicate}, kReplicate);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("size 1"), std::string::npos);
  // fmap that does not divide
  r = b.add_input(Shape{16, 12}, kAllReplicated, 1);
  ASSERT_FALSE(r.ok());
  int x = *b.add_input(Shape{16, 64}, {0, kReplicate, kReplicate}, 1);  // tile [4, 8]
  // saving a loop-body tile
  auto o = b.add_output(x, {0, kReplicate, kReplicate});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("post-loop"), std::string::npos);
  int acc = *b.add_op(OpKind::AccumSum, {x});
  // omap on a replicated axis
  o = b.add_output(acc, kAllReplicated);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("replicated axis"), std::string::npos);
  // mixing stages
  auto m = b.add_op(OpKind::Add, {x, acc});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("mixes"), std::string::npos);
  // fused accumulator with a concatenating fmap
  OpAttrs bad;
  bad.fmap = 1;
  EXPECT_FALSE(b.add_op(OpKind::AccumRmsLd, {x}, bad).ok());
  // concat accumulator
  OpAttrs cat;
  cat.fmap = 1;
  int c = *b.add_op(OpKind::AccumSum, {x}, cat);
  EXPECT_EQ(b.tensor(c).shape, (Shape{4, 64}));
  EXPECT_TRUE(b.add_output(c, {0, kReplicate, kReplicate}).ok());
  EXPECT_EQ(b.output_shape(0), (Shape{16, 64}));
}

TEST(KernelGraph, CustomizedChecksInputs) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{16, 4096}, DType::f16);
  int w = *g.add_input("W", Shape{4096, 6144}, DType::f16);
  auto outs = g.add_customized({x, w}, rmsnorm_body(16, 4096, 6144), {"O"});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  EXPECT_TRUE(g.mark_output((*outs)[0]).ok());
  // wrong input shape for the body
  KernelGraph h;
  int x2 = *h.add_input("X", Shape{8, 4096}, DType::f16);
  int w2 = *h.add_input("W", Shape{4096, 6144}, DType::f16);
  auto bad = h.add_customized({x2, w2}, rmsnorm_body(16, 4096, 6144));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("expects"), std::string::npos);
  // duplicate names and unknown ops at kernel level
  EXPECT_FALSE(h.add_input("X", Shape{1}, DType::f16).ok());
  EXPECT_FALSE(h.add_op(OpKind::AccumSum, {x2}).ok());
  EXPECT_FALSE(h.add_op(OpKind::Matmul, {x2, x2}).ok());
}

TEST(Json, RoundTripsExactly) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{16, 4096}, DType::f16);
  int w = *g.add_input("W", Shape{4096, 6144}, DType::bf16);
  OpAttrs s;
  s.scalar = 0.125;
  int xs = *g.add_op(OpKind::MulScalar, {x}, s, "Xs");
  auto outs = *g.add_customized({xs, w}, rmsnorm_body(16, 4096, 6144), {"O"});
  OpAttrs red;
  red.dim = -1;
  int r = *g.add_op(OpKind::Sum, {outs[0]}, red, "R");
  ASSERT_TRUE(g.mark_output(r).ok());
  Json j = kernel_graph_to_json(g);
  auto back = kernel_graph_from_json(j, "mem.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->structurally_equal(g));
  EXPECT_EQ(kernel_graph_to_json(*back).dump(), j.dump());
  EXPECT_EQ(back->op(4).attrs.dim, 1);  // normalized
}

TEST(Json, ErrorsNameThePath) {
  auto doc = parse_json_text(R"({"inputs": [{"name": "X", "shape": [4, 8]}],
    "ops": [{"op": "matmull", "inputs": ["X", "X"], "output": "Y"}], "outputs": ["Y"]})",
                             "bad.json");
  ASSERT_TRUE(doc.ok());
  auto g = kernel_graph_from_json(*doc, "bad.json");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("bad.json: ops[0].op: unknown op `matmull`"), std::string::npos)
      << g.error().message;
  auto syntax = parse_json_text("{\n  \"inputs\": [,\n}", "s.json");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().message.find("s.json:2:"), std::string::npos) << syntax.error().message;
}

}  // namespace
}  // namespace strata
