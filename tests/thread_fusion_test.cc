// Tests of rule-based thread-level fusion (docs/mugraph-semantics.md §4): which elementwise chains
// become
// thread graphs, the steps they compute, and that the rest of the μGraph is untouched.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "strata/cost/cost_model.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"
#include "strata/opt/thread_fusion.h"

namespace strata {
namespace {

constexpr GridMap kXto1{1, kReplicate, kReplicate};

/// Loop part of a GatedMLP block graph on X[8,4096], W1, W3[4096,4096]: grid 64, forloop 64,
/// two matmuls accumulated into acc1 and acc3 (both post-loop [8,64] tiles).
struct Gated {
  BlockGraph b;
  int acc1, acc3;
};

Gated gated_prefix() {
  BlockGraph b = *BlockGraph::make({64, 1, 1}, 128, 64);
  int x = *b.add_input(Shape{8, 4096}, kAllReplicated, 1);
  int w1 = *b.add_input(Shape{4096, 4096}, kXto1, 0);
  int w3 = *b.add_input(Shape{4096, 4096}, kXto1, 0);
  int m1 = *b.add_op(OpKind::Matmul, {x, w1});
  int m3 = *b.add_op(OpKind::Matmul, {x, w3});
  int acc1 = *b.add_op(OpKind::AccumSum, {m1});
  int acc3 = *b.add_op(OpKind::AccumSum, {m3});
  EXPECT_TRUE(b.set_tensor_name(acc1, "acc1").ok());
  EXPECT_TRUE(b.set_tensor_name(acc3, "acc3").ok());
  return {std::move(b), acc1, acc3};
}

KernelGraph wrap(BlockGraph b) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{8, 4096}, DType::f16);
  int w1 = *g.add_input("W1", Shape{4096, 4096}, DType::f16);
  int w3 = *g.add_input("W3", Shape{4096, 4096}, DType::f16);
  auto outs = g.add_customized({x, w1, w3}, std::move(b));
  EXPECT_TRUE(outs.ok()) << outs.error().message;
  for (int t : *outs) EXPECT_TRUE(g.mark_output(t).ok());
  return g;
}

/// silu(acc1) * acc3, saved: the GatedMLP reference graph of docs/mugraph-semantics.md §6.
KernelGraph gatedmlp() {
  Gated p = gated_prefix();
  int s = *p.b.add_op(OpKind::Silu, {p.acc1});
  int o = *p.b.add_op(OpKind::Mul, {s, p.acc3});
  EXPECT_TRUE(p.b.set_tensor_name(o, "out").ok());
  EXPECT_TRUE(p.b.add_output(o, kXto1).ok());
  return wrap(std::move(p.b));
}

const BlockGraph& body(const KernelGraph& g) {
  for (const KernelOp& op : g.ops())
    if (op.body) return *op.body;
  ADD_FAILURE() << "no customized op";
  return *g.op(0).body;
}

// The kernel-level structure and every device shape are untouched by fusion.
void expect_same_interface(const KernelGraph& a, const KernelGraph& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].shape, b.tensors()[i].shape) << i;
    EXPECT_EQ(a.tensors()[i].dtype, b.tensors()[i].dtype) << i;
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name) << i;
  }
  EXPECT_EQ(a.inputs(), b.inputs());
  EXPECT_EQ(a.outputs(), b.outputs());
  ASSERT_EQ(a.ops().size(), b.ops().size());
  for (size_t i = 0; i < a.ops().size(); ++i) {
    const KernelOp &x = a.ops()[i], &y = b.ops()[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.inputs, y.inputs);
    if (!x.body) continue;
    ASSERT_TRUE(y.body);
    EXPECT_EQ(x.body->grid(), y.body->grid());
    EXPECT_EQ(x.body->forloop(), y.body->forloop());
    ASSERT_EQ(x.body->num_outputs(), y.body->num_outputs());
    for (int o = 0; o < x.body->num_outputs(); ++o)
      EXPECT_EQ(x.body->output_shape(o), y.body->output_shape(o));
  }
}

// One element of an elementwise op (the arithmetic of docs/mugraph-semantics.md §2.1), for the
// value check below.
double apply(OpKind k, double a, double b, double scalar) {
  switch (k) {
    case OpKind::Exp:
      return std::exp(a);
    case OpKind::Square:
      return a * a;
    case OpKind::Sqrt:
      return std::sqrt(a);
    case OpKind::Silu:
      return a / (1 + std::exp(-a));
    case OpKind::Gelu:
      return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    case OpKind::Relu:
      return a > 0 ? a : 0;
    case OpKind::MulScalar:
      return a * scalar;
    case OpKind::Add:
      return a + b;
    case OpKind::Sub:
      return a - b;
    case OpKind::Mul:
      return a * b;
    case OpKind::Div:
      return a / b;
    case OpKind::Pow:
      return std::pow(a, b);
    default:
      ADD_FAILURE() << "not elementwise: " << op_name(k);
      return 0;
  }
}

// Elementwise ops commute with broadcasting, so a chain computes the same function of one
// element of each input at every position. Gives every non-elementwise tensor a value chosen
// by its name, evaluates elementwise ops and thread graphs, and returns the value by name.
std::map<std::string, double> element_values(const BlockGraph& b) {
  std::map<std::string, double> by_name;
  std::vector<double> v(b.tensors().size());
  for (const BlockOp& op : b.ops()) {
    if (op.output < 0) continue;
    std::string name = b.tensor_name(op.output);
    double x;
    if (is_elementwise(op.kind)) {
      x = apply(op.kind, v[op.inputs[0]], op.inputs.size() > 1 ? v[op.inputs[1]] : 0,
                op.attrs.scalar);
    } else if (op.kind == OpKind::ThreadFused) {
      std::vector<double> vals;
      for (int t : op.inputs) vals.push_back(v[t]);
      for (const ThreadStep& s : op.chain)
        vals.push_back(apply(s.kind, vals[s.args[0]], vals[s.args[1]], s.scalar));
      x = vals.back();
    } else {
      x = 0.5 + static_cast<double>(std::hash<std::string>{}(name) % 1000) / 1000.0;
    }
    v[op.output] = x;
    by_name[name] = x;
  }
  return by_name;
}

// Every named tensor left after fusion has the value it had before.
void expect_same_values(const KernelGraph& g, const KernelGraph& f) {
  for (size_t i = 0; i < g.ops().size(); ++i) {
    if (!g.ops()[i].body) continue;
    auto before = element_values(*g.ops()[i].body);
    auto after = element_values(*f.ops()[i].body);
    int compared = 0;
    for (const auto& [name, x] : after) {
      if (name.size() > 1 && name[0] == 'b' && std::isdigit(static_cast<unsigned char>(name[1])))
        continue;  // renumbered default names
      ASSERT_TRUE(before.count(name)) << name;
      EXPECT_DOUBLE_EQ(x, before.at(name)) << name;
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

TEST(ThreadFusion, GatedMlpEpilogueBecomesOneThreadGraph) {
  KernelGraph g = gatedmlp();
  KernelGraph f = fuse_thread_graphs(g);
  EXPECT_EQ(count_thread_graphs(g), 0);
  EXPECT_EQ(count_thread_graphs(f), 1);
  expect_same_interface(g, f);
  const BlockGraph& b = body(f);
  ASSERT_EQ(b.ops().size(), body(g).ops().size() - 1);
  const BlockOp& tg = b.op(b.output_op(0) - 1);
  ASSERT_EQ(tg.kind, OpKind::ThreadFused);
  EXPECT_EQ(b.tensor_name(tg.inputs[0]), "acc1");
  EXPECT_EQ(b.tensor_name(tg.inputs[1]), "acc3");
  ASSERT_EQ(tg.chain.size(), 2u);
  EXPECT_EQ(tg.chain[0], (ThreadStep{OpKind::Silu, {0, 0}, 0.0}));  // silu(acc1)
  EXPECT_EQ(tg.chain[1], (ThreadStep{OpKind::Mul, {2, 1}, 0.0}));   // step0 * acc3
  EXPECT_EQ(b.tensor(tg.output).stage, Stage::Post);
  EXPECT_EQ(b.tensor(tg.output).shape, (Shape{8, 64}));
  EXPECT_EQ(b.tensor_name(tg.output), "out");
  EXPECT_EQ(b.op(b.output_op(0)).inputs[0], tg.output);
  expect_same_values(g, f);
  // The silu tile no longer occupies shared memory; the work is the same.
  EXPECT_EQ(block_smem_bytes(body(g)) - block_smem_bytes(b), 8 * 64 * 4);
  Target t = *Target::by_name("h100");
  EXPECT_DOUBLE_EQ(estimate_cost(g, t).kernels[0].simt_flops,
                   estimate_cost(f, t).kernels[0].simt_flops);
}

TEST(ThreadFusion, SecondConsumerBreaksTheChain) {
  Gated p = gated_prefix();
  int s = *p.b.add_op(OpKind::Silu, {p.acc1});
  int o1 = *p.b.add_op(OpKind::Mul, {s, p.acc3});
  int o2 = *p.b.add_op(OpKind::Add, {s, p.acc3});
  ASSERT_TRUE(p.b.add_output(o1, kXto1).ok());
  ASSERT_TRUE(p.b.add_output(o2, kXto1).ok());
  KernelGraph g = wrap(std::move(p.b));
  KernelGraph f = fuse_thread_graphs(g);
  EXPECT_EQ(count_thread_graphs(f), 0);
  EXPECT_TRUE(f.structurally_equal(g));
}

TEST(ThreadFusion, SavedIntermediateBreaksTheChain) {
  // exp → silu → mul is fused up to mul, whose result is both saved and used by add.
  Gated p = gated_prefix();
  int e = *p.b.add_op(OpKind::Exp, {p.acc1});
  int s = *p.b.add_op(OpKind::Silu, {e});
  int m = *p.b.add_op(OpKind::Mul, {s, p.acc3});
  int a = *p.b.add_op(OpKind::Add, {m, p.acc1});
  ASSERT_TRUE(p.b.add_output(m, kXto1).ok());
  ASSERT_TRUE(p.b.add_output(a, kXto1).ok());
  KernelGraph g = wrap(std::move(p.b));
  KernelGraph f = fuse_thread_graphs(g);
  EXPECT_EQ(count_thread_graphs(f), 1);
  expect_same_interface(g, f);
  const BlockGraph& b = body(f);
  int fused = b.op(b.output_op(0)).inputs[0];
  const BlockOp& tg = b.op(b.tensor(fused).producer);
  ASSERT_EQ(tg.kind, OpKind::ThreadFused);
  ASSERT_EQ(tg.chain.size(), 3u);
  EXPECT_EQ(tg.chain[0], (ThreadStep{OpKind::Exp, {0, 0}, 0.0}));
  EXPECT_EQ(tg.chain[1], (ThreadStep{OpKind::Silu, {2, 0}, 0.0}));
  EXPECT_EQ(tg.chain[2], (ThreadStep{OpKind::Mul, {3, 1}, 0.0}));
  // The add stays a block op reading the saved tile.
  const BlockOp& add = b.op(b.tensor(b.op(b.output_op(1)).inputs[0]).producer);
  EXPECT_EQ(add.kind, OpKind::Add);
  EXPECT_EQ(add.inputs[0], fused);
}

TEST(ThreadFusion, SavedSingleOpIsNotFused) {
  Gated p = gated_prefix();
  int s = *p.b.add_op(OpKind::Silu, {p.acc1});
  int m = *p.b.add_op(OpKind::Mul, {s, p.acc3});
  ASSERT_TRUE(p.b.add_output(s, kXto1).ok());  // silu saved: the chain is broken after it
  ASSERT_TRUE(p.b.add_output(m, kXto1).ok());
  KernelGraph g = wrap(std::move(p.b));
  EXPECT_EQ(count_thread_graphs(fuse_thread_graphs(g)), 0);
}

TEST(ThreadFusion, LoopBodyChainsAndRepeatedArguments) {
  // Loop body: matmul → exp → mul_scalar(0.5) → square-by-mul(y, y) → accum.
  BlockGraph b = *BlockGraph::make({64, 1, 1}, 128, 64);
  int x = *b.add_input(Shape{8, 4096}, kAllReplicated, 1);
  int w = *b.add_input(Shape{4096, 4096}, kXto1, 0);
  int mm = *b.add_op(OpKind::Matmul, {x, w});
  int e = *b.add_op(OpKind::Exp, {mm});
  OpAttrs half;
  half.scalar = 0.5;
  int h = *b.add_op(OpKind::MulScalar, {e}, half);
  int sq = *b.add_op(OpKind::Mul, {h, h});
  int acc = *b.add_op(OpKind::AccumSum, {sq});
  ASSERT_TRUE(b.add_output(acc, kXto1).ok());
  KernelGraph g;
  int tx = *g.add_input("X", Shape{8, 4096}, DType::f16);
  int tw = *g.add_input("W", Shape{4096, 4096}, DType::f16);
  auto outs = *g.add_customized({tx, tw}, std::move(b), {"Y"});
  ASSERT_TRUE(g.mark_output(outs[0]).ok());

  KernelGraph f = fuse_thread_graphs(g);
  expect_same_interface(g, f);
  const BlockGraph& fb = body(f);
  ASSERT_EQ(fb.ops().size(), 6u);  // x, w, matmul, thread graph, accum, output
  const BlockOp& tg = fb.op(3);
  ASSERT_EQ(tg.kind, OpKind::ThreadFused);
  EXPECT_EQ(tg.inputs, (std::vector<int>{2}));  // the matmul tile
  EXPECT_EQ(fb.tensor(tg.output).stage, Stage::Loop);
  ASSERT_EQ(tg.chain.size(), 3u);
  EXPECT_EQ(tg.chain[0], (ThreadStep{OpKind::Exp, {0, 0}, 0.0}));
  EXPECT_EQ(tg.chain[1], (ThreadStep{OpKind::MulScalar, {1, 0}, 0.5}));
  EXPECT_EQ(tg.chain[2], (ThreadStep{OpKind::Mul, {2, 2}, 0.0}));
  EXPECT_EQ(fb.op(4).kind, OpKind::AccumSum);
  EXPECT_EQ(fb.op(4).inputs[0], tg.output);
}

TEST(ThreadFusion, PredefinedGraphsAndRepeatedFusionAreUnchanged) {
  KernelGraph p;
  int x = *p.add_input("X", Shape{4, 64}, DType::f16);
  int e = *p.add_op(OpKind::Exp, {x});
  int s = *p.add_op(OpKind::Sqrt, {e}, {}, "S");
  ASSERT_TRUE(p.mark_output(s).ok());
  KernelGraph fp = fuse_thread_graphs(p);  // kernel-level ops are not thread graphs
  EXPECT_TRUE(fp.structurally_equal(p));
  EXPECT_EQ(fp.tensor_name(s), "S");

  KernelGraph once = fuse_thread_graphs(gatedmlp());
  KernelGraph twice = fuse_thread_graphs(once);
  EXPECT_TRUE(twice.structurally_equal(once));
  EXPECT_EQ(count_thread_graphs(twice), 1);
}

TEST(ThreadFusion, FusedGraphRoundTripsThroughJson) {
  KernelGraph g = gatedmlp();
  // Through JSON first, so that every block tensor carries a default-style name.
  auto loaded = kernel_graph_from_json(kernel_graph_to_json(g), "g.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  KernelGraph f = fuse_thread_graphs(*loaded);
  EXPECT_EQ(count_thread_graphs(f), 1);
  Json j = kernel_graph_to_json(f);
  auto back = kernel_graph_from_json(j, "fused.json");
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << j.dump(2);
  EXPECT_TRUE(back->structurally_equal(f));
  EXPECT_EQ(kernel_graph_to_json(*back).dump(), j.dump());
  EXPECT_EQ(count_thread_graphs(*back), 1);
}

// The reference μGraphs of examples/: the gatedmlp and ntrans epilogues are fused, the rest
// has no elementwise chain; every fused graph keeps its interface and round-trips.
TEST(ThreadFusion, ReferenceExamples) {
  const std::map<std::string, int> expected = {{"gatedmlp", 1}, {"gqa", 0},    {"lora", 0},
                                               {"ntrans", 1},   {"qknorm", 0}, {"rmsnorm", 0}};
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("examples/reference")) {
    if (entry.path().extension() != ".json") continue;
    std::string stem = entry.path().stem().string();
    std::string bench = stem.substr(0, stem.find('_'));
    ASSERT_TRUE(expected.count(bench)) << "unexpected example " << stem;
    ++files;
    auto g = load_graph(entry.path().string());
    ASSERT_TRUE(g.ok()) << g.error().message;
    KernelGraph f = fuse_thread_graphs(*g);
    EXPECT_EQ(count_thread_graphs(f), expected.at(bench)) << stem;
    expect_same_interface(*g, f);
    expect_same_values(*g, f);
    auto back = kernel_graph_from_json(kernel_graph_to_json(f), stem);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(back->structurally_equal(f)) << stem;
  }
  EXPECT_GE(files, 6);
}

TEST(ThreadFusion, DefaultStyleNamesDoNotCollideAfterRenumbering) {
  // A tensor explicitly named like a default ("b9", as JSON documents name every tensor)
  // moves to id 8 when the silu tile disappears; an unnamed tensor then gets id 9.
  Gated p = gated_prefix();
  int s = *p.b.add_op(OpKind::Silu, {p.acc1});
  int o = *p.b.add_op(OpKind::Mul, {s, p.acc3});
  OpAttrs row;
  row.dim = 1;
  int r = *p.b.add_op(OpKind::Sum, {p.acc1}, row);
  int q = *p.b.add_op(OpKind::Sum, {p.acc3}, row);
  ASSERT_EQ(r, 9);
  ASSERT_TRUE(p.b.set_tensor_name(r, "b9").ok());
  for (int t : {o, r, q}) ASSERT_TRUE(p.b.add_output(t, kXto1).ok());
  KernelGraph f = fuse_thread_graphs(wrap(std::move(p.b)));
  ASSERT_EQ(count_thread_graphs(f), 1);
  Json j = kernel_graph_to_json(f);
  auto back = kernel_graph_from_json(j, "fused.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->structurally_equal(f));
}

}  // namespace
}  // namespace strata
