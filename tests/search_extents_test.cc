// The search over extents no power-of-two tile divides, and over extents too large for the
// default grid tiles (docs/search.md, "Extents"): LM heads with an odd vocabulary and a gated
// MLP with an intermediate size of 11000 get fused graphs with ragged splits that the code
// generator emits; LM heads of 128256 and 152064 columns get fused graphs with larger tiles.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "strata/codegen/cuda_emitter.h"
#include "strata/search/dim_classes.h"
#include "strata/opt/kernel_plan.h"
#include "strata/frontend/graph_loader.h"
#include "strata/frontend/program_parser.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/search/search.h"

namespace strata {
namespace {

SearchConfig config(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("strata-search-extents-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return SearchConfig{}
      .with_threads(2)
      .with_quiet(true)
      .with_cache(false)
      .with_cache_dir(dir.string())
      .with_top_k(1);
}

/// The best graph of the search over `program`, which must be one customized kernel (fused)
/// that the code generator emits; returns its block graph (none on failure).
std::optional<BlockGraph> best_fused(const std::string& name, const std::string& program) {
  auto prog = parse_program(program, name + ".strata");
  EXPECT_TRUE(prog.ok()) << prog.error().message;
  if (!prog.ok()) return std::nullopt;
  auto r = superoptimize(*prog, config(name));
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok() || r->ranked.empty()) return std::nullopt;
  const KernelGraph& best = r->ranked[0].graph;
  const KernelOp* fused = nullptr;
  int others = 0;
  for (const KernelOp& op : best.ops()) {
    if (op.kind == OpKind::Customized)
      fused = &op;
    else if (op.kind != OpKind::Input)
      ++others;
  }
  EXPECT_TRUE(fused != nullptr && others == 0)
      << name << ": the best graph is not one fused kernel";
  if (!fused) return std::nullopt;
  EXPECT_EQ(block_graph_codegen_unsupported(*fused->body), "") << name;
  auto src = emit_cuda_source(best);
  EXPECT_TRUE(src.ok()) << name << ": " << (src.ok() ? "" : src.error().message);
  return *fused->body;
}

/// The per-block tile of the grid split of W's last dim (the vocabulary), or 0.
int64_t vocabulary_tile(const BlockGraph& b, int w_input) {
  const BlockOp& in = b.op(b.input_op(w_input));
  for (int a = 0; a < 3; ++a)
    if (in.attrs.imap[a] == 1) return b.tensor(in.output).shape[1];
  return 0;
}

// rms_norm(X) · G, then an LM head of 50257 columns (GPT-2's vocabulary, prime to every tile):
// a fused graph splitting the vocabulary raggedly, which the code generator now emits.
// Decode attention over 4097 keys: a graph the search once ranked first whose second kernel
// reads the scores, a 16-bit intermediate, in tiles of rows of 4097 — which the emitter stores
// in f32 (they could only be copied 2 bytes at a time otherwise). Planned with the graph's
// dtypes its shared memory fits; planned as the emitter stores it, 247040 bytes do not, and the
// search's emittability screen (plan_customized_kernels) now refuses it.
TEST(SearchExtents, EmittabilityIsJudgedOnTheStoredTypes) {
  auto g = load_graph("tests/data/emit/kv4097_widened_smem.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  const PlanOptions plan = PlanOptions::for_arch(*Target::by_name("h200"));
  int customized = 0;
  for (const KernelOp& op : g->ops()) {
    if (op.kind != OpKind::Customized) continue;
    ++customized;
    std::vector<DType> in, out;
    for (int t : op.inputs) in.push_back(g->tensor(t).dtype);
    for (int t : op.outputs) out.push_back(g->tensor(t).dtype);
    EXPECT_TRUE(optimize_block_graph(op.body, in, out, plan).ok());
  }
  EXPECT_EQ(customized, 2);
  EmitOptions options;
  options.plan = plan;
  const Status planned = plan_customized_kernels(*g, options);
  ASSERT_FALSE(planned.ok());
  EXPECT_NE(planned.error().message.find("247040 bytes of shared memory"), std::string::npos)
      << planned.error().message;
  auto emitted = emit_cuda_source(*g, options);
  ASSERT_FALSE(emitted.ok());
  EXPECT_NE(emitted.error().message.find("247040 bytes"), std::string::npos);
  // A graph the emitter builds passes the same screen.
  auto program = load_graph("bench/suite/llama3_8b_attn_d1_kv4097.strata");
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_TRUE(plan_customized_kernels(*program, options).ok());
}

// Llama-3-70B decode attention over 8191 keys (8 KV heads, 8 query rows each): graphs whose
// second kernel reads whole rows of scores — 8 × 8191, a 16-bit intermediate the emitter
// stores in f32, 262 KB in one tile — passed the expansion's estimate (counted at f16, with
// 1.2× slack for reused tiles) and filled the candidate pool; the emittability screen then
// dropped 257 of them and the search ranked 4 graphs of the 8 asked for. The expansion counts
// tiles as the emitter stores them and asks the plan of a block one of whose tiles alone
// exceeds shared memory.
TEST(SearchExtents, ATileTooLargeAsStoredNeverReachesThePool) {
  auto prog = parse_program(R"(input Q: f16[8, 8, 128]
input K: f16[8, 8191, 128]
input V: f16[8, 8191, 128]
S = mul_scalar(matmul(Q, transpose(K)), 0.08838834764831843)
O = matmul(softmax(S, dim=-1), V)
output O
)",
                            "kv8191.strata");
  ASSERT_TRUE(prog.ok()) << prog.error().message;
  auto r = superoptimize(*prog, config("kv8191").with_top_k(8));
  ASSERT_TRUE(r.ok()) << r.error().message;
  int enumerated = 0;
  for (const Candidate& c : r->ranked) enumerated += !c.is_program && c.derived.empty();
  EXPECT_GE(enumerated, 8);
  const auto smem = r->stats.prunes_by_rule.find("codegen_shared_memory");
  EXPECT_LT(smem == r->stats.prunes_by_rule.end() ? 0 : smem->second, 32);
}

TEST(SearchExtents, OddVocabularyGetsARaggedFusedGraph) {
  std::optional<BlockGraph> b = best_fused("vocab50257", R"(
input X: f16[2, 2048]
input G: f16[1, 2048]
input W: f16[2048, 50257]
Y = rms_norm(X)
Z = mul(Y, G)
O = matmul(Z, W)
output O
)");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->ragged());
  EXPECT_GT(vocabulary_tile(*b, 2), 0);
}

// A gated MLP with intermediate size 11000: fused, the intermediate dim split raggedly.
TEST(SearchExtents, GatedMlpHidden11000GetsARaggedFusedGraph) {
  std::optional<BlockGraph> b = best_fused("mlp11000", R"(
input X: f16[2, 2048]
input W1: f16[2048, 11000]
input W3: f16[2048, 11000]
A = matmul(X, W1)
B = matmul(X, W3)
S = silu(A)
O = mul(S, B)
output O
)");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->ragged());
}

// Vocabularies of 128256 (Llama 3) and 152064 (Qwen2.5): 128256 splits into 1002 blocks of
// 128 columns, within the search's bound of 8 × SM count (1056 on an H100); 152064 would need
// 1188, so the search offers tiles of 256 (594 blocks), and the LM head is fused.
TEST(SearchExtents, LargeVocabulariesGetLargerTiles) {
  SplitPolicy policy;
  DimClassInfo llama;
  llama.extent = 128256;
  DimClassInfo qwen;
  qwen.extent = 152064;
  EXPECT_EQ(grid_extent_candidates(llama, policy), (std::vector<int64_t>{1002}));  // tiles of 128
  EXPECT_EQ(grid_extent_candidates(qwen, policy), (std::vector<int64_t>{594}));    // tiles of 256
  policy.max_blocks = 528;  // a tighter bound: the next larger tiles
  EXPECT_EQ(grid_extent_candidates(llama, policy), (std::vector<int64_t>{501}));  // tiles of 256
  EXPECT_EQ(grid_extent_candidates(qwen, policy), (std::vector<int64_t>{297}));   // tiles of 512
  struct Head {
    int64_t vocab, tokens, tile;
  };
  for (Head h : {Head{128256, 1, 128}, Head{152064, 8, 256}}) {
    const std::string name = "head" + std::to_string(h.vocab);
    // (K = 256 keeps the verifier's trials small; `strata optimize` finds the same tiles with
    // K = 2048.)
    std::optional<BlockGraph> b = best_fused(
        name, "input X: f16[" + std::to_string(h.tokens) + ", 256]\ninput W: f16[256, " +
                  std::to_string(h.vocab) + "]\nY = rms_norm(X)\nO = matmul(Y, W)\noutput O\n");
    ASSERT_TRUE(b) << name;
    EXPECT_EQ(vocabulary_tile(*b, 1), h.tile) << name;
  }
}

// Long classes of matmul rows also take tiles of 256 rows, four 64-row warpgroups for wgmma
// (SplitPolicy::wgmma_grid_tiles): prefill attention's 16384 query rows of one KV head in 64
// blocks beside the list's 128 … 1024 (tiles of 128 … 16); other classes, short ones and a target without wgmma
// (the search clears the list) keep the list alone.
TEST(SearchExtents, MatmulRowsGetWarpgroupTiles) {
  SplitPolicy policy;
  DimClassInfo rows;
  rows.extent = 16384;
  rows.matmul_rows = true;
  EXPECT_EQ(grid_extent_candidates(rows, policy),
            (std::vector<int64_t>{64, 128, 256, 512, 1024}));
  DimClassInfo columns = rows;  // not a matmul's rows: no 256-row tiles
  columns.matmul_rows = false;
  EXPECT_EQ(grid_extent_candidates(columns, policy),
            (std::vector<int64_t>{128, 256, 512, 1024}));
  DimClassInfo short_rows = rows;  // fewer than 16 blocks of 256 rows
  short_rows.extent = 2048;
  EXPECT_EQ(grid_extent_candidates(short_rows, policy),
            (std::vector<int64_t>{16, 32, 64, 128}));
  DimClassInfo summed = rows;  // a split-K class keeps its reduce tiles
  summed.sum_reduced = true;
  EXPECT_EQ(grid_extent_candidates(summed, policy), (std::vector<int64_t>{16, 32, 64, 128}));
  policy.wgmma_grid_tiles.clear();  // a target without wgmma
  EXPECT_EQ(grid_extent_candidates(rows, policy), (std::vector<int64_t>{128, 256, 512, 1024}));
  // The query rows of GQA attention packed as Q[KV heads, G·T, d] are the rows of S = Q·Kᵀ.
  auto prog = parse_program(
      "input Q: f16[8, 16384, 64]\ninput K: f16[8, 4096, 64]\ninput V: f16[8, 4096, 64]\n"
      "S = matmul(Q, transpose(K))\nP = softmax(S, dim=-1)\nO = matmul(P, V)\noutput O\n",
      "gqa.strata");
  ASSERT_TRUE(prog.ok()) << prog.error().message;
  auto classes = ClassTable::analyze(*prog);
  ASSERT_TRUE(classes.ok()) << classes.error().message;
  int matmul_rows = 0;
  for (int c = 0; c < classes->num_plain(); ++c) {
    const DimClassInfo& info = classes->info(c);
    if (!info.matmul_rows) continue;
    ++matmul_rows;
    EXPECT_EQ(info.extent, 16384) << info.label;
  }
  EXPECT_EQ(matmul_rows, 1);
}

}  // namespace
}  // namespace strata
