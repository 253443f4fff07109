// End-to-end tests of the CUDA emitter without a GPU: emitted sources run on the CPU emulator
// of the CUDA execution model (runtime/strata_rt/emulate.h: fibers per thread, barriers, warp
// collectives with the PTX fragment layouts, asynchronous cp.async, NaN-filled shared memory)
// and must match the reference interpreter (run_reference). Each graph also runs
// with the threads of every block in reverse order, so a missing barrier shows up either way.
#include <gtest/gtest.h>

#include <functional>

#include "strata/codegen/emit_knobs.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/opt/thread_fusion.h"
#include "search/library_form.h"
#include "search/pointwise_seed.h"
#include "search/prologue_fold.h"
#include "strata/ir/graph_json.h"
#include "support/parse.h"
#include "support/library_form_programs.h"
#include "support/pointwise_programs.h"
#include "support/prologue_graphs.h"
#include "support/benchmark_graphs.h"
#include "support/coverage_graphs.h"
#include "support/elementwise_graphs.h"
#include "support/emulation_check.h"
#include "support/op_coverage_graphs.h"
#include "support/routed_graphs.h"

namespace strata::testing {
namespace {

struct Case {
  std::string name;
  KernelGraph graph;
  double amp = 0.5;
  double rtol = 2e-2;  ///< per-element tolerance (relative, plus rtol × rms of the reference)
  EmitOptions options{};
  std::vector<std::string> expect{};  ///< text the emitted source must contain (the path taken)
};

/// The case on the emulator against the interpreter of its graph (with `program`: of the naive
/// program, which the graph must match too): every element within c.rtol, rel L2 below half.
void check_graph(const Case& c, const KernelGraph* program = nullptr) {
  check_emulation(c.graph, {.name = c.name,
                            .options = c.options,
                            .expect = c.expect,
                            .reference = program,
                            .graph_matches_reference = true,
                            .seed = 1234,
                            .amp = c.amp,
                            .rtol = c.rtol,
                            .rel_l2 = c.rtol / 2});
}

// The reference μGraphs of docs/mugraph-semantics.md §6 at the small shapes of examples/ (the
// builders must
// agree with examples/reference/*_small.json), checked against their naive programs too.
TEST(Emulation, RmsNormReference) {
  KernelGraph prog = rmsnorm_program(4, 256, 512);
  check_graph({"rmsnorm", rmsnorm_graph(4, 256, 512)}, &prog);
}

TEST(Emulation, GatedMlpReference) {
  KernelGraph prog = gatedmlp_program(8, 256, 256);
  check_graph({"gatedmlp", gatedmlp_graph(8, 256, 256)}, &prog);
}

TEST(Emulation, LoraReference) {
  KernelGraph prog = lora_program(16, 64, 256, 16);
  check_graph({"lora", lora_graph(16, 64, 256, 16)}, &prog);
}

TEST(Emulation, NTransReference) {
  KernelGraph prog = ntrans_program(2, 256);
  check_graph({"ntrans", ntrans_graph(2, 256)}, &prog);
}

TEST(Emulation, GqaReference) {
  KernelGraph prog = attention_program(2, 32, 32, 512, false);
  check_graph({"gqa",
               attention_graph(2, 32, 32, 512, 4, 32, 16, false, DType::f16, 2),
               0.25,
               2e-2,
               {},
               {"along the chunk"}},  // the combine reads its tiles with vector loads
              &prog);
}

// With Q and K normalized, QK is about ±d whatever the inputs, so exp(QK) overflows f16: run
// the QK-norm graph in bf16 (which also covers the bf16 tensor-core path). bf16 operands of
// QK (8-bit mantissa) put ~0.1 of error into exponents of up to ±d, hence the tolerance.
TEST(Emulation, QkNormReferenceBf16) {
  KernelGraph prog = attention_program(2, 32, 32, 512, true, DType::bf16);
  check_graph(
      {"qknorm", attention_graph(2, 32, 32, 512, 4, 32, 16, true, DType::bf16, 2), 0.25, 6e-2},
      &prog);
}

// The paper's per-block tiles (Q 256x64, KV tiles of 64) at a short sequence: register
// accumulators of 256x64 need 256 threads.
TEST(Emulation, GqaPaperTiles) {
  check_graph({"gqa_tiles", attention_graph(2, 256, 64, 256, 2, 64, 64, false), 0.25});
}

TEST(Emulation, BuildersMatchExampleFiles) {
  struct File {
    const char* path;
    KernelGraph graph;
  } files[] = {
      {"examples/reference/rmsnorm_small.json", rmsnorm_graph(4, 256, 512)},
      {"examples/reference/gatedmlp_small.json", gatedmlp_graph(8, 256, 256)},
      {"examples/reference/lora_small.json", lora_graph(16, 64, 256, 16)},
      {"examples/reference/ntrans_small.json", ntrans_graph(2, 256)},
      {"examples/reference/gqa_small.json",
       attention_graph(2, 32, 32, 512, 4, 32, 16, false, DType::f16, 2)},
      {"examples/reference/qknorm_small.json",
       attention_graph(2, 32, 32, 512, 4, 32, 16, true, DType::f16, 2)},
  };
  for (const File& f : files) {
    auto g = load_graph(f.path);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(g->structurally_equal(f.graph)) << f.path;
  }
}

// Coverage graphs: every op, accumulator kind, map and lowering path (support/coverage_graphs.h).
TEST(EmulationCoverage, AccumulatorsAndMaps) {
  check_graph({"accmaps", accumulators_and_maps()});
}
TEST(EmulationCoverage, SimtAndReductions) {
  check_graph({"simt", simt_and_reductions()});
}
TEST(EmulationCoverage, BatchedTensorCores) {
  // The [2, 32, 32] tile's chunk loop (64 threads per group, 16 rows per step): the batch
  // index of every chunk is a function of the unrolled k alone.
  check_graph({"batched", batched_tensor_cores(), 0.5, 4e-2, {}, {"(k * 16) / 32"}});
}

TEST(EmulationCoverage, ViewsAndBlockReductions) {
  check_graph({"views", views_and_block_reductions()});
}
TEST(EmulationCoverage, PredefinedOps) {
  check_graph({"predefined", predefined_ops()});
}

// Predefined elementwise kernels in every access form (support/elementwise_graphs.h): vectors
// of 8, 4 and 2 elements and one element per step, operands broadcast along each dim, odd
// extents, f16, bf16, f32 and mixed operands. The emulator fails a vector access past a tensor's
// end or not aligned to its size.
TEST(EmulationCoverage, PredefinedElementwiseVectors) {
  ElementwiseCoverage c = predefined_elementwise();
  check_graph({"elementwise", std::move(c.graph), 0.5, 2e-2, {}, c.expect});
}

EmitOptions with(std::function<void(PlanOptions&)> set) {
  EmitOptions o;
  set(o.plan);
  return o;
}

// Post-loop ops read loop-invariant tiles (a bias, a gain computed from an fmap-φ input):
// hoisted before the loop, and loaded in the loop when hoisting is off.
TEST(EmulationCoverage, PostLoopReadsLoopInvariantTiles) {
  check_graph({"postinv", post_loop_invariants()});
  check_graph({"postinv_nohoist", post_loop_invariants(), 0.5, 2e-2,
               with([](PlanOptions& p) { p.hoist_invariants = false; })});
}

KernelGraph lora_streamed_graph(int64_t m, int64_t k, int64_t n, int64_t r, int64_t tn,
                                int64_t tm);

// Loop groups (split-F): several iterations and pipeline stages per group, one-warp groups
// (__syncwarp), multi-warp groups (named barriers), a loop that the groups do not divide evenly,
// and the block-wide pipeline with register accumulators (groups off).
TEST(EmulationLoopGroups, OneWarpGroupsWithStages) {
  check_graph({"lg_rms",
               rmsnorm_graph(4, 512, 256),
               0.5,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.forced_stages = 2;
               }),
               {"2 groups of 32 threads", "group_sync<32>", "2-stage pipeline per group",
                "kept in registers"}});
}
TEST(EmulationLoopGroups, NamedBarriersAndUnevenLoop) {
  // F = 8 over 3 groups of 2 warps: 3, 3 and 2 iterations; the partials summed by the saver
  // (PlanOptions::sum_at_read) or in place.
  for (bool at_read : {true, false}) {
    std::vector<std::string> expect = {"3 groups of 64 threads", "group_sync<64>(1 + grp)"};
    if (at_read)
      expect.insert(expect.end(), {"the loop groups' partials summed", "loop group pg's partials"});
    else
      expect.push_back("sum of the 3 loop groups");
    check_graph({at_read ? "lg_mlp" : "lg_mlp_in_place",
                 gatedmlp_graph(16, 512, 128),
                 0.5,
                 2e-2,
                 with([at_read](PlanOptions& p) {
                   p.loop_groups = 3;
                   p.threads = 192;
                   p.forced_stages = 2;
                   p.sum_at_read = at_read;
                 }),
                 expect});
  }
}
// Early refill (PlanOptions::early_refill): the stage consumed in iteration gj − 1 is refilled
// right after the barrier of gj. Uneven loops (3 groups over F = 8), more stages than a group has
// iterations (the third group has 2 iterations and 3 stages), two-stage pipelines (one stage
// ahead) and a hoisted tile that must land first.
TEST(EmulationLoopGroups, EarlyRefill) {
  for (int stages : {2, 3}) {
    SCOPED_TRACE(stages);
    check_graph({"lg_early_mlp" + std::to_string(stages),
                 gatedmlp_graph(16, 512, 128),
                 0.5,
                 2e-2,
                 with([stages](PlanOptions& p) {
                   p.loop_groups = 3;
                   p.threads = 192;
                   p.forced_stages = stages;
                   p.early_refill = true;
                 }),
                 {"3 groups of 64 threads", "next_stage = (gj + " + std::to_string(stages - 1),
                  "cp_async_wait<" + std::to_string(stages - 2) + ">();  // this group"}});
  }
  check_graph({"lg_early_rms",
               rmsnorm_graph(4, 512, 256),
               0.5,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.forced_stages = 3;
                 p.early_refill = true;
               }),
               {"group_sync<32>", "next_stage"}});
  check_graph({"lora_early", lora_streamed_graph(16, 256, 512, 16, 64, 16), 0.5, 2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.early_refill = true;
               }),
               {"2 groups of", "the invariant tiles have landed"}});
}
TEST(EmulationLoopGroups, BlockPipelineWithRegisterAccumulators) {
  check_graph({"lg_off",
               rmsnorm_graph(4, 512, 256),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               // every team sum before the guarded shared-accumulator updates
               {"per-chunk partial sums", "team_sum<8>(sums[k])",
                "team sums -> shared accumulator"}});
}
TEST(EmulationLoopGroups, SplitCombineWithVectorOperands) {
  check_graph({"combine", split_combine(), 0.5, 2e-2, {}, {"pv", "along the chunk"}});
  check_graph({"combine_g1",
               split_combine(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"along the chunk"}});
}
TEST(EmulationLoopGroups, EveryAccumulatorKind) {
  check_graph({"lg_accmaps",
               accumulators_and_maps(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of", "kept in registers", "sqrtf(("}});
  check_graph({"lg_accmaps_in_place",
               accumulators_and_maps(),
               0.5,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.sum_at_read = false;
               }),
               {"2 groups of", "kept in registers", "loop groups' partials, then accum_rms_ld"}});
  check_graph({"lg_accmaps_shared",
               accumulators_and_maps(),
               0.5,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.register_accums = false;
               }),
               {"every loop group's copy"}});
  check_graph({"lg_views",
               views_and_block_reductions(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of"}});
}

// LoRA with a streamed loop (found by the search): X, W and A are streamed over F = 2
// iterations, B is loop-invariant (fmap φ, loaded once before the loop) and stored in place
// inside the concat [W ; B], which the loop rewrites with each W tile; [X | X·A] mixes a streamed
// tile and a computed one. `split_rows` puts X's rows on grid x and W's columns on grid y (the
// batch-8 shape), else W's columns are on grid x. Under loop groups every group has its own copy
// of [W ; B], so the hoisted B must reach every copy, not only the first group's.
KernelGraph lora_streamed_graph(int64_t m, int64_t k, int64_t n, int64_t r, int64_t tn,
                                int64_t tm) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{m, k}, DType::f16));
  int w = must(g.add_input("W", Shape{k, n}, DType::f16));
  int a = must(g.add_input("A", Shape{k, r}, DType::f16));
  int bm = must(g.add_input("B", Shape{r, n}, DType::f16));
  const bool split_rows = tm < m;
  const int gx = split_rows ? static_cast<int>(m / tm) : static_cast<int>(n / tn);
  const int gy = split_rows ? static_cast<int>(n / tn) : 1;
  BlockGraph b = must(BlockGraph::make({gx, gy, 1}, 128, 2));
  const GridMap rows = split_rows ? GridMap{0, P, P} : GridMap{P, P, P};
  const GridMap cols = split_rows ? GridMap{P, 1, P} : GridMap{1, P, P};
  int xi = must(b.add_input(Shape{m, k}, rows, 1));
  int wi = must(b.add_input(Shape{k, n}, cols, 0));
  int ai = must(b.add_input(Shape{k, r}, {P, P, P}, 0));
  int bi = must(b.add_input(Shape{r, n}, cols, P));
  int xa = must(b.add_op(OpKind::Matmul, {xi, ai}));
  int right = must(b.add_op(OpKind::Concat, {wi, bi}, dim_attr(0)));
  int left = must(b.add_op(OpKind::Concat, {xi, xa}, dim_attr(1)));
  int mm = must(b.add_op(OpKind::Matmul, {left, right}));
  int o = must(b.add_op(OpKind::AccumSum, {mm}));
  GridMap out = split_rows ? GridMap{0, 1, P} : GridMap{1, P, P};
  must(b.add_output(o, out));
  auto outs = must(g.add_customized({x, w, a, bm}, std::move(b), {"O"}));
  must(g.mark_output(outs[0]));
  return g;
}

TEST(EmulationLoopGroups, LoraHoistedConcatOperand) {
  // Batch 1: X [16, 128] tiles, W's columns over grid x.
  KernelGraph b1 = lora_streamed_graph(16, 256, 512, 16, 64, 16);
  check_graph({"lora_s1", b1});
  check_graph({"lora_s1_g2", b1, 0.5, 2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }), {"2 groups of"}});
  // Without groups B stays in place inside [W ; B].
  check_graph({"lora_s1_g1", b1, 0.5, 2e-2, with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"b3 is stored in place"}});
  check_graph({"lora_s1_s1", b1, 0.5, 2e-2, with([](PlanOptions& p) {
                 p.loop_groups = 1;
                 p.forced_stages = 1;
               })});
  // Batch 8: X [64, 128] tiles over grid x, W's columns over grid y.
  KernelGraph b8 = lora_streamed_graph(128, 256, 512, 16, 128, 64);
  check_graph({"lora_s8", b8});
  check_graph({"lora_s8_g2", b8, 0.5, 2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }), {"2 groups of"}});
  check_graph({"lora_s8_g1", b8, 0.5, 2e-2, with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"b3 is stored in place"}});
}

// Matmul chains (FlashAttention style) with and without loop groups, A fragments in registers,
// and the rms_norm of K folded into the product as column scales.
TEST(EmulationChain, GqaBlockPipeline) {
  check_graph({"ch_gqa",
               attention_graph(2, 64, 64, 1024, 2, 64, 32, false),
               0.25,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"FlashAttention style", "warp_mma_rega", "mma_row_sums", "warp_mma_chained"}});
}
TEST(EmulationChain, GqaGroupsWithStages) {
  // F = 8 iterations of 64 keys over 2 groups, two stages each.
  check_graph({"ch_gqa_g",
               attention_graph(2, 64, 64, 1024, 2, 64, 32, false),
               0.25,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.forced_stages = 2;
               }),
               {"FlashAttention style", "2 groups of 128 threads", "mma_row_reduce"}});
}
TEST(EmulationChain, QkNormFoldedBf16) {
  KernelGraph g = attention_graph(2, 64, 64, 1024, 2, 64, 32, true, DType::bf16);
  check_graph({"ch_qk",
               g,
               0.25,
               6e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"FlashAttention style", "folded into a matmul", "v0 *= "}});
  check_graph({"ch_qk_g",
               g,
               0.25,
               6e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"FlashAttention style", "folded into a matmul", "2 groups of"}});
  check_graph({"ch_qk_off", g, 0.25, 6e-2, with([](PlanOptions& p) {
                 p.chain_matmuls = false;
                 p.fold_norms = false;
                 p.register_accums = false;
                 p.loop_groups = 1;
               })});
}
TEST(EmulationChain, FoldedNormsOnEitherOperand) {
  check_graph({"fold",
               folded_norms(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"folded into a matmul", "mma_transform"}});
  check_graph({"fold_g",
               folded_norms(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"folded into a matmul", "2 groups of"}});
}

TEST(EmulationChain, FoldedKNormThroughATransposeWithTheGainOnQ) {
  // K [B, L, d] with its gain moved onto Q: K's norm over the head dim folded as column scales
  // of Q·Kᵀ whether it is taken before the transpose (the canonical form) or after it; Q's
  // norm and the gain stay tiles.
  for (bool norm_first : {true, false}) {
    const std::string n = norm_first ? "qk_gain_q_nt" : "qk_gain_q_tn";
    KernelGraph g = qknorm_gain_on_q(2, 16, 64, 512, 8, norm_first);
    check_graph({n,
                 g,
                 0.25,
                 2e-2,
                 with([](PlanOptions& p) { p.loop_groups = 1; }),
                 {"FlashAttention style", "folded into a matmul", "v0 *= ",
                  "acc += v[j] * v[j];"}});  // K's rows read 16 bytes at a time
    check_graph({n + "_g",
                 g,
                 0.25,
                 2e-2,
                 with([](PlanOptions& p) { p.loop_groups = 2; }),
                 {"folded into a matmul", "2 groups of"}});
    check_graph({n + "_bf16", qknorm_gain_on_q(2, 32, 128, 256, 2, norm_first, DType::bf16),
                 0.25, 6e-2, with([](PlanOptions& p) { p.loop_groups = 1; }),
                 {"folded into a matmul"}});
    check_graph({n + "_off", g, 0.25, 2e-2, with([](PlanOptions& p) {
                   p.fold_norms = false;
                   p.loop_groups = 1;
                 })});
  }
}

// Rowwise kernels: one long row over the block (nTrans at its real width), rows inside a warp,
// rows across warps, row-shaped operands and outputs.
TEST(EmulationRowwise, NTransPaperWidth) {
  check_graph({"rw_ntrans", ntrans_graph(2, 4096), 0.5, 2e-2, {}, {"rowwise: each thread"}});
}
TEST(EmulationRowwise, RowsInAndAcrossWarps) {
  check_graph(
      {"rw_rows", rowwise_rows(), 0.5, 2e-2, {}, {"team_sum<32>(p[k])", "double-buffered"}});
  check_graph(
      {"rw_rows_off", rowwise_rows(), 0.5, 2e-2, with([](PlanOptions& p) { p.rowwise = false; })});
}

// Every emitter knob (include/strata/codegen/emit_knobs.h) changes the emitted code of a graph where it
// applies, and that code still computes the reference. A knob is compared with `base` (the
// defaults plus the settings that make it apply) and set to `value` on top of it.
struct KnobCase {
  std::string knob, base, value;
  std::function<KernelGraph()> graph;
};

std::vector<KnobCase> knob_cases() {
  auto rms = [] { return rmsnorm_graph(4, 1024, 256); };
  auto attn = [] { return attention_graph(2, 64, 64, 1024, 2, 64, 32, false); };
  auto qk = [] { return attention_graph(2, 64, 64, 1024, 2, 64, 32, true, DType::bf16); };
  return {
      {"groups", "", "groups=1", rms},
      {"stages", "groups=1", "groups=1,stages=1", rms},
      {"early", "groups=2,stages=3", "groups=2,stages=3,early=1", rms},
      {"sumread", "groups=2", "groups=2,sumread=0", rms},
      {"threads", "", "threads=256", rms},
      {"minblocks", "", "minblocks=2", rms},
      {"maxstages", "groups=1", "groups=1,maxstages=1", rms},
      {"inflight", "groups=1", "groups=1,inflight=4k", rms},
      {"regfloats", "", "regfloats=16", rms},
      {"sms", "", "sms=1", rms},
      {"smem", "", "smem=64k", [] { return gatedmlp_graph(8, 256, 256); }},
      {"tc", "", "tc=0", rms},
      {"chain", "", "chain=0", attn},
      {"chainmt", "", "chainmt=2", attn},
      {"wgmma", "", "wgmma=1", attn},
      {"fold", "", "fold=0", qk},
      {"regacc", "", "regacc=0", accumulators_and_maps},
      {"rowwise", "", "rowwise=0", [] { return ntrans_graph(2, 1024); }},
      {"inline", "", "inline=0", rms},
      {"epilogue", "", "epilogue=0", rms},
      {"hoist", "", "hoist=0", [] { return ntrans_graph(2, 1024); }},
      {"views", "", "views=0", [] { return lora_graph(16, 64, 256, 16); }},
      {"walk", "", "walk=0", rms},
      {"f32mid", "", "f32mid=1", attn},
      {"evict", "evict=0,evictmin=1024k", "evictmin=1024k",
       [] { return rmsnorm_graph(4, 1024, 512); }},
      {"evictmin", "evictmin=2048k", "evictmin=1024k", [] { return rmsnorm_graph(4, 1024, 512); }},
      {"blas", "", "blas=0", predefined_ops},
      {"streams", "", "streams=0", [] {
         return parse(R"(input X: f16[40, 48]
input Wq: f16[48, 32]
input Wk: f16[48, 16]
Q = matmul(X, Wq)
K = exp(matmul(X, Wk))
output Q
output K
)");
       }},
  };
}

EmitOptions knob_options(const std::string& spec) {
  EmitOptions o;
  Status st = apply_emit_knobs(spec, o);
  EXPECT_TRUE(st.ok()) << spec << ": " << (st.ok() ? "" : st.error().message);
  return o;
}

TEST(EmulationKnobs, EveryKnobHasACase) {
  std::vector<std::string> covered;
  for (const KnobCase& k : knob_cases()) covered.push_back(k.knob);
  EXPECT_EQ(covered, emit_knob_names());
}

TEST(EmulationKnobs, EachKnobChangesTheCodeAndStaysCorrect) {
  for (const KnobCase& k : knob_cases()) {
    SCOPED_TRACE(k.knob + ": " + k.value);
    const KernelGraph g = k.graph();
    auto base = emit_cuda_source(g, knob_options(k.base));
    auto variant = emit_cuda_source(g, knob_options(k.value));
    ASSERT_TRUE(base.ok()) << base.error().message;
    ASSERT_TRUE(variant.ok()) << variant.error().message;
    EXPECT_TRUE(base->code != variant->code) << "knob " << k.knob << " did not change the code";
    const bool bf16 = k.knob == "fold";
    check_graph(
        {"knob_" + k.knob, g, bf16 ? 0.25 : 0.5, bf16 ? 6e-2 : 2e-2, knob_options(k.value)});
  }
}

// Two row tiles per warp of a matmul chain at head dim 128 (the tuning variant
// `regfloats=96,chainmt=2`): with the default accumulator budget (64 floats) the chain's 2 × 24
// fragments do not fit and `chainmt=2` alone changes nothing; with 96 floats the warps own two
// row tiles each (B fragments shared between them) and the code still computes the reference.
TEST(EmulationKnobs, ChainRowTilesAtHeadDim128) {
  const KernelGraph g = attention_graph(2, 64, 128, 1024, 2, 64, 32, false);
  auto base = emit_cuda_source(g, knob_options("default"));
  auto mt_only = emit_cuda_source(g, knob_options("chainmt=2"));
  ASSERT_TRUE(base.ok()) << base.error().message;
  ASSERT_TRUE(mt_only.ok()) << mt_only.error().message;
  EXPECT_EQ(base->code, mt_only->code);
  EXPECT_NE(base->code.find("warps of 1 row tiles"), std::string::npos);
  check_graph({"chainmt_d128", g, 0.5, 2e-2, knob_options("regfloats=96,chainmt=2"),
               {"warps of 2 row tiles"}});
}

// Chunk loops as a per-thread base plus offsets in the unrolled k (ChunkWalk): loads, stores
// and register accumulators with a swizzle row that takes a few values, a tail of rows past the
// tile, and the same graphs with the flat chunk index (walk=0) for comparison.
TEST(EmulationChunkWalks, SplitAndFlatAgree) {
  const KernelGraph g = rmsnorm_graph(4, 512, 256);
  check_graph({"walk_split",
               g,
               0.5,
               2e-2,
               {},
               {"gtid / 8 + (k * 4) % 8", " + (k * 4) * 512)", " + tid / 8 >= 4) break;"}});
  check_graph({"walk_flat", g, 0.5, 2e-2, knob_options("walk=0"), {"const int c = "}});
  check_graph({"walk_wide", gatedmlp_graph(8, 256, 256), 0.5, 2e-2, {}, {"% 8, "}});
}
TEST(EmitKnobs, ParsesAndFormats) {
  EmitOptions o;
  ASSERT_TRUE(apply_emit_knobs(" groups=4, inflight=96k ,tc=0,f32mid=1", o).ok());
  EXPECT_EQ(o.plan.loop_groups, 4);
  EXPECT_EQ(o.plan.bytes_in_flight, 96 * 1024);
  EXPECT_FALSE(o.plan.tensor_cores);
  EXPECT_TRUE(o.f32_intermediates);
  EXPECT_EQ(format_emit_knobs(o), "groups=4,inflight=98304,tc=0,f32mid=1");
  EXPECT_EQ(format_emit_knobs(EmitOptions{}), "default");
  EmitOptions again;
  ASSERT_TRUE(apply_emit_knobs(format_emit_knobs(o), again).ok());
  EXPECT_EQ(format_emit_knobs(again), format_emit_knobs(o));
  EXPECT_TRUE(apply_emit_knobs("default", again).ok());
  for (const char* bad : {"bogus=1", "groups", "groups=-1", "groups=x", "tc=2", "stages=1k5"}) {
    EmitOptions x;
    Status st = apply_emit_knobs(bad, x);
    EXPECT_FALSE(st.ok()) << bad;
  }
  const std::string help = emit_knobs_help();
  for (const std::string& name : emit_knob_names())
    EXPECT_NE(help.find(name + " "), std::string::npos) << name;
  const size_t line = help.find("inflight ");
  ASSERT_NE(line, std::string::npos) << help;
  EXPECT_NE(help.substr(line, help.find('\n', line) - line)
                .find("(default " + std::to_string(PlanOptions{}.bytes_in_flight) + ")"),
            std::string::npos)
      << help;
}

// EmitOptions::l2_streaming marks a kernel's only input of at least l2_streaming_min_bytes when
// that kernel alone reads it, each byte by one block; the launch then carries the window (and runs the
// same under the emulator: EmulationKnobs covers the evict knob). The graphs here are small, so
// the threshold is lowered to 1 MiB (evictmin).
TEST(EmitStreaming, MarksInputsEachBlockReadsOnce) {
  auto streamed = [](const KernelGraph& g, const std::string& knobs) {
    auto src = emit_cuda_source(g, knob_options(knobs));
    EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
    if (!src.ok()) return -2;
    const bool launches = src->code.find("launch_streaming(") != std::string::npos;
    EXPECT_EQ(launches, src->kernels[0].streamed_input >= 0) << src->code;
    return src->kernels[0].streamed_input;
  };
  // W [1024, 512] f16 is 1 MiB, split over grid x by columns: marked; X is replicated.
  const KernelGraph rms = rmsnorm_graph(4, 1024, 512);
  EXPECT_EQ(streamed(rms, "evictmin=1024k"), 1);
  EXPECT_EQ(streamed(rms, "evictmin=1024k,evict=0"), -1);
  EXPECT_EQ(streamed(rms, "default"), -1);  // 16 MiB by default
  auto src = emit_cuda_source(rms, knob_options("evictmin=1024k"));
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find(", stream, t1, 1048576ULL, t0, t1, t2);"), std::string::npos)
      << src->code;
  // Half a MiB: too small to matter.
  EXPECT_EQ(streamed(rmsnorm_graph(4, 1024, 256), "evictmin=1024k"), -1);
  // W also an output (copied after the kernel): read twice.
  KernelGraph copied = rmsnorm_graph(4, 1024, 512);
  ASSERT_TRUE(copied.mark_output(copied.inputs()[1]).ok());
  EXPECT_EQ(streamed(copied, "evictmin=1024k"), -1);
  // Two streams of 1 MiB (gatedmlp's W1 and W3): one window cannot mark both, so none.
  EXPECT_EQ(streamed(gatedmlp_graph(8, 1024, 512), "evictmin=1024k"), -1);
  // X's rows split over grid y: each W tile is read by two blocks.
  KernelGraph rows;
  int x = must(rows.add_input("X", Shape{4, 1024}, DType::f16));
  int w = must(rows.add_input("W", Shape{1024, 512}, DType::f16));
  BlockGraph b = must(BlockGraph::make({8, 2, 1}, 128, 16));
  int xi = must(b.add_input(Shape{4, 1024}, {P, 0, P}, 1));
  int wi = must(b.add_input(Shape{1024, 512}, {1, P, P}, 0));
  int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {xi, wi}))}));
  must(b.add_output(am, {1, 0, P}));
  must(rows.mark_output(must(rows.add_customized({x, w}, std::move(b), {"O"}))[0]));
  EXPECT_EQ(streamed(rows, "evictmin=1024k"), -1);
}

// The reduction family beyond sums (max, rms with eps) in every path (one element or 16 bytes
// per read), and the elementwise ops without a fast path of their own.
TEST(EmulationReductions, RowwiseMaxEpsAndElementwiseOps) {
  check_graph({"rw_max",
               rowwise_max_eps(),
               1.0,
               2e-2,
               {},
               {"rowwise: each thread", "strata_rt::team_max<", "strata_rt::op_sigmoid(",
                "strata_rt::op_clamp(", "strata_rt::op_log(", "strata_rt::inv_rms(", ", 0.5f)"}});
  check_graph({"rw_max_off",
               rowwise_max_eps(),
               1.0,
               2e-2,
               with([](PlanOptions& p) { p.rowwise = false; }),
               {"acc = fmaxf(acc, v"}});
}
TEST(EmulationReductions, LoopedMaxEps) {
  const KernelGraph g = looped_max_eps();
  check_graph({"lp_max",
               g,
               1.0,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"per-chunk partial maxima", "strata_rt::atomic_max_shared(",
                "strata_rt::block_max<256>(", " + 0.05f)"}});
  check_graph({"lp_max_g",
               g,
               1.0,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of", "(fmaxf(s"}});
  check_graph({"lp_max_g_in_place",
               g,
               1.0,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 2;
                 p.sum_at_read = false;
               }),
               {"2 groups of", "++pg) v = fmaxf(v, "}});
  check_graph({"lp_max_shared",
               g,
               1.0,
               2e-2,
               with([](PlanOptions& p) {
                 p.register_accums = false;
                 p.loop_groups = 2;
               }),
               {"(to the identity of max, −∞)", "= fmaxf(s"}});
}
TEST(EmulationReductions, FoldedEpsAndChainMax) {
  const KernelGraph g = folded_eps_and_chain_max();
  check_graph({"fold_eps",
               g,
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"folded into a matmul", "strata_rt::inv_rms(acc, 64.0f, 0.5f)",
                "strata_rt::mma_row_max<false", "mma_row_reduce<mma", ", true>(racc"}});
  check_graph({"fold_eps_g",
               g,
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"FlashAttention style", "2 groups of"}});
}

// Layout ops read in place (TensorHome::Alias): transposed tensor-core operands (MmaSpec TA /
// TB), slices as operands, views read by elementwise ops, SIMT matmuls and accumulators, copies
// where ldmatrix cannot read in place.
TEST(EmulationViews, TransposedKeyInAChain) {
  check_graph({"tk_chain",
               transposed_key_chain(),
               0.25,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"FlashAttention style", "alias f16 of b1", ", true, false, true>;"}});
  check_graph({"tk_chain_g",
               transposed_key_chain(DType::bf16),
               0.25,
               4e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of", ", true>;"}});
  check_graph({"tk_nochain",
               transposed_key_chain(),
               0.25,
               2e-2,
               with([](PlanOptions& p) {
                 p.chain_matmuls = false;
                 p.loop_groups = 1;
               }),
               {", true>;"}});
  check_graph({"tk_simt",
               transposed_key_chain(),
               0.25,
               2e-2,
               with([](PlanOptions& p) { p.tensor_cores = false; }),
               {"alias f16 of b1"}});
}
TEST(EmulationViews, LayoutOpsEverywhere) {
  check_graph({"views_all",
               layout_views(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"alias f16 of b0", ", true, false>;", "slice(b1): a copy", "alias f32 of b11"}});
  check_graph({"views_all_g",
               layout_views(),
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of"}});
  check_graph({"views_all_noreg", layout_views(), 0.5, 2e-2, with([](PlanOptions& p) {
                 p.register_accums = false;
                 p.loop_groups = 1;
               })});
}
TEST(EmulationViews, RotaryRotateHalf) {
  check_graph({"rotary", rotary_rotate_half(), 0.5, 2e-2, {}, {"alias f16 of b0"}});
}

// Running maxima and the rescaling accumulators through shared memory and per-thread
// registers (no matmul chain), on scores of ±80, where an unshifted exponential overflows f16.
TEST(EmulationOnlineSoftmax, StatisticsKernel) {
  const KernelGraph g = softmax_statistics();
  check_graph({"sm_stats",
               g,
               80.0,
               2e-2,
               {},
               {"rprev", "strata_rt::rescale_factor(", "running_max(", "acc = fmaxf(acc, v"}});
  check_graph({"sm_stats_shared",
               g,
               80.0,
               2e-2,
               with([](PlanOptions& p) { p.register_accums = false; }),
               {"into slot it % 2", "(it + 1) % 2"}});
  check_graph({"sm_stats_noinline", g, 80.0, 2e-2, with([](PlanOptions& p) {
                 p.inline_elementwise = false;
                 p.register_accums = false;
               })});
  check_graph({"sm_stats_rowwise",
               softmax_statistics(1, 4, 256),
               80.0,
               2e-2,
               {},
               {"rowwise: each thread"}});
  check_graph({"sm_stats_f1", softmax_statistics(1, 4, 256), 80.0, 2e-2,
               with([](PlanOptions& p) { p.rowwise = false; })});
}

// Kernel-level transposes and slices read in place by the customized kernels: no kernel of
// their own (a transpose read by a predefined op stays one), the tiles loaded as the device
// tensor holds them.
TEST(EmulationViews, KernelLevelViewsReadInPlace) {
  const KernelGraph g = kernel_level_views();
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  int transposes = 0, slices = 0;
  for (const EmittedKernel& k : src->kernels) {
    transposes += k.op == "transpose";
    slices += k.op == "slice";
  }
  EXPECT_EQ(transposes, 1);  // only Yc, read by relu
  EXPECT_EQ(slices, 0);
  check_graph({"kviews",
               g,
               0.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"(a view of [2, 256, 64], stored transposed)", ", false, true>;", ", true, false>;",
                "gin0 + (bx * 640 + 64 + ", "gin0 + (bx * 640 + 3 + "}});
  check_graph({"kviews_g", g, 0.5, 2e-2, with([](PlanOptions& p) { p.loop_groups = 2; })});
  check_graph({"kviews_simt", g, 0.5, 2e-2, with([](PlanOptions& p) {
                 p.tensor_cores = false;
                 p.rowwise = false;
               })});
}

// Slices that cut a customized kernel's result into consecutive parts at tile boundaries of
// its grid (a fused QKV projection's Q, K and V): the kernel saves each tile into its part
// (docs/codegen.md, "Routed outputs"), and the slices are no kernels. Where a boundary is not a
// multiple of the tile the slices stay copies. Tensor-core, SIMT and rowwise savers.
TEST(EmulationViews, RoutedOutputs) {
  auto kernels = [](const KernelGraph& g) {
    auto src = emit_cuda_source(g);
    EXPECT_TRUE(src.ok()) << src.error().message;
    std::vector<std::string> ops;
    if (src.ok())
      for (const EmittedKernel& k : src->kernels) ops.push_back(k.op);
    return ops;
  };
  const KernelGraph qkv = sliced_projection({0, 64, 80}, {64, 80, 96});
  EXPECT_EQ(kernels(qkv), std::vector<std::string>{"customized"});
  check_graph({"routed_tc", qkv, 0.5, 2e-2, {},
               {"gout0_0, __half* __restrict__ gout0_1, __half* __restrict__ gout0_2)",
                "if (bx < 4)", "if ((bx >= 4) && (bx < 5))", "if (bx >= 5)",
                "gout0_2 + (bx - 5) * 16"}});
  check_graph({"routed_simt", qkv, 0.5, 2e-2, with([](PlanOptions& p) {
                 p.tensor_cores = false;
                 p.rowwise = false;
               })});
  // Two parts of 32 and 64 columns in tiles of 32.
  check_graph({"routed_tc32", sliced_projection({0, 32}, {32, 96}, 32), 0.5, 2e-2, {},
               {"if (bx >= 1)"}});
  const KernelGraph rows = sliced_norm_rows({0, 2, 6}, {2, 6, 8});
  EXPECT_EQ(kernels(rows), std::vector<std::string>{"customized"});
  check_graph({"routed_rows", rows, 0.5, 2e-2, {}, {"rowwise", "gout0_1 + ((bx - 1) * 128"}});
  // A boundary inside a tile (72 in tiles of 16), or another reader of T: copies.
  const KernelGraph inside = sliced_projection({0, 72}, {72, 96});
  EXPECT_EQ(kernels(inside), (std::vector<std::string>{"customized", "slice", "slice"}));
  check_graph({"unrouted_inside", inside});
  const KernelGraph shared = sliced_projection({0, 64}, {64, 96}, 16, true);
  EXPECT_EQ(kernels(shared), (std::vector<std::string>{"customized", "slice", "slice", "relu"}));
  check_graph({"unrouted_shared", shared});
}

// The fused safe attention in a matmul chain: running row maxima per warp (quad shuffles),
// the O fragments and row sums rescaled when a max grows, E = exp(S − m) in registers as the
// A operand of P·V; with loop groups each group keeps its own maxima and the partials are
// combined with e^(m_g − M) before the division. Scores reach ±100 (inputs of ±9.5, scale
// 1/8): an unshifted exponential would overflow even f32.
TEST(EmulationOnlineSoftmax, FusedAttentionChain) {
  const double amp = 9.5;
  const KernelGraph g = online_attention(DType::f16, true, true, false, 2, 32);
  // Eight warps over 2 heads of 64 query rows.
  check_graph({"oa_8w", online_attention(), amp, 2e-2, {}, {"8 warps of 1 row tiles"}});
  check_graph({"oa",
               g,
               amp,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 1; }),
               {"FlashAttention style", "the online softmax", "strata_rt::mma_row_max<false",
                "strata_rt::mma_quad_reduce<true", "strata_rt::mma_scale_rows(racc",
                "strata_rt::op_exp(g0_", ", false, true>;"}});
  check_graph(
      {"oa_g2",
       g,
       amp,
       2e-2,
       with([](PlanOptions& p) { p.loop_groups = 2; }),
       {"2 groups of 128 threads", "the chain's running row maxima -> this loop group's copy",
        "mmax = fmaxf(mmax, "}});
  check_graph({"oa_g4_mt2",
               g,
               amp,
               2e-2,
               with([](PlanOptions& p) {
                 p.loop_groups = 4;
                 p.chain_row_tiles = 2;
               }),
               {"4 groups of 64 threads", "of 2 row tiles"}});
  check_graph({"oa_fused_g2",
               fuse_thread_graphs(g),
               amp,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"2 groups of", "the online softmax"}});
  check_graph({"oa_general",
               g,
               amp,
               2e-2,
               with([](PlanOptions& p) { p.chain_matmuls = false; }),
               {"running_max(b5) over dim 3", "rprev"}});
  check_graph({"oa_general_shared",
               g,
               amp,
               2e-2,
               with([](PlanOptions& p) {
                 p.chain_matmuls = false;
                 p.register_accums = false;
               }),
               {"into slot it % 2"}});
}
TEST(EmulationOnlineSoftmax, FusedAttentionVariants) {
  // K stored as [D, N] without a scale, in bf16; four KV heads of 16 query rows per block.
  check_graph({"oa_kdn_bf16",
               online_attention(DType::bf16, false, false, false, 4, 16),
               3.0,
               4e-2,
               {},
               {"the online softmax", "4 warps of 1 row tiles"}});
  check_graph({"oa_kdn_bf16_g2",
               online_attention(DType::bf16, false, false, false, 2, 32),
               3.0,
               4e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"the online softmax", "2 groups of"}});
  // A sum of E without rescaling depends on the maxima along the way: no loop groups, and the
  // chain's maxima are the exact running maxima of the rows.
  const KernelGraph extra = online_attention(DType::f16, true, true, true, 2, 32);
  check_graph({"oa_extra",
               extra,
               9.5,
               2e-2,
               with([](PlanOptions& p) { p.loop_groups = 2; }),
               {"the online softmax"}});
  EmulatedGraph emu(extra, with([](PlanOptions& p) { p.loop_groups = 2; }), "oa_extra_src");
  EXPECT_EQ(emu.source().find("loop groups"), std::string::npos);
}

// Graphs after rule-based thread fusion (thread_graph ops made by fuse_thread_graphs).
TEST(EmulationCoverage, ThreadFusedGraphs) {
  KernelGraph nt = fuse_thread_graphs(ntrans_graph(2, 256));
  KernelGraph am = fuse_thread_graphs(accumulators_and_maps());
  KernelGraph gm = fuse_thread_graphs(gatedmlp_graph(8, 256, 256));
  EXPECT_GT(count_thread_graphs(nt) + count_thread_graphs(am) + count_thread_graphs(gm), 2);
  check_graph({"fused_ntrans", nt});
  check_graph({"fused_accmaps", am});
  check_graph({"fused_gatedmlp", gm});
}

}  // namespace
}  // namespace strata::testing

namespace strata::testing {
namespace {

// Pointwise seeds (docs/search.md, "Pointwise seeds") as the code generator emits them:
// rotary with slices, a concat and a broadcast cos/sin; a residual add + RMSNorm with two
// outputs over more rows than blocks of other graphs have.
// Prologue folding (docs/search.md, "Prologue folding"): a norm and a gain kernel folded into
// the matmul kernel that reads their result, at one and two row blocks, emitted and run on the
// emulator against the float64 interpreter of the unfolded graph.
TEST(EmulationPrologueFold, NormAndGainInTheConsumer) {
  // (gain kernel blocks, consumer blocks): (2, 1) absorbs the gain kernel's row blocks, (4, 2)
  // computes its rows in the consumer's larger tiles.
  for (const auto& [gain_grid, grid] :
       {std::pair{1, 1}, std::pair{2, 2}, std::pair{2, 1}, std::pair{4, 2}}) {
    auto g = kernel_graph_from_json(Json::parse(testing::prologue_graph(gain_grid, grid)), "fold");
    ASSERT_TRUE(g.ok()) << g.error().message;
    const std::optional<KernelGraph> folded = search::fold_prologues(*g);
    ASSERT_TRUE(folded);
    check_graph(Case{"fold_" + std::to_string(gain_grid) + "_" + std::to_string(grid), *folded,
                     0.5, 2e-2, {}, {}},
                &*g);
  }
}

TEST(EmulationPointwiseSeed, RotaryAndResidualNorm) {
  const KernelGraph rope = parse(kRotaryProgram);
  const KernelGraph norm = parse(residual_norm_program(528, 24));  // 1, 2 and 4 rows per block
  for (const auto& [name, program] : {std::pair{"rope", &rope}, std::pair{"resid_norm", &norm}}) {
    const std::vector<KernelGraph> seeds = search::pointwise_seeds(*program, 132);  // a wave of 132 SMs
    ASSERT_FALSE(seeds.empty()) << name;
    for (size_t i = 0; i < seeds.size(); ++i)
      check_graph(Case{"seed_" + std::string(name) + "_" + std::to_string(i),
                       seeds[i],
                       0.5,
                       2e-2,
                       {},
                       {"rowwise: each thread"}},
                  program);
  }
}

// A seed whose rows are cut into column chunks (docs/search.md, "Pointwise seeds"): a second
// grid axis over the last dim, a gain chunked with it, a per-row scale replicated.
TEST(EmulationPointwiseSeed, ColumnChunks) {
  const KernelGraph swiglu = parse(kChunkedSwigluProgram);
  const std::vector<KernelGraph> seeds = search::pointwise_seeds(swiglu, 132);
  ASSERT_EQ(seeds.size(), 1u);
  check_graph(Case{"seed_chunks", seeds[0], 0.5, 2e-2, {}, {"grid (4, 3, 1)"}}, &swiglu);
}

// Rowwise kernels with broadcast and gathered tensors (docs/codegen.md, "Rowwise kernels"):
// rotary at odd head dims (chunks of 2 and of 1 element) in bf16 and f16, and nested concats
// of slices, a narrow input and elementwise ops of them, with a broadcast gain; each also on
// the shared-memory path.
TEST(EmulationRowwise, GatheredSlicesAndBroadcasts) {
  const std::string rope_bf16_18 = R"(
input Q: bf16[3, 16, 18]
input Cos: bf16[3, 1, 18]
input Sin: bf16[3, 1, 18]
Qr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, 9, 18), -1), slice(Q, -1, 0, 9), dim=-1), Sin))
output Qr
)";
  const std::string rope_f16_36 = R"(
input Q: f16[5, 16, 36]
input Cos: f16[5, 1, 36]
input Sin: f16[5, 1, 36]
Qr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, 18, 36), -1), slice(Q, -1, 0, 18), dim=-1), Sin))
output Qr
)";
  const std::string nested = R"(
input X: f16[5, 8, 32]
input A: f16[5, 8, 8]
input G: f16[32]
Y = concat(concat(mul(slice(X, -1, 24, 32), A), slice(X, -1, 0, 8), dim=-1), exp(slice(X, -1, 8, 24)), dim=-1)
O = mul(add(Y, X), G)
output O, Y
)";
  // Outputs of three shapes over one split extent: three parts of one kernel, with row
  // reductions (rows of 2 and 4 chunks) and a gathered rotation.
  const std::string parts = R"(
input Q: f16[3, 6, 16]
input K: f16[3, 2, 16]
input V: f16[3, 5, 16]
input G: f16[16]
Qn = mul(rms_norm(Q, eps=1e-06), G)
Kn = mul(rms_norm(K, eps=1e-06), G)
Vr = concat(slice(V, -1, 8, 16), mul_scalar(slice(V, -1, 0, 8), -1), dim=-1)
output Qn, Kn, Vr
)";
  // Rows of 64 chunks: reduced across warps, both parts in the scratch.
  const std::string parts_wide = R"(
input X: f16[3, 2, 512]
input Y: f16[3, 1, 512]
A = rms_norm(X, eps=1e-06)
B = mul(rms_norm(Y, eps=1e-06), exp(Y))
output A, B
)";
  for (const auto& [name, text] :
       {std::pair{"rope_bf16_18", rope_bf16_18}, std::pair{"rope_f16_36", rope_f16_36},
        std::pair{"nested", nested}, std::pair{"parts", parts},
        std::pair{"parts_wide", parts_wide}}) {
    const KernelGraph program = parse(text);
    for (int64_t rows : search::pointwise_seed_rows(program, 1)) {
      auto s = search::pointwise_seed(program, rows);
      ASSERT_TRUE(s.has_value()) << name;
      const std::string n = std::string(name) + "_r" + std::to_string(rows);
      check_graph(Case{"rw_" + n, *s, 0.5, 2e-2, {}, {"rowwise: each thread"}}, &program);
      check_graph(Case{"rw_off_" + n, *s, 0.5, 2e-2, with([](PlanOptions& p) { p.rowwise = false; })},
                  &program);
    }
  }
}

// Concats gathered from one load (docs/codegen.md, "Rowwise kernels"): rotate-half at odd
// head dims and an odd number of rows (chunks of 1 and 2 elements, idle chunks guarded, one
// and several chunks per thread), a permutation of slices without ops, slices through exp and
// three nested parts; and what must keep one guarded gather per operand: a concat of two
// inputs, a slice times another input. Each against float64 on the emulator, nothing zero-filled.
TEST(EmulationRowwise, ConcatsFromOneLoadAndPerOperand) {
  const std::string rope_odd = R"(
input Q: bf16[3, 7, 18]
input K: bf16[3, 3, 18]
input Cos: bf16[3, 1, 18]
input Sin: bf16[3, 1, 18]
Qr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, 9, 18), -1), slice(Q, -1, 0, 9), dim=-1), Sin))
Kr = add(mul(K, Cos), mul(concat(mul_scalar(slice(K, -1, 9, 18), -1), slice(K, -1, 0, 9), dim=-1), Sin))
output Qr, Kr
)";
  const std::string rope_f16_20 = R"(
input Q: f16[5, 5, 20]
input Cos: f16[5, 1, 20]
input Sin: f16[5, 1, 20]
Qr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, 10, 20), -1), slice(Q, -1, 0, 10), dim=-1), Sin))
output Qr
)";
  const std::string permute = R"(
input X: f16[3, 5, 24]
Y = mul(concat(concat(slice(X, -1, 16, 24), slice(X, -1, 0, 8), dim=-1), slice(X, -1, 8, 16), dim=-1), X)
output Y
)";
  const std::string unary = R"(
input X: f16[3, 5, 24]
Y = concat(concat(exp(slice(X, -1, 16, 24)), slice(X, -1, 8, 16), dim=-1), mul_scalar(sigmoid(slice(X, -1, 0, 8)), 3), dim=-1)
output Y
)";
  const std::string two_inputs = R"(
input A: f16[3, 5, 24]
input B: f16[3, 5, 24]
Y = add(concat(slice(A, -1, 0, 12), slice(B, -1, 12, 24), dim=-1), B)
output Y
)";
  const std::string times_input = R"(
input A: f16[3, 5, 24]
input S: f16[3, 5, 12]
Y = concat(mul(slice(A, -1, 12, 24), S), slice(A, -1, 0, 12), dim=-1)
output Y
)";
  const std::string one = "from one load of", per_operand = "if (col < ";
  // With 32 threads, several chunks per thread: rope_odd's 320 chunks of 1 element (Q's 7
  // rows and K's 3 of 32 lanes each) are 10 per thread.
  for (const auto& [name, text, path, t32] :
       {std::tuple{"rope_odd", rope_odd, one, "(k < 10)"},
        std::tuple{"rope_f16_20", rope_f16_20, one, ""}, std::tuple{"permute", permute, one, ""},
        std::tuple{"unary", unary, one, ""}, std::tuple{"two_inputs", two_inputs, per_operand, ""},
        std::tuple{"times_input", times_input, per_operand, ""}}) {
    const KernelGraph program = parse(text);
    for (int64_t rows : search::pointwise_seed_rows(program, 1)) {
      auto s = search::pointwise_seed(program, rows);
      ASSERT_TRUE(s.has_value()) << name;
      const std::string n = std::string(name) + "_r" + std::to_string(rows);
      check_graph(Case{"one_" + n, *s, 0.5, 2e-2, {}, {"chunk by chunk", path}}, &program);
      check_graph(Case{"one_t32_" + n, *s, 0.5, 2e-2, with([](PlanOptions& p) { p.threads = 32; }),
                       {"chunk by chunk", path, t32}},
                  &program);
      auto src = emit_cuda_source(*s);
      ASSERT_TRUE(src.ok()) << src.error().message;
      EXPECT_EQ(src->code.find("= {};"), std::string::npos) << n << ": a zero-filled array";
    }
  }
}

// Library forms (docs/search.md, "Library forms") as the code generator emits them: fused
// elementwise kernels around cuBLAS calls (the emulator's gemm), each form's row counts, odd
// token counts and K = 37, the column blocks of the QKV weight and a transposed weight read in
// place by the gemm (views: no copy kernel).
TEST(EmulationLibraryForm, FusedRegionsAroundLibraryMatmuls) {
  const std::pair<std::string, std::string> programs[] = {
      {"norm_qkv", norm_qkv_program(67, 37, 24, 8)},
      {"layernorm_ffn", layernorm_ffn_program(66, 37, 45)},
      {"gated_mlp", gated_mlp_program(33, 37, 24)},
      {"norm_wt", R"(input X: f16[18, 37]
input G: f16[37]
input Wt: f16[20, 37]
input R: f16[18, 20]
Y = mul(rms_norm(X, eps=1e-05), G)
O = add(silu(matmul(Y, transpose(Wt))), R)
output O
)"},
  };
  for (const auto& [name, text] : programs) {
    const KernelGraph program = parse(text);
    const search::LibraryForms lf = search::library_forms(program, 8);  // a wave of 8 blocks
    ASSERT_FALSE(lf.forms.empty()) << name;
    for (size_t i = 0; i < lf.forms.size(); ++i) {
      Case c{"form_" + name + "_" + std::to_string(i), lf.forms[i].graph};
      // LayerNorm + FFN's bias and gelu are the call's epilogue (docs/codegen.md, "Library
      // epilogues"): cuBLASLt's gemm_epilogue; the others plain calls.
      c.expect = {name == "layernorm_ffn" ? "gemm_epilogue(" : "gemm_strided_batched("};
      // norm_qkv's forms: the slices pushed into W (read in place), or the product kept whole
      // with Q, K and V packed outputs (docs/codegen.md, "Packed outputs"), whose slices are
      // only the fallback's copies.
      const bool packed = name == "norm_qkv" && lf.forms[i].pushed_slices == 0;
      if (name == "norm_qkv") c.expect.push_back(packed ? "const bool packed" : "read in place in W");
      if (name == "norm_wt") c.expect.push_back("gemm_strided_batched(true, false, 20, 18, 37,");
      check_graph(c, &program);
      auto src = emit_cuda_source(lf.forms[i].graph);
      ASSERT_TRUE(src.ok()) << src.error().message;
      for (const EmittedKernel& k : src->kernels)
        EXPECT_TRUE(k.library || k.op == "customized" || (packed && k.op == "slice"))
            << name << ": a " << k.op << " kernel";
    }
  }
}

}  // namespace
}  // namespace strata::testing
