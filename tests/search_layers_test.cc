// Tests of the search by weight layers (docs/search.md, "Layers"): the split of a program at
// its weight-matmul layers, the segments it makes, which programs are searched that way, and
// the search of a decoder layer's MLP partition (output projection, residual, RMSNorm,
// SwiGLU, down projection, residual) that finds a fused graph only that way.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "search/layered_search.h"
#include "search/layers.h"
#include "search/segments.h"
#include "strata/frontend/program_parser.h"
#include "strata/search/search.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"

namespace strata {
namespace {

using testing::parse;

/// The decoder layer's second partition as the PyTorch backend lowers it (the RMSNorm written
/// out, rsqrt as C / sqrt with C an input of shape [1]), hidden h, MLP width m, batch b.
std::string mlp_partition(int b, int h, int m) {
  const std::string B = std::to_string(b), H = std::to_string(h), M = std::to_string(m);
  return "input A: f16[" + B + ", " + H + "]\ninput Wo: f16[" + H + ", " + H + "]\ninput X: f16[" +
         B + ", " + H + "]\ninput G: f16[" + H + "]\ninput W1: f16[" + H + ", " + M +
         "]\ninput W3: f16[" + H + ", " + M + "]\ninput W2: f16[" + M + ", " + H +
         "]\ninput C: f16[1]\n"
         "H = add(X, matmul(A, Wo))\n"
         "N = mul(mul(H, div(C, sqrt(add_scalar(mean(square(H), dim=1), 1e-05)))), G)\n"
         "M = mul(silu(matmul(N, W1)), matmul(N, W3))\n"
         "O = add(H, matmul(M, W2))\n"
         "output O\n";
}

/// The segment of the op producing tensor `name`.
int segment_of(const KernelGraph& p, const search::LayerSplit& s, const std::string& name) {
  const int t = p.find_tensor(name);
  EXPECT_GE(t, 0) << name;
  return t < 0 ? -2 : s.segment_of[p.tensor(t).producer];
}

std::vector<std::string> names(const KernelGraph& p, const std::vector<int>& tensors) {
  std::vector<std::string> out;
  for (int t : tensors) out.push_back(p.tensor_name(t));
  return out;
}

TEST(WeightLayers, TheMlpPartitionHasThreeLayersWithTheirEpilogues) {
  const KernelGraph p = parse(mlp_partition(8, 256, 512));
  const search::LayerSplit s = search::split_weight_layers(p);
  EXPECT_EQ(s.layers, 3);
  // The residual and the whole RMSNorm follow the output projection; silu and the gating
  // product follow the gate/up projections; the last residual follows the down projection.
  EXPECT_EQ(segment_of(p, s, "H"), 0);
  EXPECT_EQ(segment_of(p, s, "N"), 0);
  EXPECT_EQ(segment_of(p, s, "M"), 1);
  EXPECT_EQ(segment_of(p, s, "O"), 2);
  for (int t : p.inputs()) EXPECT_EQ(s.segment_of[p.tensor(t).producer], -1);
  // Every op reads results of its own segment or earlier ones.
  for (size_t i = 0; i < p.ops().size(); ++i)
    for (int t : p.op(static_cast<int>(i)).inputs) {
      const int producer = p.tensor(t).producer;
      EXPECT_LE(s.segment_of[producer], s.segment_of[i]);
    }
}

TEST(WeightLayers, SegmentsReadAndWriteTheTensorsThatCrossTheirSeams) {
  const KernelGraph p = parse(mlp_partition(8, 256, 512));
  const search::LayerSplit s = search::split_weight_layers(p);
  const std::vector<search::Segment> segs = search::make_segments(p, s.segment_of, 3);
  ASSERT_EQ(segs.size(), 3u);
  using V = std::vector<std::string>;
  EXPECT_EQ(names(p, segs[0].inputs), (V{"A", "Wo", "X", "C", "G"}));  // in order of first use
  EXPECT_EQ(names(p, segs[0].outputs), (V{"H", "N"}));  // H is read again by the last residual
  EXPECT_EQ(names(p, segs[1].inputs), (V{"N", "W1", "W3"}));
  EXPECT_EQ(names(p, segs[1].outputs), (V{"M"}));
  EXPECT_EQ(names(p, segs[2].inputs), (V{"M", "W2", "H"}));
  EXPECT_EQ(names(p, segs[2].outputs), (V{"O"}));
  auto seg = search::segment_program(p, segs[1]);
  ASSERT_TRUE(seg.ok()) << seg.error().message;
  EXPECT_EQ(seg->inputs().size(), 3u);
  EXPECT_EQ(seg->outputs().size(), 1u);
}

TEST(WeightLayers, OpsBeforeTheFirstWeightMatmulJoinTheirFirstReader) {
  // N normalizes an input and feeds the second layer only; V scales an input for the last.
  const KernelGraph p = parse(
      "input X: f16[8, 64]\ninput Y: f16[8, 64]\ninput W1: f16[64, 64]\ninput W2: f16[64, 64]\n"
      "input W3: f16[64, 64]\n"
      "A = matmul(X, W1)\nN = rms_norm(Y, eps=1e-5)\nB = matmul(add(A, N), W2)\n"
      "V = mul_scalar(Y, 0.5)\nO = add(matmul(B, W3), V)\noutput O\n");
  const search::LayerSplit s = search::split_weight_layers(p);
  EXPECT_EQ(s.layers, 3);
  EXPECT_EQ(segment_of(p, s, "A"), 0);
  EXPECT_EQ(segment_of(p, s, "N"), 0);  // read by add(A, N), which follows layer 1
  EXPECT_EQ(segment_of(p, s, "B"), 1);
  EXPECT_EQ(segment_of(p, s, "V"), 2);  // read only by the last layer's residual
  EXPECT_EQ(segment_of(p, s, "O"), 2);
}

TEST(WeightLayers, OnlyMatmulsReadingAProgramInputOrItsViewStartALayer) {
  // Attention on the slices of one projection: the products of computed tensors stay in the
  // projection's layer (a FlashAttention kernel needs them together).
  const KernelGraph attn = parse(
      "input X: f16[32, 256]\ninput W: f16[256, 384]\nQKV = matmul(X, W)\n"
      "Q = slice(QKV, dim=1, start=0, end=128)\nK = slice(QKV, dim=1, start=128, end=256)\n"
      "V = slice(QKV, dim=1, start=256, end=384)\n"
      "O = matmul(softmax(matmul(Q, transpose(K)), dim=1), V)\noutput O\n");
  EXPECT_EQ(search::split_weight_layers(attn).layers, 1);
  // A slice (or transpose) of an input is a weight like the input itself.
  const KernelGraph views = parse(
      "input X: f16[8, 64]\ninput W: f16[64, 192]\n"
      "A = matmul(X, slice(W, dim=1, start=0, end=64))\n"
      "B = matmul(A, transpose(slice(W, dim=1, start=64, end=128)))\n"
      "O = matmul(B, slice(W, dim=1, start=128, end=192))\noutput O\n");
  EXPECT_TRUE(search::is_program_operand(views, views.find_tensor("W")));
  EXPECT_FALSE(search::is_program_operand(views, views.find_tensor("A")));
  EXPECT_EQ(search::split_weight_layers(views).layers, 3);
  // No matmul: no layer, one segment.
  const KernelGraph norm = parse("input X: f16[8, 64]\nO = rms_norm(X, eps=1e-5)\noutput O\n");
  const search::LayerSplit s = search::split_weight_layers(norm);
  EXPECT_EQ(s.layers, 0);
  EXPECT_EQ(segment_of(norm, s, "O"), 0);
}

TEST(WeightLayers, OnlyProgramsWithMoreLayersThanCustomizedKernelsAreSplit) {
  const KernelGraph p = parse(mlp_partition(8, 256, 512));
  EXPECT_TRUE(search::searched_by_layers(p, SearchConfig{}));
  EXPECT_FALSE(search::searched_by_layers(p, SearchConfig{}.with_split_layers(false)));
  SearchConfig three;
  three.max_customized_ops = 3;
  EXPECT_FALSE(search::searched_by_layers(p, three));
}

TEST(WeightLayers, NoPaperBenchmarkOrSuiteProgramIsSplit) {
  // The paper's six benchmarks and the suite are searched as before (docs/search.md, "Layers").
  int seen = 0;
  for (const char* dir : {"examples/programs", "bench/suite"}) {
    ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " (tests run from the source root)";
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() != ".strata") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      auto g = parse_program(text.str(), e.path().string());
      ASSERT_TRUE(g.ok()) << g.error().message;
      EXPECT_FALSE(search::searched_by_layers(*g, SearchConfig{})) << e.path();
      ++seen;
    }
  }
  EXPECT_GT(seen, 20);
}

TEST(SearchByLayers, AJoinsBoundIsTheSumOfItsPartsBounds) {
  auto part = [](double log2_bound, int trials, bool is_program) {
    Candidate c;
    c.is_program = is_program;
    c.verification.equivalent = true;
    c.verification.log2_bound = is_program ? -INFINITY : log2_bound;
    c.verification.trials = is_program ? 0 : trials;
    return c;
  };
  const Candidate a = part(-61, 1, false), b = part(-61, 2, false), p = part(0, 0, true);
  const Candidate c = part(-118, 2, false);
  VerifyResult two = search::composed_verification({&a, &b, &p});
  EXPECT_TRUE(two.equivalent);
  EXPECT_DOUBLE_EQ(two.log2_bound, -60);  // 2^-61 + 2^-61: just proved
  EXPECT_EQ(two.trials, 1);
  EXPECT_NE(two.detail.find("joined from 3"), std::string::npos);
  // Three parts at 2^-61 miss 2^-60: the search verifies such a join against the program.
  EXPECT_GT(search::composed_verification({&a, &b, &a}).log2_bound, -60);
  EXPECT_NEAR(search::composed_verification({&c, &a}).log2_bound, -61, 1e-9);
}

/// Whether some customized kernel of g holds two matmuls and a silu (the gate and up
/// projections with the activation), and whether one holds an rms_norm.
bool has_kernel_with(const KernelGraph& g, const std::vector<OpKind>& kinds) {
  for (const KernelOp& op : g.ops()) {
    if (!op.body) continue;
    std::vector<OpKind> left = kinds;
    for (const BlockOp& b : op.body->ops()) {
      auto it = std::find(left.begin(), left.end(), b.kind);
      if (it != left.end()) left.erase(it);
      // A thread graph fused into the block graph carries its ops in its chain.
      for (const ThreadStep& t : b.chain) {
        auto jt = std::find(left.begin(), left.end(), t.kind);
        if (jt != left.end()) left.erase(jt);
      }
    }
    if (left.empty()) return true;
  }
  return false;
}

TEST(SearchByLayers, TheMlpPartitionGetsAFusedGraphProvedByItsSegments) {
  // Hidden 256, MLP 512, 8 tokens. States, not time, bound the search (deterministic): the
  // three segments get a quarter of them each, the whole program what they leave.
  const KernelGraph p = parse(mlp_partition(8, 256, 512));
  const SearchConfig c = SearchConfig{}
                             .with_threads(2)
                             .with_quiet(true)
                             .with_cache(false)
                             .with_top_k(2)
                             .with_max_states(120000);
  auto r = superoptimize(p, c);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Candidate& program = r->ranked[r->program_index()];
  ASSERT_TRUE(program.graph.structurally_equal(p));
  const Candidate& best = r->ranked.front();
  ASSERT_FALSE(best.is_program) << "no fused graph";
  EXPECT_TRUE(best.verification.equivalent);
  EXPECT_LE(best.verification.log2_bound, -60);
  EXPECT_NE(best.verification.detail.find("joined from 3"), std::string::npos)
      << best.verification.detail;
  EXPECT_LT(best.cost.predicted_us, program.cost.predicted_us);
  EXPECT_LT(best.cost.kernels.size(), program.cost.kernels.size());
  EXPECT_GE(best.graph.num_customized(), 3);
  // The gate and up projections share a kernel with the activation; the norm is fused.
  EXPECT_TRUE(has_kernel_with(best.graph, {OpKind::Matmul, OpKind::Matmul, OpKind::Silu}));
  EXPECT_TRUE(has_kernel_with(best.graph, {OpKind::RmsNorm}));
  // The segments' proofs compose; a full verification against the program agrees.
  auto v = verify_equivalent(p, best.graph);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->equivalent) << v->detail;
  // What the user sees: one note per segment and the split itself.
  int segment_notes = 0;
  for (const std::string& n : r->notes) segment_notes += n.rfind("segment ", 0) == 0;
  EXPECT_GE(segment_notes, 3);
  // The whole program's search ran after the segments, with the states they left, and stopped.
  EXPECT_EQ(r->stats.stop, StopReason::StateLimit);
}

TEST(SearchByLayers, WithoutTheSplitTheSameStatesFindNothingFused) {
  // The whole program's tree is far larger than the states the split search needs.
  const KernelGraph p = parse(mlp_partition(8, 256, 512));
  const SearchConfig c = SearchConfig{}
                             .with_threads(2)
                             .with_quiet(true)
                             .with_cache(false)
                             .with_top_k(1)
                             .with_split_layers(false)
                             .with_max_states(120000);
  auto r = superoptimize(p, c);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::StateLimit);
  // Nothing from the enumeration: the program, and the library forms built beside it
  // (docs/search.md, "Library forms": the elementwise ops around the four products fused).
  for (const Candidate& cand : r->ranked)
    EXPECT_TRUE(cand.is_program || cand.derived == "library_form");
}

}  // namespace
}  // namespace strata
