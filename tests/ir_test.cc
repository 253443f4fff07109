// Tests of the IR: checking constructors at the kernel and block levels, and JSON round trips.
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "strata/ir/graph_json.h"
#include "strata/ir/kernel_graph.h"

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

// A post-loop op may read a loop tile only if it is the same in every iteration: an fmap-φ
// input, or ops of such tiles (docs/mugraph-semantics.md §3.4).
TEST(BlockGraph, PostLoopOpsReadLoopInvariantTiles) {
  auto b = *BlockGraph::make({2, 1, 1}, 128, 4);
  int x = *b.add_input(Shape{8, 64}, {0, kReplicate, kReplicate}, 1);             // [4, 16], varies
  int bias = *b.add_input(Shape{8, 1}, {0, kReplicate, kReplicate}, kReplicate);  // invariant
  int acc = *b.add_op(OpKind::AccumSumLd, {x});
  EXPECT_TRUE(b.loop_invariant(bias));
  EXPECT_FALSE(b.loop_invariant(x));
  EXPECT_FALSE(b.loop_invariant(acc));  // post-loop
  auto sum = b.add_op(OpKind::Add, {acc, bias});
  ASSERT_TRUE(sum.ok()) << sum.error().message;
  EXPECT_EQ(b.tensor(*sum).stage, Stage::Post);
  int e = *b.add_op(OpKind::Exp, {bias});  // an op of invariant tiles is invariant
  EXPECT_TRUE(b.loop_invariant(e));
  auto chain = b.add_thread_graph({e, *sum}, {{OpKind::Mul, {0, 1}, 0.0}});
  ASSERT_TRUE(chain.ok()) << chain.error().message;
  EXPECT_EQ(b.tensor(*chain).stage, Stage::Post);
  // A tile that changes with the iteration, or a running op's (the max so far), is not.
  int xs = *b.add_op(OpKind::Sum, {x}, [] {
    OpAttrs a;
    a.dim = 1;
    return a;
  }());
  int rm = *b.add_op(OpKind::RunningMax, {x});
  for (int loop : {xs, rm}) {
    EXPECT_FALSE(b.loop_invariant(loop));
    auto m = b.add_op(OpKind::Add, {acc, loop});
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("changes with the iteration"), std::string::npos);
    EXPECT_FALSE(b.add_thread_graph({acc, loop}, {{OpKind::Add, {0, 1}, 0.0}}).ok());
  }
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

// ---- the element bound every loader and constructor shares (shape.h) ----------------------

bool mentions(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

TEST(Shape, OneElementBoundForEveryShape) {
  const int64_t e24 = int64_t{1} << 24;
  EXPECT_TRUE(Shape::make({e24, e24}).ok());  // exactly 2^48
  auto over = Shape::make({e24, e24, 2});
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(mentions(over.error().message, "more than 2^48 elements")) << over.error().message;
  // products that overflow 64 bits are still seen as too large
  EXPECT_FALSE(Shape::make({int64_t{1} << 32, int64_t{1} << 32}).ok());
  EXPECT_FALSE(Shape::make({int64_t{1} << 62, 4}).ok());
  EXPECT_FALSE(Shape({e24, e24, 4}).check().ok());  // literals are checked where they enter
  EXPECT_EQ(saturating_mul(std::numeric_limits<int64_t>::max() / 2, 3),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(saturating_add(std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(saturating_mul(int64_t{1} << 20, int64_t{1} << 20), int64_t{1} << 40);
  EXPECT_EQ(Shape({int64_t{1} << 40, int64_t{1} << 40}).numel(),
            std::numeric_limits<int64_t>::max());
}

TEST(Shape, ConstructorsEnforceTheBound) {
  const int64_t e24 = int64_t{1} << 24;
  KernelGraph g;
  auto huge = g.add_input("H", Shape{e24, e24, 2}, DType::f16);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(mentions(huge.error().message, "2^48")) << huge.error().message;
  auto scalar = g.add_input("S", Shape{}, DType::f16);
  ASSERT_FALSE(scalar.ok());
  EXPECT_TRUE(mentions(scalar.error().message, "no dimensions")) << scalar.error().message;
  // results of ops: matmul, concat and broadcasting beyond the bound
  int a = *g.add_input("A", Shape{e24 * 2, 8}, DType::f16);
  int b = *g.add_input("B", Shape{8, e24 * 2}, DType::f16);
  auto mm = g.add_op(OpKind::Matmul, {a, b});
  ASSERT_FALSE(mm.ok());
  EXPECT_TRUE(mentions(mm.error().message, "matmul: result shape [33554432, 33554432]"))
      << mm.error().message;
  int c = *g.add_input("C", Shape{e24, e24}, DType::f16);
  OpAttrs dim0;
  EXPECT_FALSE(g.add_op(OpKind::Concat, {c, c}, dim0).ok());
  int col = *g.add_input("Col", Shape{e24 * 2, 1}, DType::f16);
  int row = *g.add_input("Row", Shape{1, e24 * 2}, DType::f16);
  auto bc = g.add_op(OpKind::Add, {col, row});
  ASSERT_FALSE(bc.ok());
  EXPECT_TRUE(mentions(bc.error().message, "2^48")) << bc.error().message;
  // block level: a concatenating accumulator and an output saver that scale tiles up
  auto body = *BlockGraph::make({1 << 20, 1, 1}, 128, 1 << 30);
  int x = *body.add_input(Shape{1 << 20, 1 << 28}, {0, kReplicate, kReplicate}, kReplicate);
  OpAttrs concat;
  concat.fmap = 1;
  auto acc = body.add_op(OpKind::AccumSum, {x}, concat);  // [1, 2^28 · 2^30]
  ASSERT_FALSE(acc.ok());
  EXPECT_TRUE(mentions(acc.error().message, "2^48")) << acc.error().message;
  int sum = *body.add_op(OpKind::AccumSum, {x});
  auto saved = body.add_output(sum, {0, kReplicate, kReplicate});
  EXPECT_TRUE(saved.ok()) << saved.error().message;  // [2^20, 2^28]: within the bound
  auto wide = *BlockGraph::make({1 << 30, 1 << 30, 1}, 128, 1);
  int y = *wide.add_input(Shape{1 << 30, 1 << 16}, kAllReplicated, kReplicate);
  int ys = *wide.add_op(OpKind::AccumSum, {y});
  auto over = wide.add_output(ys, {0, 1, kReplicate});  // tiles × 2^60 blocks
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(mentions(over.error().message, "2^48")) << over.error().message;
  EXPECT_EQ(BlockGraph::make({1 << 30, 1 << 30, 1 << 30}, 32, 1)->grid().count(),
            std::numeric_limits<int64_t>::max());
}

TEST(KernelGraph, DeadTensors) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{4}, DType::f16);
  int unused_input = *g.add_input("U", Shape{4}, DType::f16);
  int y = *g.add_op(OpKind::Exp, {x}, {}, "Y");
  int z = *g.add_op(OpKind::Sqrt, {x}, {}, "Z");  // dead
  int w = *g.add_op(OpKind::Relu, {y}, {}, "W");
  ASSERT_TRUE(g.mark_output(w).ok());
  EXPECT_EQ(g.dead_tensors(), std::vector<int>{z});  // inputs are never dead code
  (void)unused_input;
}

// ---- the μGraph JSON reader on adversarial documents ---------------------------------------

/// The canonical JSON of a graph with a customized kernel, a reduction and a thread graph.
Json reader_doc() {
  KernelGraph g;
  int x = *g.add_input("X", Shape{16, 4096}, DType::f16);
  int w = *g.add_input("W", Shape{4096, 6144}, DType::f16);
  auto outs = *g.add_customized({x, w}, rmsnorm_body(16, 4096, 6144), {"O"});
  OpAttrs red;
  red.dim = 1;
  red.to = 2;
  int r = *g.add_op(OpKind::Sum, {outs[0]}, red, "R");
  EXPECT_TRUE(g.mark_output(r).ok());
  Json j = kernel_graph_to_json(g);
  // a thread graph after the division (b5): T = (b5 · 0.5) · b5
  Json& ops = j["ops"][0]["block_graph"]["ops"];
  Json out = ops.back();
  ops.erase(ops.size() - 1);
  ops.push_back({{"op", "thread_graph"},
                 {"inputs", {"b5"}},
                 {"output", "T"},
                 {"steps",
                  {{{"op", "mul_scalar"}, {"args", {0}}, {"scalar", 0.5}},
                   {{"op", "mul"}, {"args", {1, 0}}}}}});
  out["inputs"] = {"T"};
  ops.push_back(out);
  return j;
}

/// The reader's error for `doc` (which must fail).
std::string read_error(const Json& doc) {
  auto g = kernel_graph_from_json(doc, "m.json");
  EXPECT_FALSE(g.ok());
  return g.ok() ? "" : g.error().message;
}

TEST(JsonReader, TheTestDocumentLoads) {
  auto g = kernel_graph_from_json(reader_doc(), "m.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->op(2).body->ops().size(), 8u);
}

// Docs: one name per output saver. An empty list used to index past its end.
TEST(JsonReader, CustomizedOutputsNameEverySaver) {
  Json doc = reader_doc();
  doc["ops"][0]["outputs"] = Json::array();
  std::string e = read_error(doc);
  EXPECT_TRUE(mentions(e,
                       "m.json: ops[0].outputs: the block graph has 1 output saver(s) but 0 "
                       "name(s) are given; expected one name per saver"))
      << e;
  doc["ops"][0]["outputs"] = {"O", "P"};
  EXPECT_TRUE(mentions(read_error(doc),
                       "ops[0].outputs: the block graph has 1 output saver(s) "
                       "but 2 name(s)"));
}

// Every integer field is read in 64 bits and checked against its range: 2^32 + k never
// becomes k.
TEST(JsonReader, IntegersAreRangeCheckedNeverTruncated) {
  const int64_t wrap = int64_t{1} << 32;
  struct Case {
    std::function<void(Json&)> edit;
    std::string path;
  };
  const std::vector<Case> cases = {
      {[&](Json& d) { d["ops"][0]["block_graph"]["grid"][0] = wrap + 96; },
       "ops[0].block_graph.grid[0]: 4294967392 is out of range; expected an integer in [1, "
       "2147483647]"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["forloop"] = wrap + 64; },
       "ops[0].block_graph.forloop: 4294967360 is out of range"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["block"] = wrap + 128; },
       "ops[0].block_graph.block: 4294967424 is out of range; expected an integer in [32, "
       "1024]"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["ops"][1]["input"] = wrap + 1; },
       "ops[0].block_graph.ops[1].input: 4294967297 is out of range"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["ops"][1]["imap"][0] = wrap + 1; },
       "ops[0].block_graph.ops[1].imap[0]: expected a data dimension index (0 to 3) or null, "
       "got 4294967297"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["ops"][0]["fmap"] = wrap + 1; },
       "ops[0].block_graph.ops[0].fmap: expected a data dimension index"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["ops"].back()["omap"][0] = wrap + 1; },
       "ops[0].block_graph.ops[7].omap[0]: expected a data dimension index"},
      {[&](Json& d) { d["ops"][1]["dim"] = wrap + 1; },
       "ops[1].dim: 4294967297 is out of range; expected an integer in [-4, 3]"},
      {[&](Json& d) { d["ops"][1]["to"] = Json::parse("9223372036854775808"); },
       "ops[1].to: 9223372036854775808 is out of range"},
      {[&](Json& d) { d["ops"][1]["to"] = Json::parse("18446744073709551616"); },
       "ops[1].to: 1.8446744073709552e+19 is out of range"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["ops"][6]["steps"][1]["args"][0] = wrap + 1; },
       "ops[0].block_graph.ops[6].steps[1].args[0]: 4294967297 is out of range"},
      {[&](Json& d) { d["inputs"][0]["shape"][0] = (int64_t{1} << 40) + 16; },
       "inputs[0].shape: shape [1099511627792, 4096] has more than 2^48 elements"},
      {[&](Json& d) { d["inputs"][0]["shape"][0] = -16; },
       "inputs[0].shape[0]: -16 is out of range; expected an integer in [1, 281474976710656]"},
      {[&](Json& d) { d["inputs"][0]["shape"] = Json::array(); },
       "inputs[0]: input `X` has no dimensions"},
      {[&](Json& d) { d["inputs"][0]["name"] = "x\ny"; },
       "inputs[0].name: invalid tensor name \"x\\ny\""},
      {[&](Json& d) { d["ops"][0]["outputs"][0] = ""; }, "ops[0].outputs[0]: invalid tensor name"},
      {[&](Json& d) { d["ops"][0]["block_graph"]["grid"][0] = 96.0; },
       "ops[0].block_graph.grid[0]: expected an integer in [1, 2147483647], got 96.0"},
  };
  for (const Case& c : cases) {
    Json doc = reader_doc();
    c.edit(doc);
    std::string e = read_error(doc);
    EXPECT_TRUE(mentions(e, "m.json: " + c.path)) << "expected: " << c.path << "\ngot: " << e;
  }
}

// Strings of a document are quoted in messages with their control characters escaped, so a
// file cannot write raw newlines or terminal escapes into the tool's error output.
TEST(JsonReader, MessagesEscapeStringsFromTheDocument) {
  Json doc = reader_doc();
  doc["ops"][1]["inputs"][0] = "O\n\u001b[31mred";
  std::string e = read_error(doc);
  EXPECT_TRUE(mentions(e, "ops[1].inputs[0]: unknown tensor `O\\n\\u001b[31mred`")) << e;
  EXPECT_FALSE(mentions(e, "\n")) << e;
  doc = reader_doc();
  doc["ops"][1]["op"] = std::string(200, 'x');
  e = read_error(doc);
  EXPECT_TRUE(mentions(e, "unknown op `xxxx")) << e;
  EXPECT_LT(e.size(), 120u) << e;
}

TEST(JsonText, NestingIsLimitedBeforeTheDocumentIsBuilt) {
  for (size_t depth : {65u, 80000u}) {
    std::string text = "{\"inputs\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
    auto doc = parse_json_text(text, "deep.json");
    ASSERT_FALSE(doc.ok());
    EXPECT_TRUE(mentions(doc.error().message,
                         "deep.json:1:75: invalid JSON: arrays and objects nested more than 64 "
                         "deep"))
        << doc.error().message;
  }
  // 64 levels are fine, and brackets inside strings do not count
  std::string ok = std::string(63, '[') + "\"[[[[{{{{\"" + std::string(63, ']');
  EXPECT_TRUE(parse_json_text("{\"x\": " + ok + "}", "ok.json").ok());
}

TEST(JsonText, NumbersNeverBecomeInfinityOrZero) {
  auto big = parse_json_text("{\n  \"scalar\": 1e400}", "n.json");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(mentions(big.error().message,
                       "n.json:2:13: invalid JSON: number 1e400 is out of "
                       "range; expected a finite number"))
      << big.error().message;
  EXPECT_FALSE(parse_json_text("[-1.5e309]", "n.json").ok());
  EXPECT_FALSE(parse_json_text("[" + std::string(400, '9') + "]", "n.json").ok());
  auto tiny = parse_json_text("[0.5, 1e-400]", "n.json");
  ASSERT_FALSE(tiny.ok());
  EXPECT_TRUE(mentions(tiny.error().message,
                       "n.json:1:7: invalid JSON: number 1e-400 is too "
                       "small to represent (it would become 0)"))
      << tiny.error().message;
  auto sub = parse_json_text("[4e-320, 0.0, -0e-999, 1e308]", "n.json");
  ASSERT_TRUE(sub.ok()) << sub.error().message;
  EXPECT_EQ((*sub)[0].get<double>(), 4e-320);  // subnormal, exact
  EXPECT_EQ((*sub)[2].get<double>(), 0.0);     // a zero is a zero at any exponent
  // A subnormal scalar reaches the graph unchanged.
  Json doc = Json::parse(R"({"inputs": [{"name": "X", "shape": [4]}],
      "ops": [{"op": "mul_scalar", "inputs": ["X"], "output": "Y", "scalar": 0}],
      "outputs": ["Y"]})");
  doc["ops"][0]["scalar"] = (*sub)[0];
  auto g = kernel_graph_from_json(doc, "s.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->op(1).attrs.scalar, 4e-320);
}

TEST(JsonText, ByteOrderMarkIsSkipped) {
  auto doc = parse_json_text("\xEF\xBB\xBF{\"a\": [1]}", "bom.json");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  EXPECT_EQ((*doc)["a"][0], 1);
  EXPECT_FALSE(parse_json_text("{\"a\": \xEF\xBB\xBF[1]}", "bom.json").ok());  // only at the start
}

}  // namespace
}  // namespace strata
