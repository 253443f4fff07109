// Tests of prologue folding (src/search/prologue_fold.h, docs/search.md "Prologue folding"): a
// predefined norm and a loop-free customized gain kernel before a kernel that reads their
// result as a loop-invariant tile fold into it, each fold proved equivalent and emitted; every
// condition that keeps a prologue a kernel of its own is refused.
#include "search/prologue_fold.h"

#include <gtest/gtest.h>

#include "strata/codegen/cuda_emitter.h"
#include "strata/ir/graph_json.h"
#include "strata/verify/verifier.h"

namespace strata {
namespace {

KernelGraph load(const std::string& text) {
  auto g = kernel_graph_from_json(Json::parse(text), "test");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

int kernels(const KernelGraph& g) {
  return static_cast<int>(g.ops().size() - g.inputs().size());
}

/// rms_norm(X) · (G1·G2), then a matmul with W, as the prologues and the consumer are given:
/// a predefined norm, a loop-free gain kernel over `gain_grid` row blocks, and a matmul kernel
/// over `grid` row blocks whose X tile is `x_fmap` (null: loop-invariant) with `forloop`
/// iterations over W's columns. `extra` adds ops after the consumer; `outputs` names the
/// outputs.
std::string graph(int gain_grid, int grid, const std::string& x_fmap = "null", int forloop = 2,
                  const std::string& extra = "", const std::string& outputs = R"(["O"])") {
  // An axis of one block maps to φ.
  auto rows = [](int n) { return std::string(n > 1 ? "[0, null, null]" : "[null, null, null]"); };
  return R"({"format": "strata-mugraph", "version": 1,
  "inputs": [{"name": "X", "shape": [16, 64], "dtype": "f16"},
             {"name": "G1", "shape": [64], "dtype": "f16"},
             {"name": "G2", "shape": [64], "dtype": "f16"},
             {"name": "W", "shape": [64, 32], "dtype": "f16"}],
  "ops": [
    {"op": "rms_norm", "inputs": ["X"], "output": "N", "dim": 1, "eps": 1e-06},
    {"op": "customized", "inputs": ["G1", "G2", "N"], "outputs": ["Y"], "block_graph": {
      "grid": [)" +
         std::to_string(gain_grid) + R"(, 1, 1], "block": 128, "forloop": 1, "ops": [
        {"op": "input", "input": 0, "imap": [null, null, null], "fmap": null, "output": "g1"},
        {"op": "input", "input": 1, "imap": [null, null, null], "fmap": null, "output": "g2"},
        {"op": "input", "input": 2, "imap": )" +
         rows(gain_grid) + R"(, "fmap": null, "output": "n"},
        {"op": "thread_graph", "inputs": ["g1", "g2", "n"], "output": "y",
         "steps": [{"op": "mul", "args": [0, 1]}, {"op": "mul", "args": [2, 3]}]},
        {"op": "accum", "inputs": ["y"], "output": "a", "fmap": null},
        {"op": "output", "inputs": ["a"], "omap": )" +
         rows(gain_grid) + R"(}]}},
    {"op": "customized", "inputs": ["Y", "W"], "outputs": ["O"], "block_graph": {
      "grid": [)" +
         std::to_string(grid) + R"(, 1, 1], "block": 128, "forloop": )" + std::to_string(forloop) +
         R"(, "ops": [
        {"op": "input", "input": 0, "imap": )" +
         rows(grid) + R"(, "fmap": )" + x_fmap +
         R"(, "output": "x"},
        {"op": "input", "input": 1, "imap": [null, null, null], "fmap": 1, "output": "w"},
        {"op": "matmul", "inputs": ["x", "w"], "output": "m"},
        {"op": "accum", "inputs": ["m"], "output": "acc", "fmap": 1},
        {"op": "output", "inputs": ["acc"], "omap": )" +
         rows(grid) + R"(}]}})" + extra + R"(],
  "outputs": )" +
         outputs + "}";
}

const char* kProgram = R"(input X: f16[16, 64]
input G1: f16[64]
input G2: f16[64]
input W: f16[64, 32]
O = matmul(mul(rms_norm(X, eps=1e-06), mul(G1, G2)), W)
output O
)";

TEST(PrologueFold, NormAndGainFoldIntoTheConsumer) {
  for (int grid : {1, 2}) {
    const KernelGraph g = load(graph(grid, grid));
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
  // The gain kernel's grid splits rows in 2 but the consumer holds all 16: the gain stays (the
  // norm before it is read by the gain kernel, not by a loop-invariant input of a kernel that
  // holds its dim: it stays too).
  const std::optional<KernelGraph> mismatch = search::fold_prologues(load(graph(2, 1)));
  EXPECT_FALSE(mismatch && kernels(*mismatch) == 1);
  // Y is also a graph output, or read by a second op: the gain kernel stays.
  for (const auto& [extra, outputs] :
       {std::pair<std::string, std::string>{"", R"(["O", "Y"])"},
        std::pair<std::string, std::string>{R"(, {"op": "exp", "inputs": ["Y"], "output": "E"})",
                                            R"(["O", "E"])"}}) {
    const KernelGraph g = load(graph(1, 1, "null", 2, extra, outputs));
    const std::optional<KernelGraph> f = search::fold_prologues(g);
    ASSERT_TRUE(f);  // the norm still folds into the gain kernel
    EXPECT_EQ(kernels(*f), kernels(g) - 1) << extra << outputs;
    auto v = verify_equivalent(g, *f);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
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
