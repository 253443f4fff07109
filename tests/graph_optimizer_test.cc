// Tests of the graph optimizer passes: scheduling by depth (levels, phases, barrier counts),
// matmul fusions, layouts, pipeline depth and the shared-memory plan (reuse, no overlap of live
// tiles, alignment, limits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "strata/opt/emission_plan.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/opt/layout.h"
#include "strata/opt/memory_plan.h"
#include "strata/opt/output_routes.h"
#include "strata/opt/plan_invariants.h"
#include "strata/opt/rowwise.h"
#include "strata/opt/schedule.h"
#include "support/op_coverage_graphs.h"
#include "support/kernel_plans.h"
#include "support/routed_graphs.h"

namespace strata::testing {
namespace {

/// Every invariant of the shared-memory plan.
void expect_valid_memory_plan(const KernelPlan& p) {
  const BlockGraph& g = *p.graph;
  const int n = static_cast<int>(g.tensors().size());
  EXPECT_LE(p.smem_bytes, p.options.smem_limit);
  EXPECT_EQ(p.smem_bytes % kSmemAlign, 0);
  for (int a = 0; a < n; ++a) {
    const TensorPlan& ta = p.tensors[a];
    bool stored = ta.home == TensorHome::Shared || ta.home == TensorHome::Registers;
    if (!stored) continue;
    EXPECT_GE(ta.offset, 0) << g.tensor_name(a);
    EXPECT_EQ(ta.offset % kSmemAlign, 0) << g.tensor_name(a);
    EXPECT_LE(ta.offset + ta.bytes, p.smem_bytes) << g.tensor_name(a);
    EXPECT_GE(ta.bytes, g.tensor(a).shape.numel() * dtype_size(ta.dtype) * ta.stages);
    EXPECT_EQ((ta.layout.stage_elems * dtype_size(ta.dtype)) % kSmemAlign, 0);
    for (int b = a + 1; b < n; ++b) {
      const TensorPlan& tb = p.tensors[b];
      if (tb.home != TensorHome::Shared && tb.home != TensorHome::Registers) continue;
      bool live_together = ta.live_begin <= tb.live_end && tb.live_begin <= ta.live_end;
      bool disjoint = ta.offset + ta.bytes <= tb.offset || tb.offset + tb.bytes <= ta.offset;
      EXPECT_TRUE(!live_together || disjoint)
          << g.tensor_name(a) << " and " << g.tensor_name(b) << " are live together but overlap";
    }
    if (p.scratch_bytes > 0) {
      bool disjoint = ta.offset + ta.bytes <= p.scratch_offset ||
                      p.scratch_offset + p.scratch_bytes <= ta.offset;
      EXPECT_TRUE(disjoint) << g.tensor_name(a) << " overlaps the reduction scratch";
    }
  }
}

PlanOptions block_pipeline() {
  PlanOptions o;
  o.loop_groups = 1;
  return o;
}

TEST(Schedule, RmsNormLevelsAndBarriers) {
  PlanOptions plain = block_pipeline();
  plain.register_accums = false;
  KernelPlan p = first_customized_plan(rmsnorm_graph(16, 4096, 6144), plain);
  const BlockGraph& g = *p.graph;
  // Loads at level 0; the matmul (accumulating into registers) and accum_rms_ld at level 1.
  EXPECT_EQ(p.op(0).phase, Phase::Loop);
  EXPECT_EQ(p.op(0).level, 0);
  EXPECT_EQ(p.op(2).level, 1);
  EXPECT_EQ(p.op(2).accumulate_into, 3);
  EXPECT_EQ(p.op(3).level, 1);
  EXPECT_EQ(p.op(4).level, 1);
  EXPECT_EQ(p.op(5).phase, Phase::Post);
  EXPECT_EQ(p.op(5).inline_into, 6);  // the div is evaluated by the output saver
  EXPECT_EQ(p.op(6).level, 1);
  EXPECT_EQ(p.barriers_per_iteration, 1);
  // After the loop: finalize (register dump, rms), then the saver.
  EXPECT_EQ(p.barriers_post, 2);
  EXPECT_EQ(p.tensors[g.op(3).output].home, TensorHome::Registers);
  EXPECT_EQ(p.tensors[g.op(2).output].home, TensorHome::Fused);
  EXPECT_EQ(p.op(2).matmul, MatmulPath::TensorCore);
  // accum_rms_ld in registers per thread: its partials are flushed, then the RMS taken.
  KernelPlan r = first_customized_plan(rmsnorm_graph(16, 4096, 6144), block_pipeline());
  EXPECT_TRUE(r.op(4).register_accum);
  EXPECT_EQ(r.tensors[g.op(4).output].home, TensorHome::Shared);
  EXPECT_EQ(r.barriers_post, 3);
  // Loop groups (the default here): a group barrier per level, one before refilling a stage.
  // After the loop: one barrier, one after every group has written its partials; the saver
  // adds the groups' copies itself (summed at read), so no barrier follows an in-place sum.
  KernelPlan q = first_customized_plan(rmsnorm_graph(16, 4096, 6144));
  EXPECT_GT(q.groups, 1);
  EXPECT_EQ(q.barriers_per_iteration, 2);
  EXPECT_EQ(q.barriers_post, 2);
  EXPECT_TRUE(q.tensors[g.op(3).output].group_private);
  EXPECT_TRUE(q.tensors[g.op(3).output].summed_at_read);
  EXPECT_TRUE(q.tensors[g.op(4).output].summed_at_read);
  EXPECT_TRUE(q.tensors[1].group_private);
  EXPECT_FALSE(q.tensors[1].summed_at_read);  // an input tile: not an accumulator
  // Summed in place instead: one more barrier before the saver.
  PlanOptions in_place;
  in_place.sum_at_read = false;
  KernelPlan s = first_customized_plan(rmsnorm_graph(16, 4096, 6144), in_place);
  EXPECT_EQ(s.groups, q.groups);
  EXPECT_FALSE(s.tensors[g.op(3).output].summed_at_read);
  EXPECT_EQ(s.barriers_post, 3);
}

TEST(Schedule, FusionRemovesLevels) {
  KernelGraph gqa = attention_graph(2, 128, 64, 4096, 16, 64, 64, false);
  PlanOptions unchained = block_pipeline();
  unchained.chain_matmuls = false;
  KernelPlan fused = first_customized_plan(gqa, unchained);
  PlanOptions no_fusion = unchained;
  no_fusion.fuse_epilogues = false;
  KernelPlan plain = first_customized_plan(gqa, no_fusion);
  const BlockGraph& g = *fused.graph;
  // S = Q·K with exp in its epilogue, then E·V and Σ E: two levels per iteration.
  EXPECT_EQ(fused.op(3).epilogue, 4);
  EXPECT_EQ(fused.op(4).host, 3);
  EXPECT_EQ(fused.op(4).level, 1);
  EXPECT_EQ(fused.op(5).level, 2);
  EXPECT_EQ(fused.barriers_per_iteration, 2);
  EXPECT_EQ(fused.tensors[g.op(3).output].home, TensorHome::Fused);
  // Unfused: matmul, exp, matmul, accumulators — four levels.
  EXPECT_EQ(plain.op(4).level, 2);
  EXPECT_EQ(plain.op(6).level, 4);
  EXPECT_EQ(plain.barriers_per_iteration, 4);
  EXPECT_EQ(plain.tensors[g.op(3).output].home, TensorHome::Shared);
  // Chained (FlashAttention style): E·V and Σ E come from the registers of Q·K: one level.
  KernelPlan chained = first_customized_plan(gqa, block_pipeline());
  EXPECT_EQ(chained.op(3).chain_into, 5);
  EXPECT_EQ(chained.op(5).chain_from, 3);
  EXPECT_EQ(chained.op(7).rowsum_of, 3);
  EXPECT_EQ(chained.op(5).level, 1);
  EXPECT_EQ(chained.op(7).level, 1);
  EXPECT_EQ(chained.barriers_per_iteration, 1);
  EXPECT_EQ(chained.tensors[g.op(4).output].home, TensorHome::Fused);  // E never stored
  EXPECT_EQ(chained.tensors[g.op(7).output].home, TensorHome::Registers);
  // Warps own whole rows of both products.
  EXPECT_EQ(chained.op(3).tiling.warps_n, 1);
  EXPECT_EQ(chained.op(5).tiling.warps_n, 1);
  EXPECT_EQ(chained.op(3).tiling.nt, 8);
}

TEST(Schedule, ChainRowTilesPerWarp) {
  // 128 query rows = 8 row tiles, 64 keys and 64 head dims per product.
  KernelGraph gqa = attention_graph(2, 128, 64, 4096, 16, 64, 64, false);
  auto chain_tiling = [&](int row_tiles) {
    PlanOptions o = block_pipeline();
    o.chain_row_tiles = row_tiles;
    KernelPlan p = first_customized_plan(gqa, o);
    EXPECT_EQ(p.op(3).chain_into, 5);
    EXPECT_EQ(p.op(5).tiling.mt, p.op(3).tiling.mt);
    return std::make_pair(p.op(3).tiling.warps_m, p.op(3).tiling.mt);
  };
  EXPECT_EQ(chain_tiling(0), std::make_pair(8, 1));  // auto: one row tile per warp
  EXPECT_EQ(chain_tiling(2), std::make_pair(4, 2));  // B fragments shared by two row tiles
  EXPECT_EQ(chain_tiling(3), std::make_pair(8, 1));  // does not divide 8 row tiles: auto
  EXPECT_EQ(chain_tiling(4), std::make_pair(8, 1));  // 4·(8+8)·4 floats exceed the budget: auto
}

TEST(Schedule, FoldsNormsIntoMatmuls) {
  KernelGraph qk = attention_graph(2, 64, 64, 1024, 2, 64, 32, true);
  KernelPlan p = first_customized_plan(qk, block_pipeline());
  const BlockGraph& g = *p.graph;
  const int qn = 3, kn = 4, s = 5;
  // rms_norm(K) over the head dim (the contraction dim of Q·K) scales the product's columns;
  // rms_norm(Q) runs once before the loop and stays a tile.
  EXPECT_EQ(p.op(kn).fold_into, s);
  EXPECT_EQ(p.op(s).scale_b, kn);
  EXPECT_EQ(p.op(qn).fold_into, -1);
  EXPECT_EQ(p.tensors[g.op(kn).output].home, TensorHome::Scale);
  EXPECT_EQ(p.tensors[g.op(kn).output].bytes, 64 * 4);  // one inverse RMS per column
  EXPECT_TRUE(p.tensors[1].layout.swizzle);             // K is now read by ldmatrix
  PlanOptions off = block_pipeline();
  off.fold_norms = false;
  KernelPlan q = first_customized_plan(qk, off);
  EXPECT_EQ(q.op(kn).fold_into, -1);
  EXPECT_EQ(q.tensors[g.op(kn).output].home, TensorHome::Shared);
  expect_valid_memory_plan(p);
}

TEST(Schedule, HoistsLoopInvariantOps) {
  KernelGraph qk = attention_graph(2, 32, 32, 512, 4, 32, 16, true);
  KernelPlan p = first_customized_plan(qk);
  const BlockGraph& g = *p.graph;
  const int qi = 0, qn = 3, kn = 4;
  ASSERT_EQ(g.op(qn).kind, OpKind::RmsNorm);
  EXPECT_EQ(p.op(qi).phase, Phase::Prologue);  // Q has fmap φ
  EXPECT_EQ(p.op(qn).phase, Phase::Prologue);  // rms_norm(Q) computed once
  EXPECT_EQ(p.op(qn).level, 1);
  EXPECT_EQ(p.op(kn).phase, Phase::Loop);  // K changes every iteration
  EXPECT_EQ(p.barriers_prologue, 1);
  PlanOptions keep;
  keep.hoist_invariants = false;
  KernelPlan q = first_customized_plan(qk, keep);
  EXPECT_EQ(q.op(qn).phase, Phase::Loop);
  EXPECT_EQ(q.op(qi).phase, Phase::Loop);
  EXPECT_EQ(q.barriers_prologue, 0);
}

TEST(Schedule, DepthOfADiamond) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 64}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 2));
  int xi = must(b.add_input(Shape{16, 64}, {P, P, P}, 1));  // [16, 32]
  int a = must(b.add_op(OpKind::Exp, {xi}));                // level 1
  int c = must(b.add_op(OpKind::Square, {xi}));             // level 1
  int d = must(b.add_op(OpKind::Mul, {a, c}));              // level 2
  int e = must(b.add_op(OpKind::Sum, {d}, dim_attr(1)));    // level 3
  int f = must(b.add_op(OpKind::Div, {d, e}));              // level 4
  int acc = must(b.add_op(OpKind::AccumSum, {f}));          // level 5
  must(b.add_output(acc, {P, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b)));
  must(g.mark_output(outs[0]));
  PlanOptions no_inline = block_pipeline();
  no_inline.inline_elementwise = false;
  KernelPlan p = first_customized_plan(g, no_inline);
  const int expect[] = {0, 1, 1, 2, 3, 4, 5};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(p.op(i).level, expect[i]) << "op #" << i;
  EXPECT_EQ(p.barriers_per_iteration, 5);
  EXPECT_EQ(p.levels[static_cast<int>(Phase::Loop)][1], (std::vector<int>{1, 2}));
  expect_valid_memory_plan(p);
}

TEST(MemoryPlan, ReusesDeadTiles) {
  // A chain of loop tiles: a and c (and b and d) are never live together and share memory.
  KernelGraph g;
  int x = must(g.add_input("X", Shape{64, 256}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 4));
  int xi = must(b.add_input(Shape{64, 256}, {P, P, P}, 1));  // [64, 64]
  int a = must(b.add_op(OpKind::Exp, {xi}));
  int c1 = must(b.add_op(OpKind::Square, {a}));
  int c2 = must(b.add_op(OpKind::Relu, {c1}));
  int c3 = must(b.add_op(OpKind::Silu, {c2}));
  int acc = must(b.add_op(OpKind::AccumSum, {c3}));
  must(b.add_output(acc, {P, P, P}));
  auto outs = must(g.add_customized({x}, std::move(b)));
  must(g.mark_output(outs[0]));
  PlanOptions no_inline;  // (inlining would compute the whole chain in one pass)
  no_inline.inline_elementwise = false;
  KernelPlan p = first_customized_plan(g, no_inline);
  expect_valid_memory_plan(p);
  int64_t sum = 0;
  for (const TensorPlan& t : p.tensors) sum += t.bytes;
  EXPECT_LT(p.smem_bytes, sum);
  EXPECT_EQ(p.tensors[a].offset, p.tensors[c2].offset);  // same size, disjoint lifetimes
  // Post-loop tiles reuse the loop's space.
  KernelPlan r = first_customized_plan(rmsnorm_graph(16, 4096, 6144));
  const BlockGraph& rg = *r.graph;
  int wi = 1, accm = rg.op(3).output;
  EXPECT_LT(r.tensors[accm].offset, r.tensors[wi].offset + r.tensors[wi].bytes);
  expect_valid_memory_plan(r);
}

TEST(MemoryPlan, ValidForEveryBenchmarkAndCoverageGraph) {
  std::vector<KernelGraph> graphs = {rmsnorm_graph(2, 4096, 6144),
                                     rmsnorm_graph(16, 4096, 6144),
                                     gatedmlp_graph(8, 4096, 4096),
                                     gatedmlp_graph(64, 4096, 4096),
                                     lora_graph(16, 256, 4096, 16),
                                     lora_graph(128, 256, 4096, 16),
                                     ntrans_graph(1, 4096),
                                     ntrans_graph(8, 4096),
                                     attention_graph(16, 256, 64, 4096, 16, 64, 64, false),
                                     attention_graph(16, 256, 64, 4096, 16, 64, 64, true),
                                     accumulators_and_maps(),
                                     simt_and_reductions(),
                                     batched_tensor_cores(),
                                     views_and_block_reductions(),
                                     rowwise_max_eps(),
                                     looped_max_eps(),
                                     folded_eps_and_chain_max(),
                                     layout_views(),
                                     rotary_rotate_half(),
                                     softmax_statistics(),
                                     online_attention(),
                                     online_attention(DType::f16, true, true, false, 2, 32),
                                     online_attention(DType::f16, true, true, false, 1, 128, 4096)};
  PlanOptions grouped;
  grouped.loop_groups = 2;
  for (const KernelGraph& g : graphs)
    for (const KernelOp& op : g.ops()) {
      if (op.kind != OpKind::Customized) continue;
      std::vector<DType> in, out;
      for (int t : op.inputs) in.push_back(g.tensor(t).dtype);
      for (int t : op.outputs) out.push_back(g.tensor(t).dtype);
      for (const PlanOptions& o : {PlanOptions{}, grouped}) {
        auto p = optimize_block_graph(op.body, in, out, o);
        ASSERT_TRUE(p.ok()) << p.error().message;
        expect_valid_memory_plan(*p);
      }
    }
}

TEST(MemoryPlan, ShrinksThePipelineThenFails) {
  KernelGraph g = gatedmlp_graph(64, 4096, 4096);
  KernelPlan roomy = first_customized_plan(g, block_pipeline());
  PlanOptions tight = block_pipeline();
  tight.smem_limit = 64 * 1024;
  KernelPlan small = first_customized_plan(g, tight);
  EXPECT_LT(small.pipeline_stages, roomy.pipeline_stages);
  EXPECT_GE(small.pipeline_stages, 2);
  EXPECT_LE(small.smem_bytes, 64 * 1024);
  tight.smem_limit = 8 * 1024;
  const KernelOp& op = g.op(3);
  auto r = optimize_block_graph(op.body, {DType::f16, DType::f16, DType::f16}, {DType::f16}, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("bytes of shared memory"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("limit of 8192"), std::string::npos) << r.error().message;
}

TEST(Layout, SwizzlePaddingAndViews) {
  KernelPlan p = first_customized_plan(gatedmlp_graph(8, 4096, 4096));
  // 64-wide f16 tensor-core operands: 128-byte rows, XOR swizzle.
  EXPECT_TRUE(p.tensors[1].layout.swizzle);
  EXPECT_EQ(p.tensors[1].layout.ld, 64);
  // 32-wide f16 operands (64-byte rows): padded to an odd number of 16-byte chunks.
  KernelPlan q = first_customized_plan(attention_graph(2, 32, 32, 512, 4, 32, 16, false));
  EXPECT_FALSE(q.tensors[2].layout.swizzle);
  EXPECT_EQ(q.tensors[2].layout.ld, 40);
  // LoRA: X and X·A stored in place inside [X | X·A], W and B inside [W ; B].
  KernelPlan l = first_customized_plan(lora_graph(16, 256, 4096, 16));
  const BlockGraph& g = *l.graph;
  const int left = g.op(5).output, right = g.op(6).output;
  EXPECT_EQ(l.tensors[0].home, TensorHome::View);
  EXPECT_EQ(l.tensors[0].view_of, left);
  EXPECT_EQ(l.tensors[g.op(4).output].home, TensorHome::View);  // X·A
  EXPECT_EQ(l.tensors[g.op(4).output].view_offset, 256);
  EXPECT_EQ(l.tensors[1].view_of, right);
  EXPECT_EQ(l.tensors[3].view_of, right);
  EXPECT_EQ(l.tensors[3].view_offset, 256);
  // Pipelined input tiles are never views.
  for (const TensorPlan& t : first_customized_plan(rmsnorm_graph(2, 4096, 6144)).tensors)
    EXPECT_NE(t.home, TensorHome::View);
  expect_valid_memory_plan(l);
}

TEST(Layout, PipelineDepthFollowsBytesInFlight) {
  PlanOptions o = block_pipeline();
  o.bytes_in_flight = 32 * 1024;
  // 8 KB of W and 256 B of X per iteration, one block per SM: 32 KB in flight needs 4 + 1
  // stages.
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(2, 4096, 6144), o).pipeline_stages, 5);
  o.bytes_in_flight = 128 * 1024;
  o.max_stages = 8;
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(2, 4096, 6144), o).pipeline_stages, 8);  // capped
  o.forced_stages = 3;
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(2, 4096, 6144), o).pipeline_stages, 3);
  // F = 1: no pipeline.
  EXPECT_EQ(first_customized_plan(ntrans_graph(8, 4096)).pipeline_stages, 1);
  // The target is per SM: 384 blocks share an SM three at a time, so each keeps a third.
  o.bytes_in_flight = 96 * 1024;
  o.max_stages = 12;
  o.forced_stages = 0;
  PlanOptions alone = o;
  alone.bytes_in_flight = 32 * 1024;
  alone.sm_count = 384;
  const int shared3 = first_customized_plan(rmsnorm_graph(2, 4096, 6144, 16), o).pipeline_stages;
  EXPECT_EQ(shared3, first_customized_plan(rmsnorm_graph(2, 4096, 6144, 16), alone).pipeline_stages);
  o.sm_count = 384;
  EXPECT_GT(first_customized_plan(rmsnorm_graph(2, 4096, 6144, 16), o).pipeline_stages, shared3);
  // Loop groups: every group keeps its stages in flight while it waits.
  PlanOptions g;
  g.loop_groups = 4;
  g.bytes_in_flight = 128 * 1024;
  KernelPlan q = first_customized_plan(rmsnorm_graph(2, 4096, 6144), g);
  EXPECT_EQ(q.groups, 4);
  EXPECT_EQ(q.pipeline_stages, 4);  // 4 groups × 4 stages × 8.25 KB ≈ 128 KB
  expect_valid_memory_plan(q);
}

TEST(Layout, LoopGroups) {
  // rmsnorm b8 (96 blocks, one per SM): one-warp groups, as many as fit two stages of 10 KB.
  KernelPlan r = first_customized_plan(rmsnorm_graph(16, 4096, 6144));
  EXPECT_EQ(r.group_threads, 32);
  EXPECT_GE(r.groups, 8);
  EXPECT_EQ(r.threads, r.groups * 32);
  EXPECT_GE(r.pipeline_stages, 2);
  expect_valid_memory_plan(r);
  // gatedmlp b8: two 64x64 register accumulators need four warps per group.
  KernelPlan m = first_customized_plan(gatedmlp_graph(64, 4096, 4096));
  EXPECT_EQ(m.group_threads, 128);
  EXPECT_GE(m.groups, 2);
  expect_valid_memory_plan(m);
  // A grid of many blocks per SM keeps one group (the blocks share the SM instead).
  EXPECT_EQ(first_customized_plan(attention_graph(16, 256, 64, 4096, 16, 64, 64, false)).groups, 1);
  // Forced counts, and no groups without a loop.
  PlanOptions o;
  o.loop_groups = 3;
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(16, 4096, 6144), o).groups, 3);
  o.loop_groups = 1;
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(16, 4096, 6144), o).groups, 1);
  EXPECT_EQ(first_customized_plan(lora_graph(16, 256, 4096, 16)).groups, 1);
  // Loop groups never exceed the loop.
  o.loop_groups = 16;
  EXPECT_LE(first_customized_plan(attention_graph(2, 256, 64, 4096, 16, 64, 64, false), o).groups, 4);
}

TEST(Layout, Rowwise) {
  KernelPlan p = first_customized_plan(ntrans_graph(1, 4096));
  EXPECT_TRUE(p.rowwise);
  EXPECT_EQ(p.threads, 512);  // 512 chunks of 8 halves: one per thread
  EXPECT_EQ(p.scratch_bytes, 2 * 16 * 4);
  EXPECT_EQ(p.barriers_post, 2);  // one per block-wide row reduction
  for (const TensorPlan& t : p.tensors) EXPECT_EQ(t.home, TensorHome::Owned);
  auto layout = rowwise_layout(p);
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  EXPECT_EQ(layout->vec, 8);
  EXPECT_TRUE(layout->block_rows);
  // Rows of 32 chunks stay in one warp: no scratch, no barrier.
  KernelPlan q = first_customized_plan(rowwise_rows());
  EXPECT_TRUE(q.rowwise);
  EXPECT_EQ(q.scratch_bytes, 0);
  // Matmuls and loops are not rowwise.
  EXPECT_FALSE(first_customized_plan(rmsnorm_graph(2, 4096, 6144)).rowwise);
  PlanOptions off;
  off.rowwise = false;
  EXPECT_FALSE(first_customized_plan(ntrans_graph(1, 4096), off).rowwise);
}

TEST(Layout, ThreadCount) {
  PlanOptions o = block_pipeline();
  o.chain_matmuls = false;
  // Register accumulators of 256x64 need 256 threads to fit 64 floats per thread.
  EXPECT_EQ(first_customized_plan(attention_graph(2, 256, 64, 4096, 16, 64, 64, false), o).threads, 256);
  // Chained, every warp owns one 16-row tile of both products: 16 warps.
  EXPECT_EQ(first_customized_plan(attention_graph(2, 256, 64, 4096, 16, 64, 64, false), block_pipeline()).threads,
            512);
  // Tensor-core kernels whose accumulators fit keep the block graph's 128 threads.
  EXPECT_EQ(first_customized_plan(rmsnorm_graph(2, 4096, 6144), o).threads, 128);
  // Elementwise kernels get at most 8 elements of their largest tile per thread.
  o.rowwise = false;
  EXPECT_EQ(first_customized_plan(ntrans_graph(1, 4096), o).threads, 512);
  EXPECT_EQ(first_customized_plan(ntrans_graph(2, 256), o).threads, 128);
  o.threads = 64;
  EXPECT_EQ(first_customized_plan(ntrans_graph(1, 4096), o).threads, 64);
  // Without a loop, tensor-core kernels spread large products over up to 8 warps.
  EXPECT_EQ(first_customized_plan(lora_graph(128, 256, 4096, 16)).threads, 256);
  // Decode QK-norm attention, K tiles of 128 x 128: with the K norm folded into the product
  // the block keeps 128 threads; computed on its own, the norm passes over 16384 elements and
  // the block takes 512 threads (32 elements each), though its accumulators fit 128.
  const KernelGraph decode = attention_graph(16, 16, 128, 4096, 16, 128, 8, true);
  EXPECT_EQ(first_customized_plan(decode, block_pipeline()).threads, 128);
  PlanOptions unfolded = block_pipeline();
  unfolded.fold_norms = false;
  EXPECT_EQ(first_customized_plan(decode, unfolded).threads, 512);
  unfolded.max_threads = 256;  // a task entry's caller bounds it
  EXPECT_EQ(first_customized_plan(decode, unfolded).threads, 256);
}

TEST(Schedule, InlinesElementwiseChains) {
  PlanOptions not_rowwise;
  not_rowwise.rowwise = false;
  KernelPlan p = first_customized_plan(ntrans_graph(1, 4096), not_rowwise);
  const BlockGraph& g = *p.graph;
  // sub → mul → add is evaluated in one pass by the add; the F = 1 accumulator is its input.
  EXPECT_EQ(p.op(4).inline_into, 5);
  EXPECT_EQ(p.op(5).inline_into, 6);
  EXPECT_EQ(p.tensors[g.op(4).output].home, TensorHome::Inline);
  EXPECT_EQ(p.op(6).level, p.op(3).level + 1);
  EXPECT_EQ(p.op(7).level, p.op(6).level + 1);
  EXPECT_EQ(p.tensors[g.op(8).output].home, TensorHome::View);
  EXPECT_EQ(p.tensors[g.op(8).output].view_of, g.op(7).output);
  PlanOptions o = not_rowwise;
  o.inline_elementwise = false;
  KernelPlan q = first_customized_plan(ntrans_graph(1, 4096), o);
  EXPECT_EQ(q.op(6).level, q.op(3).level + 3);
  // gatedmlp: silu(acc1) is evaluated by the mul, the mul by the output saver.
  KernelPlan m = first_customized_plan(gatedmlp_graph(8, 4096, 4096));
  EXPECT_EQ(m.op(7).inline_into, 8);
  EXPECT_EQ(m.op(8).inline_into, 9);
  EXPECT_EQ(m.op(9).level, 1);
  expect_valid_memory_plan(p);
  expect_valid_memory_plan(m);
}

/// The plan of customized op number `which` (0 = the first) of g.
KernelPlan plan_of_kernel(const KernelGraph& g, int which, PlanOptions opts = {}) {
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized || which-- > 0) continue;
    std::vector<DType> in, out;
    for (int t : op.inputs) in.push_back(g.tensor(t).dtype);
    for (int t : op.outputs) out.push_back(g.tensor(t).dtype);
    return must(optimize_block_graph(op.body, in, out, opts));
  }
  throw std::runtime_error("no such customized op");
}

// Layout ops are read in place: no level, no barrier, no shared memory; copied only where
// ldmatrix cannot read them.
TEST(LayoutViews, ReadInPlaceUnlessLdmatrixCannot) {
  KernelPlan p = first_customized_plan(transposed_key_chain(), block_pipeline());
  const BlockGraph& g = *p.graph;
  const int kt = g.op(3).output;  // transpose(K_i)
  EXPECT_TRUE(p.op(3).in_place);
  EXPECT_EQ(p.tensors[kt].home, TensorHome::Alias);
  EXPECT_EQ(p.tensors[kt].view_of, g.op(1).output);
  EXPECT_EQ(p.tensors[kt].offset, -1);
  EXPECT_EQ(p.op(3).level, p.op(1).level);
  EXPECT_TRUE(alias_map(p, kt).transposed);
  EXPECT_EQ(p.op(4).chain_into, 6);  // the chain reads K_i through the transpose
  expect_valid_memory_plan(p);

  KernelPlan v = first_customized_plan(layout_views(), block_pipeline());
  const BlockGraph& vg = *v.graph;
  EXPECT_TRUE(v.op(2).in_place);   // transpose(X_i): a transposed A of whole 16-row tiles
  EXPECT_TRUE(v.op(3).in_place);   // W_i[:, 64:128]: 128-byte aligned
  EXPECT_FALSE(v.op(4).in_place);  // W_i[:, 4:68]: rows not 16-byte aligned, copied
  EXPECT_EQ(v.tensors[vg.op(4).output].home, TensorHome::Shared);
  EXPECT_GT(v.op(4).level, v.op(1).level);
  EXPECT_EQ(alias_map(v, vg.op(7).output).origin, (std::vector<int64_t>{0, 16}));
  expect_valid_memory_plan(v);

  KernelPlan h = plan_of_kernel(layout_views(), 2);
  const BlockGraph& hg = *h.graph;
  const int host = hg.op(1).output;
  EXPECT_EQ(h.tensors[hg.op(2).output].home, TensorHome::Alias);
  EXPECT_FALSE(h.tensors[host].layout.swizzle);  // an alias at column 8 keeps it unswizzled
  EXPECT_EQ(h.tensors[host].layout.ld, 136);
  // A B operand of 128-byte rows read directly is swizzled (U of views_and_block_reductions).
  KernelPlan plain = first_customized_plan(views_and_block_reductions());
  EXPECT_TRUE(plain.tensors[plain.graph->op(1).output].layout.swizzle);
}

// The online softmax in a matmul chain: the running max and exp(S − m) on the fragments, the
// rescaling accumulators fed from them; loop groups only when the result is free of the shifts.
TEST(OnlineSoftmax, ChainsAndLoopGroups) {
  PlanOptions grouped;
  grouped.loop_groups = 2;
  const KernelGraph g = online_attention(DType::f16, true, true, false, 2, 32);
  KernelPlan p = first_customized_plan(g, grouped);
  // ops: 0 Q, 1 K, 2 V, 3 transpose, 4 S, 5 scale, 6 running_max, 7 sub, 8 exp, 9 P,
  // 10 accum_rescale, 11 accum_rescale_ld
  EXPECT_EQ(p.op(4).chain_into, 9);
  EXPECT_EQ(p.op(4).epilogue, 5);
  EXPECT_EQ(p.op(6).scan_of, 4);
  EXPECT_EQ(p.op(4).chain_ops, (std::vector<int>{7, 8}));
  EXPECT_TRUE(p.op(4).shift_free);
  EXPECT_EQ(p.op(9).accumulate_into, 10);
  EXPECT_EQ(p.op(11).rowsum_of, 4);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.tensors[p.graph->op(6).output].home, TensorHome::Registers);  // for the combine
  EXPECT_TRUE(p.tensors[p.graph->op(6).output].group_private);
  EXPECT_FALSE(p.tensors[p.graph->op(10).output].summed_at_read);
  expect_valid_memory_plan(p);
  // Without groups the running max never leaves registers.
  PlanOptions one;
  one.loop_groups = 1;
  KernelPlan q = first_customized_plan(g, one);
  EXPECT_EQ(q.tensors[q.graph->op(6).output].home, TensorHome::Fused);
  // A plain sum of E depends on the maxima along the way: chained, not shift-free, no groups.
  KernelPlan x = first_customized_plan(online_attention(DType::f16, true, true, true, 2, 32), grouped);
  EXPECT_EQ(x.op(6).scan_of, 4);
  EXPECT_FALSE(x.op(4).shift_free);
  EXPECT_EQ(x.groups, 1);
  // Without chains: the running max is a state tile in shared memory, no groups either.
  PlanOptions unchained = grouped;
  unchained.chain_matmuls = false;
  KernelPlan u = first_customized_plan(g, unchained);
  EXPECT_EQ(u.op(6).scan_of, -1);
  EXPECT_EQ(u.tensors[u.graph->op(6).output].home, TensorHome::Shared);
  EXPECT_EQ(u.groups, 1);
  expect_valid_memory_plan(u);
}

TEST(GraphOptimizer, DumpsThePlanAfterEveryPass) {
  setenv("STRATA_DUMP_PASSES", "1", 1);
  ::testing::internal::CaptureStderr();
  KernelPlan p = first_customized_plan(rmsnorm_graph(2, 4096, 6144));
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("STRATA_DUMP_PASSES");
  for (const char* pass : {"schedule_block_ops", "fuse_matmul_epilogues", "choose_layouts",
                           "plan_shared_memory", "plan_emission"})
    EXPECT_NE(err.find(std::string("=== after ") + pass), std::string::npos) << pass;
  EXPECT_NE(err.find("kernel plan: grid (96, 1, 1)"), std::string::npos);
  EXPECT_NE(err.find("  emission: launch bounds ("), std::string::npos);
}

TEST(PlanContract, EmissionDecisionsFollowTheOptions) {
  // rmsnorm b8: 96 blocks on 132 SMs (one per SM): launch bounds with a minimum of one block.
  KernelPlan p = first_customized_plan(rmsnorm_graph(16, 4096, 6144), block_pipeline());
  ASSERT_TRUE(p.emission.decided);
  EXPECT_EQ(p.emission.min_blocks_per_sm, 1);
  EXPECT_EQ(p.emission.register_cap, std::min(255, 65536 / p.threads));
  EXPECT_TRUE(p.emission.split_chunk_walks);
  EXPECT_EQ(p.emission.max_unrolled_chunks, 32);
  // Register accumulators of a mean / RMS: partials flushed, a barrier, then finalized.
  EXPECT_TRUE(p.emission.finalize.work);
  EXPECT_TRUE(p.emission.finalize.two_steps);
  EXPECT_EQ(p.emission.finalize.step_two[4], StepTwo::FinalizeShared);
  EXPECT_EQ(p.emission.finalize.step_two[2], StepTwo::Nothing);  // a matmul
  // Knobs become plan decisions: forced blocks per SM cap the registers, flat walks.
  PlanOptions o = block_pipeline();
  o.min_blocks_per_sm = 2;
  o.split_chunk_walks = false;
  KernelPlan q = first_customized_plan(rmsnorm_graph(16, 4096, 6144), o);
  EXPECT_EQ(q.emission.min_blocks_per_sm, 2);
  EXPECT_EQ(q.emission.register_cap, std::min(255, 65536 / (2 * q.threads)));
  EXPECT_FALSE(q.emission.split_chunk_walks);
  EXPECT_EQ(q.emission.max_unrolled_chunks, 16);
  // Many blocks per SM: no minimum. Early refill needs loop groups and two stages.
  KernelPlan a = first_customized_plan(attention_graph(16, 256, 64, 4096, 16, 64, 64, false));
  EXPECT_EQ(a.emission.min_blocks_per_sm, 0);
  PlanOptions e;
  e.early_refill = true;
  e.loop_groups = 4;
  KernelPlan g = first_customized_plan(rmsnorm_graph(16, 4096, 6144), e);
  EXPECT_EQ(g.groups, 4);
  EXPECT_TRUE(g.emission.early_refill);
  e.loop_groups = 1;
  EXPECT_FALSE(first_customized_plan(rmsnorm_graph(16, 4096, 6144), e).emission.early_refill);
  // Rowwise kernels carry their layout.
  KernelPlan r = first_customized_plan(ntrans_graph(1, 4096));
  EXPECT_EQ(r.rowwise_layout.threads, r.threads);
  EXPECT_EQ(r.rowwise_layout.vec, 8);
}

TEST(PlanContract, VerifyPlanNamesTheBrokenInvariant) {
  const KernelPlan good = first_customized_plan(rmsnorm_graph(16, 4096, 6144), block_pipeline());
  ASSERT_TRUE(verify_plan(good).ok()) << verify_plan(good).error().message;
  auto broken = [&](const std::function<void(KernelPlan&)>& edit, const std::string& what) {
    KernelPlan p = good;
    edit(p);
    Status st = verify_plan(p);
    EXPECT_FALSE(st.ok()) << what;
    if (!st.ok()) EXPECT_NE(st.error().message.find(what), std::string::npos) << st.error().message;
  };
  const BlockGraph& g = *good.graph;
  // Two tiles live together at overlapping offsets.
  std::vector<int> placed;
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t)
    if (good.tensors[t].home == TensorHome::Shared && good.tensors[t].offset >= 0)
      placed.push_back(t);
  ASSERT_GE(placed.size(), 2u);
  const int a = placed[0], b = placed[1];
  broken(
      [&](KernelPlan& p) {
        p.tensors[b].offset = p.tensors[a].offset;
        p.tensors[b].bytes = p.tensors[a].bytes;
        p.tensors[b].live_begin = p.tensors[a].live_begin;
        p.tensors[b].live_end = p.tensors[a].live_end;
      },
      "overlap in shared memory");
  broken([&](KernelPlan& p) { p.tensors[a].offset += 4; }, "aligned");
  broken([&](KernelPlan& p) { p.smem_bytes = p.options.smem_limit + kSmemAlign; },
         "above the limit");
  // A reader moved to its producer's level (no barrier between them).
  broken(
      [&](KernelPlan& p) {
        const int saver = 6, div = 5;
        p.ops[div].inline_into = -1;
        p.ops[div].level = p.ops[saver].level;
        p.levels[static_cast<int>(Phase::Post)][p.ops[saver].level].push_back(div);
        auto& l0 = p.levels[static_cast<int>(Phase::Post)][0];
        l0.erase(std::remove(l0.begin(), l0.end(), div), l0.end());
        auto& l1 = p.levels[static_cast<int>(Phase::Post)][1];
        if (std::count(l1.begin(), l1.end(), div) > 1) l1.pop_back();
      },
      "no barrier between them");
  broken([&](KernelPlan& p) { p.ops[0].level = 3; }, "listed at phase");
  broken([&](KernelPlan& p) { p.group_threads = 48; }, "whole warps");
  broken([&](KernelPlan& p) { p.emission.register_cap = 255 - 1; }, "register cap");
  broken([&](KernelPlan& p) { p.emission.finalize.two_steps = !p.emission.finalize.two_steps; },
         "post-loop barriers");
  broken([&](KernelPlan& p) { p.emission.finalize.step_two[0] = StepTwo::SumPartials; },
         "no accumulator");
  broken([&](KernelPlan& p) { p.ops[2].epilogue = 5; }, "does not name it as its host");
}

// Which kernel tensors are written straight into the slices read from them (output_routes.h):
// only a customized kernel's result, read by slices alone (none a view) that partition one dim
// its grid splits, at tile boundaries, into parts stored in its type.
TEST(OutputRoutes, WhichTensorsAreRouted) {
  auto route_of_t = [](const KernelGraph& g, const std::vector<DType>& dtypes = {}) {
    const auto routes = plan_output_routes(g, plan_kernel_views(g), dtypes);
    std::optional<OutputRoute> r;
    for (size_t t = 0; t < g.tensors().size(); ++t)
      if (g.tensor_name(static_cast<int>(t)) == "T") r = routes[t];
    return r;
  };
  const KernelGraph qkv = sliced_projection({64, 0, 80}, {80, 64, 96});  // slices out of order
  const auto r = route_of_t(qkv);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->dim, 1);
  ASSERT_EQ(r->parts.size(), 3u);
  EXPECT_EQ(r->parts[0].start, 0);  // in ascending order
  EXPECT_EQ(r->parts[1].start, 64);
  EXPECT_EQ(r->parts[2].end, 96);
  EXPECT_EQ(qkv.tensor_name(r->parts[0].tensor), "P1");
  const OutputParts parts = output_parts(qkv.op(2), 0, *r);
  EXPECT_EQ(parts.axis, 0);
  EXPECT_EQ(parts.tile, 16);
  EXPECT_EQ(parts.starts, (std::vector<int64_t>{0, 64, 80}));
  int routed = 0;
  for (int i = 0; i < static_cast<int>(qkv.ops().size()); ++i)
    routed += is_routed_slice(qkv, plan_output_routes(qkv, plan_kernel_views(qkv)), i);
  EXPECT_EQ(routed, 3);
  EXPECT_TRUE(route_of_t(sliced_norm_rows({0, 4}, {4, 8})).has_value());
  // Not a partition: overlapping, a gap, short of the end.
  EXPECT_FALSE(route_of_t(sliced_projection({0, 48}, {64, 96})).has_value());
  EXPECT_FALSE(route_of_t(sliced_projection({0, 80}, {64, 96})).has_value());
  EXPECT_FALSE(route_of_t(sliced_projection({0, 64}, {64, 80})).has_value());
  // A boundary inside a tile; a tile wider than a part; another reader.
  EXPECT_FALSE(route_of_t(sliced_projection({0, 72}, {72, 96})).has_value());
  EXPECT_FALSE(route_of_t(sliced_projection({0, 16}, {16, 96}, 32)).has_value());
  EXPECT_FALSE(route_of_t(sliced_projection({0, 64}, {64, 96}, 16, true)).has_value());
  // A part stored in another type than T (an f32 intermediate).
  std::vector<DType> dtypes(qkv.tensors().size(), DType::f16);
  EXPECT_TRUE(route_of_t(qkv, dtypes).has_value());
  dtypes[r->parts[1].tensor] = DType::f32;
  EXPECT_FALSE(route_of_t(qkv, dtypes).has_value());
  // A slice read in place by a customized kernel is a view of T: T keeps its memory.
  KernelGraph viewed = sliced_projection({0}, {64});
  {
    const int t = viewed.outputs()[0] - 1;  // T, the slice's source
    ASSERT_EQ(viewed.tensor_name(t), "T");
    int s1 = *viewed.add_op(OpKind::Slice, {t}, slice_attr(1, 64, 96), "S1");
    BlockGraph b = *BlockGraph::make({1, 1, 1}, 128, 1);
    int si = *b.add_input(Shape{16, 32}, {P, P, P}, P);
    int e = *b.add_op(OpKind::Exp, {si});
    int acc = *b.add_op(OpKind::AccumSum, {e});
    ASSERT_TRUE(b.add_output(acc, {P, P, P}).ok());
    ASSERT_TRUE(viewed.mark_output((*viewed.add_customized({s1}, std::move(b), {"E"}))[0]).ok());
  }
  ASSERT_TRUE(plan_kernel_views(viewed)[viewed.outputs()[1] - 1].has_value());
  EXPECT_FALSE(route_of_t(viewed).has_value());
}

}  // namespace
}  // namespace strata::testing
