// Tests of prologue folding (src/search/prologue_fold.h, docs/search.md "Prologue folding"): a
// predefined norm and a loop-free customized gain kernel before a kernel that reads their
// result as a loop-invariant tile fold into it, also where the two tile the rows differently,
// each fold proved equivalent and emitted; every condition that keeps a prologue a kernel of
// its own is refused.
#include "search/prologue_fold.h"

#include <gtest/gtest.h>

#include "strata/codegen/cuda_emitter.h"
#include "strata/ir/graph_json.h"
#include "strata/verify/verifier.h"
#include "support/prologue_graphs.h"

namespace strata {
namespace {

using testing::prologue_graph;

KernelGraph load(const std::string& text) {
  auto g = kernel_graph_from_json(Json::parse(text), "test");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

int kernels(const KernelGraph& g) {
  return static_cast<int>(g.ops().size() - g.inputs().size());
}

TEST(PrologueFold, NormAndGainFoldIntoTheConsumer) {
  for (int grid : {1, 2}) {
    const KernelGraph g = load(prologue_graph(grid, grid));
    ASSERT_EQ(kernels(g), 3);
    const std::optional<KernelGraph> f = search::fold_prologues(g);
    ASSERT_TRUE(f) << grid;
    EXPECT_EQ(kernels(*f), 1) << grid;  // both prologues folded
    const BlockGraph& body = *f->ops().back().body;
    EXPECT_EQ(body.grid()[0], grid);
    auto v = verify_equivalent(g, *f);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
    EXPECT_LE(v->log2_bound, -60.0);
    auto src = emit_cuda(*f);
    EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  }
}

TEST(PrologueFold, WhatStaysAKernel) {
  // The consumer reads Y per iteration (a loop map): nothing folds.
  EXPECT_FALSE(search::fold_prologues(load(R"({"format": "strata-mugraph", "version": 1,
  "inputs": [{"name": "X", "shape": [16, 64], "dtype": "f16"},
             {"name": "W", "shape": [64, 32], "dtype": "f16"}],
  "ops": [
    {"op": "exp", "inputs": ["X"], "output": "Y"},
    {"op": "customized", "inputs": ["Y", "W"], "outputs": ["O"], "block_graph": {
      "grid": [1, 1, 1], "block": 128, "forloop": 4, "ops": [
        {"op": "input", "input": 0, "imap": [null, null, null], "fmap": 1, "output": "x"},
        {"op": "input", "input": 1, "imap": [null, null, null], "fmap": 0, "output": "w"},
        {"op": "matmul", "inputs": ["x", "w"], "output": "m"},
        {"op": "accum", "inputs": ["m"], "output": "acc", "fmap": null},
        {"op": "output", "inputs": ["acc"], "omap": [null, null, null]}]}}],
  "outputs": ["O"]})")));
  // Y is also a graph output, or read by a second op: the gain kernel stays.
  for (const auto& [extra, outputs] :
       {std::pair<std::string, std::string>{"", R"(["O", "Y"])"},
        std::pair<std::string, std::string>{R"(, {"op": "exp", "inputs": ["Y"], "output": "E"})",
                                            R"(["O", "E"])"}}) {
    const KernelGraph g = load(prologue_graph(1, 1, "null", 2, extra, outputs));
    const std::optional<KernelGraph> f = search::fold_prologues(g);
    ASSERT_TRUE(f);  // the norm still folds into the gain kernel
    EXPECT_EQ(kernels(*f), kernels(g) - 1) << extra << outputs;
    auto v = verify_equivalent(g, *f);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
}

TEST(PrologueFold, RowBlocksTheConsumerHoldsWholeAreAbsorbed) {
  // The gain kernel splits the rows in 2 (or 4) and the consumer holds all 16 (or splits them
  // in 2): its body is elementwise, so the consumer computes its rows at once and both
  // prologues fold.
  for (const auto& [gain_grid, grid] : {std::pair{2, 1}, std::pair{4, 2}}) {
    const KernelGraph g = load(prologue_graph(gain_grid, grid));
    const std::optional<KernelGraph> f = search::fold_prologues(g);
    ASSERT_TRUE(f) << gain_grid << " " << grid;
    EXPECT_EQ(kernels(*f), 1);
    EXPECT_EQ(f->ops().back().body->grid()[0], grid);
    auto v = verify_equivalent(g, *f);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
    EXPECT_TRUE(emit_cuda(*f).ok());
  }
  // A body that combines values along the split rows (a norm over dim 0 of its tile) computes
  // something else over all rows at once: the gain kernel stays, the norm before it folds in.
  std::string text = prologue_graph(2, 1);
  const std::string accum = R"({"op": "accum", "inputs": ["y"], "output": "a", "fmap": null})";
  const size_t at = text.find(accum);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, accum.size(),
               R"({"op": "rms_norm", "inputs": ["y"], "output": "y2", "dim": 0, "eps": 1e-06},
        {"op": "accum", "inputs": ["y2"], "output": "a", "fmap": null})");
  const KernelGraph rows = load(text);
  const std::optional<KernelGraph> partial = search::fold_prologues(rows);
  ASSERT_TRUE(partial);
  EXPECT_EQ(kernels(*partial), 2);
}

TEST(PrologueFold, NormDimSplitInTheTileStays) {
  // The consumer splits X's normalized dim over its grid: the norm cannot run on its tile.
  const KernelGraph g = load(R"({"format": "strata-mugraph", "version": 1,
  "inputs": [{"name": "X", "shape": [16, 64], "dtype": "f16"}],
  "ops": [
    {"op": "rms_norm", "inputs": ["X"], "output": "N", "dim": 1, "eps": 1e-06},
    {"op": "customized", "inputs": ["N"], "outputs": ["O"], "block_graph": {
      "grid": [1, 2, 1], "block": 128, "forloop": 1, "ops": [
        {"op": "input", "input": 0, "imap": [null, 1, null], "fmap": null, "output": "x"},
        {"op": "exp", "inputs": ["x"], "output": "e"},
        {"op": "accum", "inputs": ["e"], "output": "acc", "fmap": null},
        {"op": "output", "inputs": ["acc"], "omap": [null, 1, null]}]}}],
  "outputs": ["O"]})");
  EXPECT_FALSE(search::fold_prologues(g));
}

}  // namespace
}  // namespace strata
