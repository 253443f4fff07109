// Tests of the search (docs/search.md) on the ops of real programs: constants do not change
// the fused structure that is found, safe attention fuses into one online-softmax kernel, and
// a kernel may save a tensor that it also reads when that tensor is a program output; a
// product before a row-wide norm gets GEMV kernels that split its columns, and no kernel
// normalizes a part of a row.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "strata/frontend/program_parser.h"
#include "strata/search/search.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"
#include "support/search_config.h"

namespace strata {
namespace {

using testing::parse;

SearchConfig config(const std::string& name) {
  return testing::search_config("strata-search-programs-test", name);
}

int kernels(const KernelGraph& g) {
  int n = 0;
  for (const KernelOp& op : g.ops()) n += op.kind != OpKind::Input;
  return n;
}

/// The block ops of every customized kernel of g, with the steps of thread graphs, as a
/// multiset of op names; `skip` (with input iterators, savers and the thread-graph wrappers)
/// is left out.
std::multiset<std::string> block_ops(const KernelGraph& g, OpKind skip) {
  std::multiset<std::string> ops;
  auto add = [&](OpKind k) {
    if (k != skip && k != OpKind::Input && k != OpKind::Output && k != OpKind::ThreadFused)
      ops.insert(std::string(op_name(k)));
  };
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    for (const BlockOp& b : op.body->ops()) {
      add(b.kind);
      for (const ThreadStep& s : b.chain) add(s.kind);
    }
  }
  return ops;
}

// ---- constants keep the fused structure -------------------------------------------------

/// A program family: `{scale}` is replaced by nothing (no constant) or by a line that scales
/// the tensor S into T; `{S}` names the tensor that later lines read (S or T).
struct Family {
  std::string name;
  std::string text;
};

std::string instantiate(const Family& f, const std::string& scale) {
  std::string t = f.text;
  auto replace = [&t](const std::string& from, const std::string& to) {
    for (size_t p = t.find(from); p != std::string::npos; p = t.find(from, p + to.size()))
      t.replace(p, from.size(), to);
  };
  replace("{scale}", scale.empty() ? "" : "T = mul_scalar(S, " + scale + ")\n");
  replace("{S}", scale.empty() ? "S" : "T");
  return t;
}

class ScaledPrograms : public ::testing::TestWithParam<Family> {};

// A mul_scalar changes the program's expressions (c(v)·x), never the graph the search finds:
// the same number of kernels and, modulo the scale op, the same block ops, whatever the
// constant (0.5 is exact in the field, 0.1 a symbolic constant of the verifier).
TEST_P(ScaledPrograms, SameFusedStructureWithAndWithoutAConstant) {
  const Family& f = GetParam();
  auto plain = superoptimize(parse(instantiate(f, "")), config(f.name));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_FALSE(plain->ranked.empty());
  const KernelGraph& want = plain->ranked[0].graph;
  for (const std::string c : {"0.5", "0.1"}) {
    SCOPED_TRACE(f.name + " scaled by " + c);
    auto scaled = superoptimize(parse(instantiate(f, c)), config(f.name));
    ASSERT_TRUE(scaled.ok()) << scaled.error().message;
    ASSERT_FALSE(scaled->ranked.empty());
    const Candidate& best = scaled->ranked[0];
    EXPECT_FALSE(best.is_program);
    EXPECT_TRUE(best.verification.equivalent);
    EXPECT_LE(best.verification.log2_bound, -60.0);
    EXPECT_EQ(kernels(best.graph), kernels(want));
    // The matmul alone is its own best graph (a predefined op): compare kernels only.
    if (plain->ranked[0].is_program) continue;
    EXPECT_EQ(block_ops(best.graph, OpKind::MulScalar), block_ops(want, OpKind::MulScalar));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, ScaledPrograms,
    ::testing::Values(
        Family{"matmul",
               "input X: f16[8, 128]\ninput W: f16[128, 256]\nS = matmul(X, W)\n{scale}"
               "output {S}\n"},
        Family{"attention",
               "input Q: f16[2, 16, 32]\ninput K: f16[2, 32, 128]\ninput V: f16[2, 128, 32]\n"
               "S = matmul(Q, K)\n{scale}E = exp({S})\nO = div(matmul(E, V), sum(E, dim=2))\n"
               "output O\n"},
        Family{"gatedmlp",
               "input X: f16[8, 128]\ninput W1: f16[128, 256]\ninput W3: f16[128, 256]\n"
               "S = matmul(X, W1)\n{scale}O = mul(silu({S}), matmul(X, W3))\noutput O\n"},
        Family{"rmsnorm",
               "input X: f16[8, 256]\ninput W: f16[256, 256]\nS = matmul(rms_norm(X), W)\n"
               "{scale}output {S}\n"}),
    [](const ::testing::TestParamInfo<Family>& p) { return p.param.name; });

// ---- safe attention ---------------------------------------------------------------------

// softmax subtracts the row max; with the key sequence on the for-loop the search finds the
// online softmax in one kernel: running_max, and the rescaling accumulators of the exp-sum
// and of the weighted sum (docs/search.md).
TEST(SearchPrograms, SafeAttentionFusesWithARunningMax) {
  KernelGraph program = parse(
      "input Q: f16[2, 16, 32]\ninput K: f16[2, 128, 32]\ninput V: f16[2, 128, 32]\n"
      "S = mul_scalar(matmul(Q, transpose(K)), 0.125)\nP = softmax(S, dim=-1)\n"
      "O = matmul(P, V)\noutput O\n");
  std::mutex mu;
  int online = 0;
  auto r = superoptimize(program, config("safe").with_observer([&](const KernelGraph& g) {
    if (kernels(g) != 1) return;
    std::multiset<std::string> ops = block_ops(g, OpKind::Input);
    if (ops.count("running_max") == 1 && ops.count("accum_rescale") == 1 &&
        ops.count("accum_rescale_ld") == 1) {
      std::lock_guard<std::mutex> lock(mu);
      ++online;
    }
  }));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_GT(online, 0) << "no one-kernel online-softmax graph";
  ASSERT_FALSE(r->ranked.empty());
  EXPECT_FALSE(r->ranked[0].is_program);
  EXPECT_TRUE(r->ranked[0].verification.equivalent);
  EXPECT_LE(r->ranked[0].verification.log2_bound, -60.0);
}

/// Searches `text` and checks what every fusing search here promises: exhausted, a ranking
/// whose best is not the program, proved equivalent.
SearchResult search_fused(const std::string& text, const std::string& name) {
  auto r = superoptimize(parse(text), config(name));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_FALSE(r->ranked.empty());
  if (r->ranked.empty()) return *r;
  EXPECT_FALSE(r->ranked[0].is_program);
  EXPECT_TRUE(r->ranked[0].verification.equivalent);
  EXPECT_LE(r->ranked[0].verification.log2_bound, -60.0);
  return *r;
}

// Decode attention over a value cache with the new token appended (torch.cat in the model):
// the concat stays a kernel of its own, and the attention over its result fuses.
TEST(SearchPrograms, AttentionOverAnAppendedCacheFuses) {
  const std::string text =
      "input Q: f16[2, 4, 32]\ninput K: f16[2, 32, 128]\ninput Vc: f16[2, 127, 32]\n"
      "input v: f16[2, 1, 32]\nV = concat(Vc, v, dim=1)\n"
      "S = mul_scalar(matmul(Q, K), 0.125)\nO = matmul(softmax(S, dim=-1), V)\noutput O\n";
  const SearchResult r = search_fused(text, "append");
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_LT(kernels(r.ranked[0].graph), kernels(parse(text)) - 1);
}

// Attention over a key count no loop tile divides (1025 = 32 · 32 + 1: a KV cache with the
// new token appended): the enumeration offers the online softmax over a ragged key loop as one
// kernel, and it is equivalent to the program. Its abstract expressions count the 1025 keys the
// loop covers, not 33 · 32 (docs/abstract-expressions.md, "Ragged loops"), so the pruning keeps
// it. (Two blocks looping 33 times: the cost model's latency bound ranks the split-KV forms and
// forms of more blocks above it, so it is looked for among the offered graphs.)
TEST(SearchPrograms, AttentionOverARaggedKeyLoopFuses) {
  const std::string text =
      "input Q: f16[2, 4, 128]\ninput K: f16[2, 1025, 128]\ninput V: f16[2, 1025, 128]\n"
      "S = mul_scalar(matmul(Q, transpose(K)), 0.125)\n"
      "O = matmul(softmax(S, dim=-1), V)\noutput O\n";
  std::mutex mu;
  std::vector<KernelGraph> ragged;  // one-kernel graphs with a ragged loop over the 1025 keys
  auto r = superoptimize(parse(text), config("ragged_keys").with_observer([&](const KernelGraph& g) {
    if (kernels(g) != 1) return;
    for (const KernelOp& op : g.ops())
      if (op.kind == OpKind::Customized && op.body->ragged_loop() &&
          op.body->loop_extent() == 1025) {
        std::lock_guard<std::mutex> lock(mu);
        if (ragged.size() < 3) ragged.push_back(g);
      }
  }));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->ranked[0].is_program);
  ASSERT_FALSE(ragged.empty());
  for (const KernelGraph& g : ragged) {
    auto v = verify_equivalent(parse(text), g);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
}

// ---- outputs that are also read ---------------------------------------------------------

// The residual sum H is an output and the norm's input: the fused kernel saves it and reads
// it (docs/search.md, "Closing a block graph").
TEST(SearchPrograms, ResidualNormSavesTheSumItReads) {
  KernelGraph program = parse(
      "input X: f16[8, 256]\ninput R: f16[8, 256]\ninput G: f16[256]\n"
      "H = add(X, R)\nO = mul(rms_norm(H, eps=1e-6), G)\noutput H\noutput O\n");
  auto r = superoptimize(program, config("residual"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r->ranked.empty());
  const Candidate& best = r->ranked[0];
  EXPECT_FALSE(best.is_program);
  EXPECT_TRUE(best.verification.equivalent);
  EXPECT_LE(best.verification.log2_bound, -60.0);
  ASSERT_EQ(kernels(best.graph), 1);
  const KernelOp* k = nullptr;
  for (const KernelOp& op : best.graph.ops())
    if (op.kind == OpKind::Customized) k = &op;
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->body->num_outputs(), 2);
  EXPECT_EQ(block_ops(best.graph, OpKind::Input).count("rms_norm"), 1u);
}

// ---- loop-invariant operands after the loop ----------------------------------------------

// add(matmul(X, W), bias) at K = 4096: without a for-loop over K no tile pair fits shared
// memory, so the fused kernel must loop over K and add the bias (an fmap-φ tile) after the
// loop (docs/mugraph-semantics.md §3.4).
TEST(SearchPrograms, BiasIsAddedAfterTheLoop) {
  KernelGraph program = parse(
      "input X: f16[16, 4096]\ninput W: f16[4096, 1024]\ninput B: f16[1024]\n"
      "O = add(matmul(X, W), B)\noutput O\n");
  auto r = superoptimize(program, config("bias"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r->ranked.empty());
  // The program itself is one cuBLAS call with the bias as its epilogue (docs/codegen.md,
  // "Library epilogues"), which may rank first; the fused kernel is ranked beside it.
  const Candidate* fused = nullptr;
  for (const Candidate& c : r->ranked)
    if (!c.is_program && !fused) fused = &c;
  ASSERT_NE(fused, nullptr);
  const Candidate& best = *fused;
  EXPECT_TRUE(best.verification.equivalent);
  EXPECT_LE(best.verification.log2_bound, -60.0);
  ASSERT_EQ(kernels(best.graph), 1);
  const BlockGraph* b = nullptr;
  for (const KernelOp& op : best.graph.ops())
    if (op.kind == OpKind::Customized) b = op.body.get();
  ASSERT_NE(b, nullptr);
  EXPECT_GT(b->forloop(), 1);
  bool bias_after_loop = false;  // a post-loop op (or thread graph) reads the bias tile
  for (const BlockOp& op : b->ops()) {
    if (op.output < 0 || b->tensor(op.output).stage != Stage::Post) continue;
    for (int t : op.inputs)
      bias_after_loop |= b->op(b->tensor(t).producer).kind == OpKind::Input && b->loop_invariant(t);
  }
  EXPECT_TRUE(bias_after_loop);
}

// ---- a product before a row-wide norm ----------------------------------------------------

// A decode projection, its residual added and the sum normalized with a gain (H and O are
// outputs): the norm needs whole rows of H, so no kernel that normalizes splits H's columns,
// but the product before it may — the decode GEMV kernel (column tiles over the grid, K in the
// loop, the residual after it), with the norm in a second kernel (docs/search.md, "Dimension
// classes"); kernels without the product keep whole rows.
const char* kProjectionNorm =
    "input A: f16[8, 256]\ninput W: f16[256, 512]\ninput R: f16[8, 512]\ninput G: f16[512]\n"
    "H = add(matmul(A, W), R)\nO = mul(rms_norm(H, eps=1e-5), G)\noutput H\noutput O\n";

/// Whether some customized kernel of g normalizes over a part of a row: an rms_norm of a
/// tile holding fewer than `row` elements of the normalized dim, or an accum_rms_ld whose
/// iterations cover fewer.
bool normalizes_a_part(const KernelGraph& g, int64_t row) {
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    const BlockGraph& b = *op.body;
    for (const BlockOp& o : b.ops()) {
      if (o.inputs.empty()) continue;
      const Shape& s = b.tensor(o.inputs[0]).shape;
      if (o.kind == OpKind::RmsNorm) {
        const int d = o.attrs.dim < 0 ? o.attrs.dim + s.rank() : o.attrs.dim;
        if (s[d] < row) return true;
      }
      if (o.kind == OpKind::AccumRmsLd && s[s.rank() - 1] * b.forloop() < row) return true;
    }
  }
  return false;
}

/// Whether g computes the product in a customized kernel whose grid splits W's columns (a
/// block matmul, W's iterator mapping a grid axis of more than one block to dim 1) and
/// normalizes in another kernel.
bool gemv_then_norm(const KernelGraph& g, int w) {
  bool gemv = false, norm_elsewhere = false;
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::RmsNorm) norm_elsewhere = true;
    if (op.kind != OpKind::Customized) continue;
    const BlockGraph& b = *op.body;
    bool matmul = false, split_columns = false, norm = false;
    for (const BlockOp& o : b.ops()) {
      matmul |= o.kind == OpKind::Matmul;
      norm |= o.kind == OpKind::RmsNorm || o.kind == OpKind::AccumRmsLd;
    }
    for (int i = 0; i < b.num_inputs(); ++i) {
      if (op.inputs[i] != w) continue;
      const BlockOp& in = b.op(b.input_op(i));
      for (int a = 0; a < 3; ++a) split_columns |= in.attrs.imap[a] == 1 && b.grid()[a] > 1;
    }
    if (matmul && split_columns && !norm) gemv = true;
    if (norm && !matmul) norm_elsewhere = true;
  }
  return gemv && norm_elsewhere;
}

/// Whether some customized kernel of g without a product splits the `row` columns over its
/// grid (an input iterator mapping a grid axis of more than one block to a dim of that extent).
bool splits_columns_without_product(const KernelGraph& g, int64_t row) {
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized) continue;
    const BlockGraph& b = *op.body;
    bool matmul = false, split = false;
    for (const BlockOp& o : b.ops()) matmul |= o.kind == OpKind::Matmul;
    for (int i = 0; i < b.num_inputs(); ++i) {
      const BlockOp& in = b.op(b.input_op(i));
      for (int a = 0; a < 3; ++a) {
        const int d = in.attrs.imap[a];
        split |= d >= 0 && b.grid()[a] > 1 && b.input_shape(i)[d] == row;
      }
    }
    if (split && !matmul) return true;
  }
  return false;
}

TEST(SearchPrograms, ProductBeforeARowNormSplitsItsColumns) {
  KernelGraph program = parse(kProjectionNorm);
  const int w = 1;  // W's tensor id: the second input
  std::mutex mu;
  int found = 0, partial_norms = 0, elementwise_splits = 0;
  std::vector<KernelGraph> gemvs;
  auto r =
      superoptimize(program, config("projection_norm").with_observer([&](const KernelGraph& g) {
        std::lock_guard<std::mutex> lock(mu);
        ++found;
        partial_norms += normalizes_a_part(g, 512);
        elementwise_splits += splits_columns_without_product(g, 512);
        if (gemv_then_norm(g, w) && gemvs.size() < 2) gemvs.push_back(g);
      }));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_GT(found, 0);
  EXPECT_EQ(partial_norms, 0);
  // Only the product's kernel splits the normalized columns; the residual add or the gain
  // alone do not (docs/search.md, "Dimension classes").
  EXPECT_EQ(elementwise_splits, 0);
  ASSERT_FALSE(gemvs.empty()) << "no graph with a GEMV kernel before the norm";
  for (const KernelGraph& g : gemvs) {
    auto v = verify_equivalent(program, g);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
}

// Between two norms of the same rows (nGPT's update, rms_norm(X + α ⊙ (rms_norm(H) − X))) no
// kernel reads a weight: no kernel splits the normalized columns, and the search is the one of
// whole rows (docs/search.md, "Dimension classes").
TEST(SearchPrograms, ElementwiseKernelsKeepNormalizedRowsWhole) {
  KernelGraph program = parse(
      "input H: f16[2, 256]\ninput X: f16[2, 256]\ninput Alpha: f16[2, 256]\n"
      "N = rms_norm(H)\nD = sub(N, X)\nM = mul(Alpha, D)\nS = add(X, M)\nO = rms_norm(S)\n"
      "output O\n");
  std::mutex mu;
  int found = 0, splits = 0;
  auto r = superoptimize(program, config("ntrans").with_observer([&](const KernelGraph& g) {
    std::lock_guard<std::mutex> lock(mu);
    ++found;
    splits += splits_columns_without_product(g, 256);
  }));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_GT(found, 0);
  EXPECT_EQ(splits, 0) << "of " << found << " graphs";
}

// The rule alone, without the abstract expressions (whose norm counts would refuse a norm of a
// part as well): the one-kernel graphs of a product normalized along its columns, enumerated
// unpruned (by shape alone, with every grid split of the columns offered), include none that
// normalizes a part of a row.
TEST(SearchPrograms, NoKernelNormalizesColumnsItsGridSplits) {
  KernelGraph program = parse(
      "input A: f16[8, 64]\ninput W: f16[64, 512]\nO = rms_norm(matmul(A, W), eps=1e-5)\n"
      "output O\n");
  std::mutex mu;
  int found = 0, partial_norms = 0;
  auto cfg = config("norm_unpruned")
                 .with_abstract_pruning(false)
                 .with_max_kernel_ops(1)
                 .with_max_block_ops(6)
                 .with_top_k(1)
                 .with_observer([&](const KernelGraph& g) {
                   std::lock_guard<std::mutex> lock(mu);
                   ++found;
                   partial_norms += normalizes_a_part(g, 512);
                 });
  auto r = superoptimize(program, cfg);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_GT(found, 0);
  EXPECT_EQ(partial_norms, 0) << "of " << found << " graphs";
}

}  // namespace
}  // namespace strata
