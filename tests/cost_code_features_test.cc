// Tests of the kernels' code features (strata/cost/code_features.h) that `strata cost --json`
// reports for the calibration: counted by hand for the RMSNorm + MatMul reference kernel, equal
// to the plan the CUDA emitter writes, absent for kernels without a plan.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "search/pointwise_seed.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/cost/code_features.h"
#include "strata/cost/cost_json.h"
#include "strata/cost/cost_model.h"
#include "support/parse.h"

namespace strata {
namespace {

constexpr int64_t kM = 16, kK = 4096, kN = 6144;

/// The reference block graph of docs/mugraph-semantics.md §6 (X [16, 4096] normalized, times
/// W [4096, 6144]): grid 96, for-loop 64, X imap φ fmap 1 (tile [16, 64]), W imap x→1 fmap 0
/// (tile [64, 64]); in the loop matmul, accum and accum_rms_ld, after it div.
KernelGraph rmsnorm_fused() {
  BlockGraph b = *BlockGraph::make({static_cast<int>(kN / 64), 1, 1}, 128, kK / 64);
  int bx = *b.add_input(Shape{kM, kK}, kAllReplicated, 1);
  int bw = *b.add_input(Shape{kK, kN}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {bx, bw});
  int am = *b.add_op(OpKind::AccumSum, {mm});
  int ax = *b.add_op(OpKind::AccumRmsLd, {bx});
  int o = *b.add_op(OpKind::Div, {am, ax});
  EXPECT_TRUE(b.add_output(o, {1, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, kN}, DType::f16);
  auto outs = g.add_customized({x, w}, b, {"O"});
  EXPECT_TRUE(outs.ok()) << outs.error().message;
  EXPECT_TRUE(g.mark_output((*outs)[0]).ok());
  return g;
}

Target h100() {
  return *Target::by_name("h100");
}

CostOptions with_code(bool library_matmul = true) {
  CostOptions o;
  o.code_features = true;
  o.library_matmul = library_matmul;
  return o;
}

TEST(CodeFeatures, ReferenceKernelCountedByHand) {
  KernelGraph g = rmsnorm_fused();
  GraphCost c = estimate_cost(g, h100(), with_code());
  ASSERT_EQ(c.kernels.size(), 1u);
  ASSERT_TRUE(c.kernels[0].code.has_value());
  const KernelCodeFeatures& f = *c.kernels[0].code;
  EXPECT_EQ(f.loop_ops, 3);  // matmul, accum, accum_rms_ld
  EXPECT_EQ(f.once_ops, 1);  // div
  // accum_rms_ld reduces each row of the [16, 64] X tile: a tree of depth log2 64 = 6 per
  // iteration; accum sums across iterations and reduces nothing; nothing reduces after the loop.
  EXPECT_EQ(f.loop_reduce_steps, 6);
  EXPECT_EQ(f.once_reduce_steps, 0);
  EXPECT_GT(f.threads, 0);
  EXPECT_GE(f.loop_groups, 1);
  // Its matmul ([16, 64] × [64, 64] f16) runs on the tensor cores: no SIMT chain.
  EXPECT_EQ(f.loop_simt_mm_steps, 0);
  EXPECT_EQ(f.once_simt_mm_steps, 0);
  // The prediction does not depend on the features.
  EXPECT_DOUBLE_EQ(c.predicted_us, estimate_cost(g, h100()).predicted_us);
}

TEST(CodeFeatures, EqualTheEmittedPlan) {
  KernelGraph g = rmsnorm_fused();
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  ASSERT_EQ(src->kernels.size(), 1u);
  const EmittedKernel& ek = src->kernels[0];
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      ek.plan, m, std::regex(R"(barriers: (\d+) prologue, (\d+) per iteration, (\d+) post)")))
      << ek.plan;
  GraphCost c = estimate_cost(g, h100(), with_code());
  ASSERT_TRUE(c.kernels[0].code.has_value());
  const KernelCodeFeatures& f = *c.kernels[0].code;
  EXPECT_EQ(f.threads, ek.threads);
  EXPECT_EQ(f.smem_bytes, ek.smem_bytes);
  EXPECT_EQ(f.loop_groups, ek.loop_groups);
  // No block-wide reduction here (a row of 64 is reduced by a team of lanes): the barriers are
  // the plan's.
  EXPECT_EQ(f.loop_barriers, std::stoi(m[2]));
  EXPECT_EQ(f.once_barriers, std::stoi(m[1]) + std::stoi(m[3]));
}

// MCFuser's G1 reassociated, A·(B·C) with one output column per block (a form the search finds):
// B·C's tile product [64, 128] × [128, 1] is too narrow for an mma tile and A·(accumulated B·C)
// takes an f32 accumulator, so both run on the SIMT path, each output a serial chain over K.
TEST(CodeFeatures, SimtMatmulChainsCountedByHand) {
  BlockGraph b = *BlockGraph::make({64, 1, 1}, 128, 2);
  int ba = *b.add_input(Shape{1, 512, 64}, kAllReplicated, kReplicate);
  int bb = *b.add_input(Shape{1, 64, 256}, kAllReplicated, 2);
  int bc = *b.add_input(Shape{1, 256, 64}, {2, kReplicate, kReplicate}, 1);
  int mm = *b.add_op(OpKind::Matmul, {bb, bc});
  int acc = *b.add_op(OpKind::AccumSum, {mm});
  int o = *b.add_op(OpKind::Matmul, {ba, acc});
  ASSERT_TRUE(b.add_output(o, {2, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int a = *g.add_input("A", Shape{1, 512, 64}, DType::f16);
  int bt = *g.add_input("B", Shape{1, 64, 256}, DType::f16);
  int c = *g.add_input("C", Shape{1, 256, 64}, DType::f16);
  auto outs = g.add_customized({a, bt, c}, b, {"O"});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  ASSERT_TRUE(g.mark_output((*outs)[0]).ok());
  GraphCost cost = estimate_cost(g, h100(), with_code());
  ASSERT_EQ(cost.kernels.size(), 1u);
  ASSERT_TRUE(cost.kernels[0].code.has_value());
  const KernelCodeFeatures& f = *cost.kernels[0].code;
  const int64_t threads = f.threads;
  const int64_t team = f.loop_groups > 1 ? threads / f.loop_groups : threads;
  ASSERT_GT(team, 0);
  // In the loop (on a group's team): 64 outputs of K = 128 each; after it (on the block): 512
  // outputs of K = 64.
  EXPECT_EQ(f.loop_simt_mm_steps, (64 + team - 1) / team * 128);
  EXPECT_EQ(f.once_simt_mm_steps, (512 + threads - 1) / threads * 64);
  Json j = graph_cost_to_json(cost, h100());
  EXPECT_EQ(j["kernels"][0]["once_simt_mm_steps"], f.once_simt_mm_steps);
  // The prediction charges the chains, waves · (F · loop + once) · t_simt, whether or not the
  // features were asked for; the tensor-core reference kernel has none.
  const KernelCost& k = cost.kernels[0];
  const Target t = h100();
  EXPECT_GT(t.simt_mm_step_s, 0);
  EXPECT_DOUBLE_EQ(k.t_simt_s, static_cast<double>(k.waves) *
                                   (2.0 * static_cast<double>(f.loop_simt_mm_steps) +
                                    static_cast<double>(f.once_simt_mm_steps)) *
                                   t.simt_mm_step_s);
  const GraphCost plain = estimate_cost(g, t);
  EXPECT_DOUBLE_EQ(plain.kernels[0].t_simt_s, k.t_simt_s);
  EXPECT_DOUBLE_EQ(plain.predicted_us, cost.predicted_us);
  EXPECT_EQ(estimate_cost(rmsnorm_fused(), t).kernels[0].t_simt_s, 0.0);
}

/// X [16, 4096] · W [4096, 128] in two blocks of 64 columns, looping over K in 256 steps of 16:
/// few blocks, a long loop, little data — a kernel whose loop latency bounds it.
KernelGraph two_block_long_loop(int64_t forloop = 256) {
  BlockGraph b = *BlockGraph::make({2, 1, 1}, 128, forloop);
  int bx = *b.add_input(Shape{kM, kK}, kAllReplicated, 1);
  int bw = *b.add_input(Shape{kK, 128}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {bx, bw});
  int am = *b.add_op(OpKind::AccumSum, {mm});
  EXPECT_TRUE(b.add_output(am, {1, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, 128}, DType::f16);
  auto outs = g.add_customized({x, w}, b, {"O"});
  EXPECT_TRUE(outs.ok()) << outs.error().message;
  EXPECT_TRUE(g.mark_output((*outs)[0]).ok());
  return g;
}

// The latency bound (docs/cost-model.md, "Latency bound …"): (waves · ⌈F / G⌉ − 1) · loop
// barriers · t_barrier + waves · bytes per thread · t_tbyte, from the plan's features, and the
// prediction the larger of it and the throughput bound. The paper's fused RMSNorm streams 50 MB
// in 96 blocks: its throughput bound is the larger; two blocks looping 512 times over 1 MB are
// latency bound; in 32 iterations they wait on the barriers of the 31 after the first, whose loads
// are the prologue's.
// With both constants at 0 no bound is charged.
// A loop whose exp of each [64, 64] X tile has two readers (a sum of it and a row sum), so it is
// stored and passed over on its own (not inlined): 4096 elements per iteration; the reference
// kernel has no such pass (its ops are a matmul, accumulators and a div computed where saved).
TEST(CodeFeatures, PassesOutsideTheMatmulsCountedByHand) {
  BlockGraph b = *BlockGraph::make({4, 1, 1}, 128, 4);
  int bx = *b.add_input(Shape{256, 256}, {0, kReplicate, kReplicate}, 1);
  int e = *b.add_op(OpKind::Exp, {bx});
  int a = *b.add_op(OpKind::AccumSum, {e});
  int r = *b.add_op(OpKind::AccumSumLd, {e});
  ASSERT_TRUE(b.add_output(a, {0, kReplicate, kReplicate}).ok());
  ASSERT_TRUE(b.add_output(r, {0, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int x = *g.add_input("X", Shape{256, 256}, DType::f16);
  auto outs = g.add_customized({x}, b, {"S", "R"});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  ASSERT_TRUE(g.mark_output((*outs)[0]).ok());
  ASSERT_TRUE(g.mark_output((*outs)[1]).ok());
  GraphCost c = estimate_cost(g, h100(), with_code());
  ASSERT_EQ(c.kernels.size(), 1u);
  ASSERT_TRUE(c.kernels[0].code.has_value());
  const KernelCodeFeatures& f = *c.kernels[0].code;
  ASSERT_GT(f.threads, 0);
  const int64_t team = f.loop_groups > 1 ? f.threads / f.loop_groups : f.threads;
  EXPECT_EQ(f.loop_pass_steps, (4096 + team - 1) / team);
  EXPECT_EQ(f.once_pass_steps, 0);
  const KernelCost& k = c.kernels[0];
  const Target t = h100();
  EXPECT_GT(t.pass_step_s, 0);
  // Loop groups pass over their own iterations side by side: ⌈4 / G⌉ of them in a row.
  const double rounds = static_cast<double>((4 + f.loop_groups - 1) / f.loop_groups);
  EXPECT_DOUBLE_EQ(k.t_pass_s, static_cast<double>(k.waves) * rounds *
                                   static_cast<double>(f.loop_pass_steps) * t.pass_step_s);
  Json j = graph_cost_to_json(c, t);
  EXPECT_EQ(j["kernels"][0]["loop_pass_steps"], f.loop_pass_steps);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["t_pass_us"].get<double>(), k.t_pass_s * 1e6);
  const GraphCost ref = estimate_cost(rmsnorm_fused(), t, with_code());
  EXPECT_EQ(ref.kernels[0].code->loop_pass_steps, 0);
  EXPECT_EQ(ref.kernels[0].t_pass_s, 0.0);
}

TEST(CodeFeatures, LatencyBoundFromBarriersAndBytesPerThread) {
  const Target t = h100();
  for (const KernelGraph& g : {rmsnorm_fused(), two_block_long_loop()}) {
    const GraphCost cost = estimate_cost(g, t, with_code());
    ASSERT_EQ(cost.kernels.size(), 1u);
    const KernelCost& k = cost.kernels[0];
    ASSERT_TRUE(k.code.has_value());
    const double waves = static_cast<double>(k.waves);
    // Loop groups run their iterations side by side: ⌈F / G⌉ one after another in each wave;
    // the first iteration of all waits on the prologue, which the launch term charges.
    const int64_t groups = std::max(1, k.code->loop_groups);
    const int64_t rounds = (k.forloop + groups - 1) / groups;
    const double dependent = std::max(0.0, waves * static_cast<double>(rounds) - 1.0);
    const double latency =
        dependent * (static_cast<double>(k.code->loop_barriers) * t.barrier_latency_s +
                     t.iteration_chain_s / static_cast<double>(k.blocks_per_sm)) +
        waves * static_cast<double>(k.load_bytes + k.l2_bytes) /
            static_cast<double>(k.blocks * k.code->threads) * t.thread_byte_latency_s;
    EXPECT_DOUBLE_EQ(k.t_latency_s, latency);
    EXPECT_DOUBLE_EQ(k.predicted_s,
                     std::max(k.t_throughput_s, k.t_latency_s) + t.launch_overhead_s);
    // The same without the features asked for: every customized kernel is planned.
    EXPECT_DOUBLE_EQ(estimate_cost(g, t).kernels[0].t_latency_s, latency);
  }
  const KernelCost fused = estimate_cost(rmsnorm_fused(), t).kernels[0];
  EXPECT_GT(fused.t_throughput_s, fused.t_latency_s);
  const KernelCost looped = estimate_cost(two_block_long_loop(512), t).kernels[0];
  ASSERT_TRUE(estimate_cost(two_block_long_loop(512), t, with_code()).kernels[0].code.has_value());
  const int groups = std::max(
      1, estimate_cost(two_block_long_loop(512), t, with_code()).kernels[0].code->loop_groups);
  EXPECT_GT(looped.t_latency_s, looped.t_throughput_s);
  EXPECT_GE(looped.t_latency_s, ((512 + groups - 1) / groups - 1) * t.barrier_latency_s);
  Json j = graph_cost_to_json(estimate_cost(two_block_long_loop(512), t), t);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["t_latency_us"].get<double>(), looped.t_latency_s * 1e6);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["t_throughput_us"].get<double>(), looped.t_throughput_s * 1e6);
  // 32 iterations in one wave: the first waits on the prologue's loads (charged by the launch
  // term), so 31 iterations' barriers remain, beside the bytes per thread.
  const KernelCost short_loop = estimate_cost(two_block_long_loop(32), t, with_code()).kernels[0];
  ASSERT_TRUE(short_loop.code.has_value());
  ASSERT_EQ(short_loop.forloop, 32);
  ASSERT_EQ(short_loop.waves, 1);
  ASSERT_GT(short_loop.code->loop_barriers, 0);
  const int64_t short_rounds = (32 + std::max(1, short_loop.code->loop_groups) - 1) /
                               std::max(1, short_loop.code->loop_groups);
  EXPECT_DOUBLE_EQ(short_loop.t_latency_s,
                   static_cast<double>((short_rounds - 1) * short_loop.code->loop_barriers) *
                           t.barrier_latency_s +
                       static_cast<double>(short_rounds - 1) * t.iteration_chain_s /
                           static_cast<double>(short_loop.blocks_per_sm) +
                       static_cast<double>(short_loop.load_bytes + short_loop.l2_bytes) /
                           static_cast<double>(short_loop.blocks * short_loop.code->threads) *
                           t.thread_byte_latency_s);
  Target off = t;
  off.barrier_latency_s = 0;
  off.thread_byte_latency_s = 0;
  off.register_byte_latency_s = 0;
  off.iteration_chain_s = 0;
  const KernelCost none = estimate_cost(two_block_long_loop(), off).kernels[0];
  EXPECT_EQ(none.t_latency_s, 0);
  EXPECT_DOUBLE_EQ(none.predicted_s, none.t_throughput_s + off.launch_overhead_s);
}

// The barriers a kernel's blocks pass after their first iteration, spread over the SMs, are
// part of the throughput bound (docs/cost-model.md, "Barriers in the throughput bound"):
// N_blocks · (⌈F / G⌉ − 1) · loop barriers / N_SM · t_sync, outside the last wave's tail.
TEST(CodeFeatures, BarriersAfterTheFirstIterationInTheThroughputBound) {
  const Target t = h100();
  ASSERT_GT(t.barrier_sync_s, 0);
  for (const KernelGraph& g : {rmsnorm_fused(), two_block_long_loop(), two_block_long_loop(32)}) {
    const KernelCost k = estimate_cost(g, t, with_code()).kernels[0];
    ASSERT_TRUE(k.code.has_value());
    ASSERT_GT(k.code->loop_barriers, 0);
    const int64_t groups = std::max(1, k.code->loop_groups);
    const int64_t rounds = (k.forloop + groups - 1) / groups;
    ASSERT_GT(rounds, 1);
    const double sync = static_cast<double>(k.blocks * (rounds - 1) * k.code->loop_barriers) /
                        static_cast<double>(t.sm_count) * t.barrier_sync_s;
    EXPECT_GT(k.t_sync_s, 0);
    EXPECT_DOUBLE_EQ(k.t_sync_s, sync);
    // Without the term the throughput bound is that much shorter; nothing else changes.
    Target off = t;
    off.barrier_sync_s = 0;
    const KernelCost none = estimate_cost(g, off, with_code()).kernels[0];
    EXPECT_EQ(none.t_sync_s, 0);
    EXPECT_DOUBLE_EQ(k.t_throughput_s, none.t_throughput_s + sync);
    EXPECT_DOUBLE_EQ(k.t_latency_s, none.t_latency_s);
    EXPECT_DOUBLE_EQ(k.predicted_s,
                     std::max(k.t_throughput_s, k.t_latency_s) + t.launch_overhead_s);
    // The same without the features asked for: the kernel is planned for its barriers.
    EXPECT_DOUBLE_EQ(estimate_cost(g, t).kernels[0].t_sync_s, sync);
    EXPECT_DOUBLE_EQ(graph_cost_to_json(estimate_cost(g, t), t)["kernels"][0]["t_sync_us"]
                         .get<double>(),
                     sync * 1e6);
  }
  // A kernel without a plan (a generic elementwise kernel, a cuBLAS call) has no barriers to
  // charge; a matmul lowered to a block graph loops over k and has.
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, kN}, DType::f16);
  int y = *g.add_op(OpKind::Exp, {x}, {}, "Y");
  ASSERT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {y, w}, {}, "O")).ok());
  const GraphCost lib = estimate_cost(g, t, with_code());
  ASSERT_EQ(lib.kernels.size(), 2u);
  ASSERT_FALSE(lib.kernels[0].code.has_value());
  ASSERT_TRUE(lib.kernels[1].library);
  EXPECT_EQ(lib.kernels[0].t_sync_s, 0);
  EXPECT_EQ(lib.kernels[1].t_sync_s, 0);
  const GraphCost gen = estimate_cost(g, t, with_code(false));
  ASSERT_TRUE(gen.kernels[1].code.has_value());
  EXPECT_GT(gen.kernels[1].t_sync_s, 0);
}

// Every dependent iteration after the first waits on its chain (tiles, matmuls, reductions,
// barriers); the blocks an SM holds overlap their chains, so the latency bound charges t_chain
// per iteration divided by them (docs/cost-model.md, "The iteration chain of few-block
// kernels"). The throughput bound does not change.
/// X [16, 4096] · W [4096, 4224] in 264 blocks of 16 columns, 64 steps of 64 over K: small
/// tiles, several blocks per SM.
KernelGraph many_small_blocks() {
  BlockGraph b = *BlockGraph::make({264, 1, 1}, 128, 64);
  int bx = *b.add_input(Shape{kM, kK}, kAllReplicated, 1);
  int bw = *b.add_input(Shape{kK, 264 * 16}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {bx, bw});
  int am = *b.add_op(OpKind::AccumSum, {mm});
  EXPECT_TRUE(b.add_output(am, {1, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, 264 * 16}, DType::f16);
  auto outs = g.add_customized({x, w}, b, {"O"});
  EXPECT_TRUE(outs.ok()) << outs.error().message;
  EXPECT_TRUE(g.mark_output((*outs)[0]).ok());
  return g;
}

TEST(CodeFeatures, TheIterationChainIsSharedByTheBlocksOfAnSM) {
  const Target t = h100();
  ASSERT_GT(t.iteration_chain_s, 0);
  Target off = t;
  off.iteration_chain_s = 0;
  // Two blocks alone on their SMs and 264 blocks of small tiles, several per SM.
  bool shared = false;
  for (const KernelGraph& g :
       {two_block_long_loop(32), two_block_long_loop(512), many_small_blocks()}) {
    const KernelCost k = estimate_cost(g, t, with_code()).kernels[0];
    const KernelCost none = estimate_cost(g, off, with_code()).kernels[0];
    ASSERT_TRUE(k.code.has_value());
    const int64_t groups = std::max(1, k.code->loop_groups);
    const double dependent = std::max(
        0.0, static_cast<double>(k.waves * ((k.forloop + groups - 1) / groups)) - 1.0);
    ASSERT_GT(dependent, 0);
    ASSERT_GE(k.blocks_per_sm, 1);
    shared = shared || k.blocks_per_sm > 1;
    EXPECT_DOUBLE_EQ(k.t_latency_s - none.t_latency_s,
                     dependent * t.iteration_chain_s / static_cast<double>(k.blocks_per_sm));
    EXPECT_GT(k.t_latency_s, none.t_latency_s);
    EXPECT_DOUBLE_EQ(k.t_throughput_s, none.t_throughput_s);
  }
  EXPECT_TRUE(shared);
}

// A rowwise kernel loads into registers (docs/cost-model.md, "Loads into registers"): its
// bytes per thread are charged at t_rbyte, not t_tbyte; a kernel with cp.async tiles keeps
// t_tbyte.
TEST(CodeFeatures, RowwiseKernelsChargeTheirBytesAtTheRegisterRate) {
  const Target t = h100();
  ASSERT_GT(t.register_byte_latency_s, t.thread_byte_latency_s);
  auto seed = search::pointwise_seed(testing::parse(R"(
input X: f16[4096, 2048]
input G: f16[2048]
Y = mul(rms_norm(X, eps=1e-06), G)
output Y
)"),
                                     4);
  ASSERT_TRUE(seed.has_value());
  const GraphCost cost = estimate_cost(*seed, t, with_code());
  ASSERT_EQ(cost.kernels.size(), 1u);
  const KernelCost& k = cost.kernels[0];
  ASSERT_TRUE(k.code.has_value());
  EXPECT_TRUE(k.code->register_loads);
  const double waves = static_cast<double>(k.waves);
  const double latency = std::max(0.0, waves * static_cast<double>(k.forloop) - 1.0) *
                             (static_cast<double>(k.code->loop_barriers) * t.barrier_latency_s +
                              t.iteration_chain_s / static_cast<double>(k.blocks_per_sm)) +
                         waves * static_cast<double>(k.load_bytes + k.l2_bytes) /
                             static_cast<double>(k.blocks * k.code->threads) *
                             t.register_byte_latency_s;
  EXPECT_DOUBLE_EQ(k.t_latency_s, latency);
  EXPECT_EQ(graph_cost_to_json(cost, t)["kernels"][0]["register_loads"], true);
  const KernelCost tiled = estimate_cost(two_block_long_loop(), t, with_code()).kernels[0];
  ASSERT_TRUE(tiled.code.has_value());
  EXPECT_FALSE(tiled.code->register_loads);
}

// A launch of several waves runs its last wave partly empty: the throughput bound is scaled by
// the slots of all its waves over its blocks (docs/cost-model.md, "Formula").
TEST(CodeFeatures, TheLastWavesTailScalesTheThroughputBound) {
  const Target t = h100();
  const GraphCost c = estimate_cost(rmsnorm_fused(), t);
  const KernelCost& k = c.kernels[0];
  // Blocks per SM follow the planned kernel: its threads and its shared memory (the plan's
  // pipeline stages, here deeper than the two stages the sum of the block graph's tiles counts).
  const KernelCodeFeatures f = *estimate_cost(rmsnorm_fused(), t, with_code()).kernels[0].code;
  ASSERT_GT(f.smem_bytes, 0);
  EXPECT_NE(f.smem_bytes, k.smem_bytes);
  EXPECT_EQ(k.blocks_per_sm, std::min<int64_t>({(t.smem_per_block_bytes + 1024) / f.smem_bytes,
                                                2048 / f.threads, 32}));
  EXPECT_EQ(k.waves, 1);  // 96 blocks on 132 SMs: one wave, no tail
  EXPECT_DOUBLE_EQ(k.t_throughput_s, k.t_mem_s * k.alpha + k.t_comp_s * k.underfill +
                                         static_cast<double>(k.forloop) * t.iteration_latency_s +
                                         k.t_simt_s + k.t_sync_s);
  // The same kernel on a target of 5 SMs: 96 blocks need several waves; the busiest SM runs
  // ⌈96 / 5⌉ = 20 blocks against 19.2 on average.
  Target small = t;
  small.sm_count = 5;
  const KernelCost s = estimate_cost(rmsnorm_fused(), small).kernels[0];
  ASSERT_GT(s.waves, 1);
  const double tail = 20.0 * 5 / 96.0;
  EXPECT_DOUBLE_EQ(s.t_throughput_s,
                   (s.t_mem_s * s.alpha + s.t_comp_s * s.underfill +
                    static_cast<double>(s.forloop) * small.iteration_latency_s + s.t_simt_s) *
                           std::max(1.0, tail) +
                       s.t_sync_s);
  EXPECT_EQ(graph_cost_to_json(c, t)["kernels"][0]["blocks_per_sm"], k.blocks_per_sm);
}

TEST(CodeFeatures, OnlyPlannedKernelsAndOnlyWhenAsked) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, kN}, DType::f16);
  int y = *g.add_op(OpKind::Exp, {x}, {}, "Y");
  int o = *g.add_op(OpKind::Matmul, {y, w}, {}, "O");
  ASSERT_TRUE(g.mark_output(o).ok());
  // Not kept by default (the prediction plans customized kernels but keeps only its terms).
  for (const KernelCost& k : estimate_cost(g, h100()).kernels) EXPECT_FALSE(k.code.has_value());
  // A generic elementwise kernel and a cuBLAS call have no plan.
  GraphCost lib = estimate_cost(g, h100(), with_code());
  ASSERT_EQ(lib.kernels.size(), 2u);
  EXPECT_FALSE(lib.kernels[0].code.has_value());
  EXPECT_TRUE(lib.kernels[1].library);
  EXPECT_FALSE(lib.kernels[1].code.has_value());
  // The matmul as a generated kernel is the tiled block graph: a for-loop over k of the
  // product and its accumulator.
  GraphCost gen = estimate_cost(g, h100(), with_code(false));
  ASSERT_TRUE(gen.kernels[1].code.has_value());
  EXPECT_EQ(gen.kernels[1].code->loop_ops, 2);
  EXPECT_EQ(gen.kernels[1].code->loop_reduce_steps, 0);
  // The JSON view carries the features only where they exist.
  Json j = graph_cost_to_json(gen, h100());
  EXPECT_FALSE(j["kernels"][0].contains("loop_barriers"));
  EXPECT_EQ(j["kernels"][1]["loop_ops"], 2);
  EXPECT_EQ(j["kernels"][1]["threads"], gen.kernels[1].code->threads);
}

}  // namespace

}  // namespace strata
