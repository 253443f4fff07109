// Tensor-core matmuls on tiles whose extents are not multiples of the mma step (docs/codegen.md,
// "Ragged tiles": padding to the mma step): the plan pads N and K (OpPlan::mma_n / mma_k) and
// the operands' storage, the emitted code zeroes the fragments past K and never writes product
// columns past N. Each case must take the tensor-core path in the plan, then run on the CPU
// emulator (shared memory starts as NaN, so an unmasked pad poisons the product) and match the
// float64 interpreter and the naive program.
#include <gtest/gtest.h>

#include <fstream>

#include "strata/cost/cost_model.h"
#include "strata/frontend/graph_loader.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/opt/layout.h"
#include "strata/opt/plan_invariants.h"
#include "support/emulation_check.h"
#include "support/kernel_ir.h"
#include "support/kernel_plans.h"
#include "support/mma_padding_graphs.h"

namespace strata::testing {
namespace {

/// N and K of matmul op i of the plan's graph.
std::pair<int64_t, int64_t> nk(const KernelPlan& p, int i) {
  const BlockGraph& g = *p.graph;
  const Shape& a = g.tensor(g.op(i).inputs[0]).shape;
  const Shape& b = g.tensor(g.op(i).inputs[1]).shape;
  return {b[b.rank() - 1], a[a.rank() - 1]};
}

/// Every matmul of the plan runs on tensor cores with N and K rounded up to 8 and 16, and at
/// least one is padded; returns how many are.
int expect_padded_tensor_cores(const KernelPlan& p, const std::string& name) {
  const BlockGraph& g = *p.graph;
  int padded = 0;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    if (op_category(g.op(i).kind) != Category::Matmul) continue;
    const OpPlan& op = p.ops[i];
    const auto [n, k] = nk(p, i);
    EXPECT_EQ(op.matmul, MatmulPath::TensorCore) << name << " op #" << i;
    EXPECT_EQ(op.mma_n, (n + 7) / 8 * 8) << name << " op #" << i;
    EXPECT_EQ(op.mma_k, (k + 15) / 16 * 16) << name << " op #" << i;
    if (op.mma_k > k) EXPECT_EQ(op.ragged_zero_operands, 3u) << name << " op #" << i;
    padded += op.mma_n > n || op.mma_k > k ? 1 : 0;
  }
  EXPECT_GE(padded, 1) << name;
  return padded;
}

void run_case(const RaggedCase& c) {
  SCOPED_TRACE(c.name);
  const KernelPlan plan = first_customized_plan(c.graph);
  expect_padded_tensor_cores(plan, c.name);
  const std::string src =
      check_emulation(c.graph, {.name = c.name,
                                .reference = c.program ? &*c.program : nullptr,
                                .graph_matches_reference = c.program.has_value(),
                                .seed = 777,
                                .amp = c.amp,
                                .rtol = 2e-2,
                                .rel_l2 = 1e-2});
  if (const char* d = std::getenv("DUMP_MMA_PADDING"))
    write_file(std::string(d) + "/" + c.name + ".cu", src);
}

// [16, 40] × [40, 21] and [20, 24] × [24, 3] with an epilogue: K padded to 48 / 32, N to 24 / 8;
// the odd last column is stored alone.
TEST(MmaPadding, OddKAndNTilesWithEpilogue) {
  for (const RaggedCase& c : mma_padding_cases())
    if (c.name.rfind("pad_epilogue", 0) == 0) run_case(c);
  // The odd N's last pair is split: a pair store for c + 1 < N, a single one at c = N − 1.
  const ir::Stmt k = kernel_ir(padded_matmul_epilogue(16, 40, 21).graph);
  EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma_ragged<").empty());  // zeroed past K = 40
  EXPECT_TRUE(calls_to(k, "strata_rt::warp_mma<").empty());
}

// A loop over K = 120 in tiles of 40 into a register accumulator with N tiles of 25 (dumped with
// the odd last column alone), and the same with K = 110 (tiles of 37, the last 36).
TEST(MmaPadding, RegisterAccumulatorOverALoop) {
  for (const RaggedCase& c : mma_padding_cases())
    if (c.name.rfind("pad_loop", 0) == 0 || c.name.rfind("pad_ragged_loop", 0) == 0) run_case(c);
  const KernelPlan p = first_customized_plan(matmul_ragged(16, 110, 75, 3, 3));
  const BlockGraph& g = *p.graph;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    if (g.op(i).kind != OpKind::Matmul) continue;
    EXPECT_EQ(p.tensors[g.op(p.ops[i].accumulate_into).output].home, TensorHome::Registers);
    EXPECT_GE(p.ops[i].ragged_extent, 0);  // ragged and padded: klimit is the present extent
  }
}

// A batch of two with B read transposed (pad rows inside each batch) and a computed, padded A.
TEST(MmaPadding, BatchedTransposedAndComputedOperands) {
  const RaggedCase c = padded_batched_chain(16, 40, 21, 24);
  run_case(c);
  const KernelPlan p = first_customized_plan(c.graph);
  const BlockGraph& g = *p.graph;
  // W [2, 21, 40] is read as Bᵀ: its rows pad to N = 24, its row stride covers K = 48.
  const int w = g.op(1).output;
  ASSERT_EQ(g.tensor(w).shape, (Shape{2, 21, 40}));
  EXPECT_EQ(p.tensors[w].layout.pad_rows, 3);
  EXPECT_GE(p.tensors[w].layout.ld, 48);
  EXPECT_GE(p.tensors[w].layout.stage_elems, 2 * 24 * p.tensors[w].layout.ld);
}

// Split-KV decode attention (the first kernel of the split the search finds for 4097 keys) over
// 300 and 521 keys: tiles of 38, 43 and 66 keys, ragged in the last split or iteration.
TEST(MmaPadding, SplitKvAttentionRaggedAndPadded) {
  for (const RaggedCase& c : mma_padding_cases())
    if (c.name.rfind("pad_splitkv", 0) == 0) run_case(c);
}

// The split-KV candidate of decode attention over 4097 keys (tests/data/emit, once ranked 4th): 129
// keys per block in 2 iterations of 65. Both matmuls were SIMT; they run on tensor cores now,
// Q·Kᵀ with N 65 → 72, E·V with K 65 → 80, and the kernel matches the interpreter.
TEST(MmaPadding, DecodeAttentionKv4097Candidate) {
  auto loaded = load_graph_entry("tests/data/emit/kv4097_split_kv_65.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const KernelGraph& g = loaded->graph;
  const KernelPlan p = first_customized_plan(g);
  const BlockGraph& b = *p.graph;
  ASSERT_EQ(b.forloop(), 2);
  std::vector<int> mms;
  for (int i = 0; i < static_cast<int>(b.ops().size()); ++i)
    if (b.op(i).kind == OpKind::Matmul) mms.push_back(i);
  ASSERT_EQ(mms.size(), 2u);
  EXPECT_EQ(p.ops[mms[0]].matmul, MatmulPath::TensorCore);
  EXPECT_EQ(p.ops[mms[0]].mma_n, 72);
  EXPECT_EQ(p.ops[mms[0]].mma_k, 128);
  EXPECT_EQ(p.ops[mms[1]].matmul, MatmulPath::TensorCore);
  EXPECT_EQ(p.ops[mms[1]].mma_n, 128);
  EXPECT_EQ(p.ops[mms[1]].mma_k, 80);
  run_case({"kv4097_rank4", g, std::nullopt, 2.0});
}

// The rule: a dim is padded to at most four times its extent; N = 1 (a matrix-vector product)
// and K < 4 keep the SIMT path, and so does a padded operand read through a slice.
TEST(MmaPadding, WhatKeepsTheSimtPath) {
  EXPECT_EQ(mma_padded_extent(65, 8), 72);
  EXPECT_EQ(mma_padded_extent(65, 16), 80);
  EXPECT_EQ(mma_padded_extent(3, 8), 8);
  EXPECT_EQ(mma_padded_extent(2, 8), 8);
  EXPECT_EQ(mma_padded_extent(1, 8), 0);
  EXPECT_EQ(mma_padded_extent(4, 16), 16);
  EXPECT_EQ(mma_padded_extent(3, 16), 0);
  EXPECT_EQ(mma_padded_extent(64, 16), 64);
  for (auto [k, n, tc] : {std::tuple{40, 1, false}, {3, 24, false}, {40, 2, true}, {4, 24, true}}) {
    const RaggedCase c = padded_matmul_epilogue(16, k, n);
    const KernelPlan p = first_customized_plan(c.graph);
    for (int i = 0; i < static_cast<int>(p.graph->ops().size()); ++i)
      if (p.graph->op(i).kind == OpKind::Matmul)
        EXPECT_EQ(p.ops[i].matmul, tc ? MatmulPath::TensorCore : MatmulPath::Simt)
            << "K " << k << " N " << n;
  }
  // X [16, 40] · slice(W, cols 0..21): the pad of the slice would be W's other columns.
  KernelGraph g;
  int x = must(g.add_input("X", Shape{16, 40}, DType::f16));
  int w = must(g.add_input("W", Shape{40, 32}, DType::f16));
  BlockGraph b = must(BlockGraph::make({1, 1, 1}, 128, 1));
  int xi = must(b.add_input(Shape{16, 40}, {P, P, P}, P));
  int wi = must(b.add_input(Shape{40, 32}, {P, P, P}, P));
  OpAttrs sl;
  sl.dim = 1;
  sl.start = 0;
  sl.end = 21;
  int ws = must(b.add_op(OpKind::Slice, {wi}, sl));
  int mm = must(b.add_op(OpKind::Matmul, {xi, ws}));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {mm})), {P, P, P}));
  EXPECT_FALSE(matmul_tiles_fit_mma(b, mm));
  EXPECT_TRUE(matmul_needs_mma_padding(b, mm));
  must(g.mark_output(must(g.add_customized({x, w}, std::move(b), {"O"}))[0]));
  const KernelPlan p = first_customized_plan(g);
  EXPECT_EQ(p.ops[mm].matmul, MatmulPath::Simt);
  EXPECT_EQ(p.ops[mm].mma_n, 0);
}

// verify_plan rejects padded matmuls whose storage or zeroing does not cover the pad.
TEST(MmaPadding, VerifyPlanChecksThePadding) {
  const RaggedCase c = padded_batched_chain(16, 40, 21, 24);
  const KernelPlan p = first_customized_plan(c.graph);
  ASSERT_TRUE(verify_plan(p).ok());
  const BlockGraph& g = *p.graph;
  int m0 = -1;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    if (g.op(i).kind == OpKind::Matmul && m0 < 0) m0 = i;
  {
    KernelPlan bad = p;
    bad.ops[m0].mma_k = 40;  // not rounded up
    EXPECT_FALSE(verify_plan(bad).ok());
  }
  {
    KernelPlan bad = p;
    bad.ops[m0].ragged_zero_operands = 1;  // B's pad not zeroed
    auto s = verify_plan(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("not zeroed past K"), std::string::npos) << s.error().message;
  }
  {
    KernelPlan bad = p;
    bad.tensors[g.op(1).output].layout.pad_rows = 0;  // W's rows do not reach N = 24
    auto s = verify_plan(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("does not cover the padded extents"), std::string::npos)
        << s.error().message;
  }
  {
    KernelPlan bad = p;
    bad.ops[m0].matmul = MatmulPath::Simt;  // mma extents off the tensor-core path
    EXPECT_FALSE(verify_plan(bad).ok());
  }
}

// The search's shared-memory estimate counts the padded storage the plan reserves: for
// [16, 40] × [40, 21] in one iteration, X as [16, 48], W as [48, 24] and the product as
// [16, 24] (16-bit), the epilogue and the accumulator as they are.
TEST(MmaPadding, SharedMemoryEstimateCountsThePad) {
  const RaggedCase c = padded_matmul_epilogue(16, 40, 21);
  const BlockGraph* b = nullptr;
  for (const KernelOp& op : c.graph.ops())
    if (op.kind == OpKind::Customized) b = op.body.get();
  ASSERT_NE(b, nullptr);
  int mm = -1;
  for (int i = 0; i < static_cast<int>(b->ops().size()); ++i)
    if (b->op(i).kind == OpKind::Matmul) mm = i;
  EXPECT_EQ(mma_storage_shape(*b, b->op(mm).inputs[0]), (Shape{16, 48}));
  EXPECT_EQ(mma_storage_shape(*b, b->op(mm).inputs[1]), (Shape{48, 24}));
  EXPECT_EQ(mma_storage_shape(*b, b->op(mm).output), (Shape{16, 24}));
  // X, W, the product, silu (16-bit loop tiles) and the accumulator (f32 when post-loop).
  const BlockTensor& acc = b->tensor(b->op(mm + 2).output);
  ASSERT_EQ(b->op(mm + 2).kind, OpKind::AccumSum);
  const int64_t acc_bytes = 16 * 21 * (acc.stage == Stage::Post ? 4 : 2);
  EXPECT_EQ(block_smem_bytes(*b, {DType::f16, DType::f16}),
            16 * 48 * 2 + 48 * 24 * 2 + 16 * 24 * 2 + 16 * 21 * 2 + acc_bytes);
  // The kv4097 candidate: K's tile [1, 65, 128] as [1, 72, 128], V's as [1, 80, 128].
  auto loaded = load_graph_entry("tests/data/emit/kv4097_split_kv_65.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  for (const KernelOp& op : loaded->graph.ops()) {
    if (op.kind != OpKind::Customized) continue;
    const BlockGraph& kb = *op.body;
    EXPECT_EQ(mma_storage_shape(kb, kb.op(1).output), (Shape{1, 72, 128}));
    EXPECT_EQ(mma_storage_shape(kb, kb.op(2).output), (Shape{1, 80, 128}));
    break;
  }
}

}  // namespace
}  // namespace strata::testing
