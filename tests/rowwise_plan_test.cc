// Rowwise kernels (docs/codegen.md, "Rowwise kernels"): which block graphs the planner keeps in
// registers, how it holds each tensor (RowwiseForm: chunks, rows, gathered), the chunk width it
// picks for odd extents and the launch shape it picks for the grid, and what the emitted code
// does with them. The emulation tests (codegen_emulation_test) run the same graphs.
#include <gtest/gtest.h>

#include <string>

#include "search/pointwise_seed.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/opt/graph_optimizer.h"
#include "strata/opt/rowwise.h"
#include "support/parse.h"
#include "support/pointwise_programs.h"

namespace strata::testing {
namespace {

/// The plan of customized kernel `which` of g.
KernelPlan plan_of(const KernelGraph& g, int which = 0, PlanOptions opts = {}) {
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized || which-- > 0) continue;
    std::vector<DType> in, out;
    for (int t : op.inputs) in.push_back(g.tensor(t).dtype);
    for (int t : op.outputs) out.push_back(g.tensor(t).dtype);
    auto plan = optimize_block_graph(op.body, in, out, opts);
    EXPECT_TRUE(plan.ok()) << plan.error().message;
    return std::move(plan).value();
  }
  throw std::runtime_error("no such customized op");
}

/// The pointwise seed of `program` with `rows` rows per block.
KernelGraph seed(const std::string& program, int64_t rows) {
  auto s = search::pointwise_seed(parse(program), rows);
  EXPECT_TRUE(s.has_value()) << program;
  return s ? *s : KernelGraph{};
}

/// The tensor of `plan`'s block graph produced by the first op of kind `k`.
int output_of(const KernelPlan& plan, OpKind k) {
  for (const BlockOp& op : plan.graph->ops())
    if (op.kind == k) return op.output;
  ADD_FAILURE() << "no " << op_name(k);
  return 0;
}

std::string rotary(const std::string& dtype, int tokens, int heads, int dim) {
  const std::string half = std::to_string(dim / 2), d = std::to_string(dim);
  auto shape = [&](int h) {
    return dtype + "[" + std::to_string(tokens) + ", " + std::to_string(h) + ", " + d + "]";
  };
  return "input Q: " + shape(heads) + "\ninput Cos: " + shape(1) + "\ninput Sin: " + shape(1) +
         "\nQr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, " + half + ", " + d +
         "), -1), slice(Q, -1, 0, " + half + "), dim=-1), Sin))\noutput Qr\n";
}

// A gain [width] broadcast over the rows is held per chunk like the row itself: the residual
// norm stays in registers (it went through shared memory, three barriers, before).
TEST(RowwisePlan, BroadcastGainIsHeldInChunks) {
  const KernelPlan p = plan_of(seed(residual_norm_program(16, 4096), 1));
  ASSERT_TRUE(p.rowwise);
  const RowwiseLayout& L = p.rowwise_layout;
  EXPECT_EQ(L.cols, 4096);
  EXPECT_EQ(L.vec, 8);
  EXPECT_TRUE(L.block_rows);
  EXPECT_EQ(p.threads, 512);  // 512 chunks of 8 halves per row, one per thread
  EXPECT_EQ(L.per_thread, 1);
  const BlockGraph& g = *p.graph;
  for (const BlockOp& op : g.ops())
    if (op.kind == OpKind::Input) {
      EXPECT_EQ(L.forms[op.output], RowwiseForm::Chunks) << g.tensor(op.output).shape.str();
      EXPECT_EQ(g.tensor(op.output).shape.rank(), op.attrs.input_index == 2 ? 1 : 2);
    }
  EXPECT_EQ(L.forms[output_of(p, OpKind::RmsNorm)], RowwiseForm::Chunks);
  EXPECT_EQ(p.smem_bytes, p.scratch_bytes);  // only the reduction scratch
}

// Rotary: the rotate-half slices are gathered (read again at the columns the concat needs),
// cos / sin [T, 1, D] broadcast over the heads are held in chunks.
TEST(RowwisePlan, RotarySlicesAreGathered) {
  const KernelPlan p = plan_of(seed(rotary("f16", 16, 32, 128), 1));
  ASSERT_TRUE(p.rowwise);
  const RowwiseLayout& L = p.rowwise_layout;
  EXPECT_EQ(L.vec, 8);
  EXPECT_FALSE(L.block_rows);  // rows of 16 chunks inside a warp
  EXPECT_EQ(L.forms[output_of(p, OpKind::Slice)], RowwiseForm::Gathered);
  EXPECT_EQ(L.forms[output_of(p, OpKind::MulScalar)], RowwiseForm::Gathered);
  EXPECT_EQ(L.forms[output_of(p, OpKind::Concat)], RowwiseForm::Chunks);
  for (const BlockOp& op : p.graph->ops())
    if (op.kind == OpKind::Input) EXPECT_EQ(L.forms[op.output], RowwiseForm::Chunks);
  EXPECT_EQ(p.smem_bytes, 0);
  EXPECT_EQ(p.barriers_prologue + p.barriers_post + p.barriers_per_iteration, 0);
}

// The chunk width divides every gathered width and slice start: a head dim of 36 (halves of
// 18) takes chunks of 2 elements, an odd half (head dim 18: 9) single elements. Rows of a
// chunk count that is not a power of two take the next one, the last chunks idle.
TEST(RowwisePlan, OddExtentsNarrowTheChunks) {
  const KernelPlan even = plan_of(seed(rotary("f16", 6, 4, 36), 1));
  ASSERT_TRUE(even.rowwise);
  EXPECT_EQ(even.rowwise_layout.vec, 2);
  EXPECT_EQ(even.rowwise_layout.chunks_per_row, 18);
  EXPECT_EQ(even.rowwise_layout.row_chunks, 32);
  EXPECT_TRUE(even.rowwise_layout.idle_chunks);
  const KernelPlan odd = plan_of(seed(rotary("bf16", 6, 4, 18), 1));
  ASSERT_TRUE(odd.rowwise);
  EXPECT_EQ(odd.rowwise_layout.vec, 1);
  EXPECT_EQ(odd.rowwise_layout.row_chunks, 32);
  // A residual norm of width 36: chunks of 4 halves (36 = 9 · 4), rows of 16 lanes; 3 rows
  // per block: 48 chunks on 64 threads.
  const KernelPlan norm = plan_of(seed(residual_norm_program(9, 36), 3));
  ASSERT_TRUE(norm.rowwise);
  EXPECT_EQ(norm.rowwise_layout.vec, 4);
  EXPECT_EQ(norm.rowwise_layout.row_chunks, 16);
  EXPECT_EQ(norm.threads, 64);
  EXPECT_EQ(norm.rowwise_layout.per_thread, 1);
  EXPECT_TRUE(norm.rowwise_layout.idle_chunks);
  // Whole warps of whole rows: nothing idle.
  EXPECT_FALSE(plan_of(seed(rotary("f16", 16, 32, 128), 1)).rowwise_layout.idle_chunks);
}

// Idle chunks are guarded: they load, reduce and store nothing. Nothing is zero-filled: what
// a chunk reduces or stores it wrote under the same guard.
TEST(RowwisePlan, EmittedCodeGuardsIdleChunks) {
  auto src = emit_cuda(seed(residual_norm_program(9, 36), 3));
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_NE(src->find("if (((utid + k * 64) % 16 < 9) && (utid + k * 64 < 48))"),
            std::string::npos);
  EXPECT_NE(src->find("team_sum<16>"), std::string::npos);
  EXPECT_EQ(src->find("= {};"), std::string::npos);
  // A part with a row reduction runs op by op (its shuffles outside any guard).
  EXPECT_EQ(src->find("chunk by chunk"), std::string::npos);
}

// Launch shape: a grid of fewer blocks than SMs gets up to 1024 threads, one chunk each where
// the chunks allow; a grid of many blocks keeps at most 256 threads for rows inside a warp,
// unless its threads would then hold more than 32 values of a tensor or 64 of all the tensors
// held in chunks.
TEST(RowwisePlan, LaunchShapeFollowsTheGridAndTheValuesHeld) {
  const std::string exp_program = "input X: f16[512, 64, 128]\nO = exp(X)\noutput O\n";
  // 16 blocks of [1, 64, 128]: 1024 chunks of 8.
  const KernelPlan few = plan_of(seed(rotary("f16", 16, 64, 128), 1));
  ASSERT_TRUE(few.rowwise);
  EXPECT_EQ(few.threads, 1024);
  EXPECT_EQ(few.rowwise_layout.per_thread, 1);
  // 512 blocks of exp (two tensors held: X and O): 256 threads, 4 chunks (2 · 32 values) each.
  const KernelPlan many = plan_of(seed(exp_program, 1));
  ASSERT_TRUE(many.rowwise);
  EXPECT_EQ(many.threads, 256);
  EXPECT_EQ(many.rowwise_layout.per_thread, 4);
  // Rotary holds five tensors (q, cos, the rotated half, sin, the result): 1024 threads.
  const KernelPlan rope = plan_of(seed(rotary("f16", 512, 64, 128), 1));
  ASSERT_TRUE(rope.rowwise);
  EXPECT_EQ(rope.threads, 1024);
  EXPECT_EQ(rope.rowwise_layout.per_thread, 1);
  // 2 tokens of exp per block (2048 chunks): 256 threads would hold 64 values of a tensor
  // each, so the block takes 1024; 4 tokens: 1024 threads of 32 values, the most.
  const KernelPlan two = plan_of(seed(exp_program, 2));
  ASSERT_TRUE(two.rowwise);
  EXPECT_EQ(two.threads, 1024);
  EXPECT_EQ(two.rowwise_layout.per_thread, 2);
  const KernelPlan four = plan_of(seed(exp_program, 4));
  ASSERT_TRUE(four.rowwise);
  EXPECT_EQ(four.threads, 1024);
  EXPECT_EQ(four.rowwise_layout.per_thread * four.rowwise_layout.vec, 32);
  // The SM count is the planner's: with 8 SMs 16 blocks are many.
  PlanOptions eight;
  eight.sm_count = 8;
  const std::string exp16 = "input X: f16[16, 64, 128]\nO = exp(X)\noutput O\n";
  EXPECT_EQ(plan_of(seed(exp16, 1), 0, eight).threads, 256);
  EXPECT_EQ(plan_of(seed(exp16, 1)).threads, 1024);
  // A forced thread count that divides the chunks is kept.
  PlanOptions forced;
  forced.threads = 128;
  EXPECT_EQ(plan_of(seed(rotary("f16", 16, 64, 128), 1), 0, forced).threads, 128);
}

// Rotary's Q [T, 32, 128] and K [T, 8, 128] in one kernel (the seed's, one split extent):
// two parts, K's rows after Q's in the chunk grid; cos and sin are loaded by each.
TEST(RowwisePlan, OutputsOfTwoShapesAreTwoParts) {
  const std::string program = rotary_program(16, 32, 8, 128);
  const KernelGraph g = seed(program, 1);
  const KernelPlan p = plan_of(g);
  ASSERT_TRUE(p.rowwise) << rowwise_layout(p).error().message;
  const RowwiseLayout& L = p.rowwise_layout;
  ASSERT_EQ(L.parts.size(), 2u);
  EXPECT_EQ(L.parts[0].full, Shape({1, 32, 128}));
  EXPECT_EQ(L.parts[1].full, Shape({1, 8, 128}));
  EXPECT_EQ(L.parts[1].row_offset, 32);
  EXPECT_EQ(L.rows, 40);
  EXPECT_EQ(p.threads, 640);  // 40 rows of 16 chunks, one per thread (16 blocks: few)
  EXPECT_EQ(L.per_thread, 1);
  auto src = emit_cuda(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_NE(src->find("of the [1, 32, 128] and [1, 8, 128] tiles"), std::string::npos);
  EXPECT_NE(src->find("if (utid + k * 640 < 512)"), std::string::npos);   // Q's chunks
  EXPECT_NE(src->find("if (utid + k * 640 >= 512)"), std::string::npos);  // K's chunks
  // K's chunks: their offsets from the part's first row.
  EXPECT_NE(src->find("gin3 + (bx * 1024 + (utid + k * 640 - 512) * 8)"), std::string::npos);
  // Rows across warps: the block reduces every row of every part (each chunk adds only its
  // own part's values).
  const KernelPlan wide = plan_of(seed(R"(
input X: f16[4, 2, 4096]
input Y: f16[4, 1, 4096]
A = rms_norm(X, eps=1e-06)
B = rms_norm(Y, eps=1e-06)
output A, B
)",
                                       1));
  ASSERT_TRUE(wide.rowwise) << rowwise_layout(wide).error().message;
  EXPECT_TRUE(wide.rowwise_layout.block_rows);
  EXPECT_EQ(wide.rowwise_layout.parts.size(), 2u);
  EXPECT_EQ(wide.rowwise_layout.rows, 3);
  EXPECT_EQ(wide.scratch_bytes, 2 * (wide.threads / 32) * 3 * 4);
}

// What cannot be gathered stays on the shared-memory path: a slice of a computed row (its
// other columns belong to other threads), a concat along another dim than the last.
TEST(RowwisePlan, WhatIsNotGathered) {
  const KernelGraph computed = seed(R"(
input X: f16[8, 64]
input Y: f16[8, 64]
S = add(X, Y)
O = concat(slice(S, -1, 32, 64), slice(S, -1, 0, 32), dim=-1)
output O
)",
                                    1);
  const KernelPlan c = plan_of(computed);
  EXPECT_FALSE(c.rowwise);
  EXPECT_NE(rowwise_layout(c).error().message.find("slice of a computed row"), std::string::npos)
      << rowwise_layout(c).error().message;
  const KernelGraph rows = seed(R"(
input X: f16[8, 4, 64]
O = concat(slice(X, 1, 2, 4), slice(X, 1, 0, 2), dim=1)
output O
)",
                                1);
  const KernelPlan r = plan_of(rows);
  EXPECT_FALSE(r.rowwise);
  EXPECT_FALSE(rowwise_layout(r).ok());
}

// The emitted code: no shared-memory tiles; the rotate-half concat loads the input again once
// per chunk, at the column of the chunk's half (picked without a branch), negated by a
// multiplier picked likewise; a contiguous tile is addressed by the chunk's flat index, and
// broadcast inputs without the dims they broadcast. No row reductions: one guard per chunk
// around every op, one chunk's values at a time, nothing zero-filled.
TEST(RowwisePlan, EmittedCodeGathersAtTheRotatedColumns) {
  auto src = emit_cuda(seed(rotary("f16", 16, 32, 128), 1));
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string& s = *src;
  EXPECT_NE(s.find("rowwise: each thread owns chunks c = tid + k * 512"), std::string::npos);
  EXPECT_NE(s.find("concat, gathered per chunk from one load of"), std::string::npos);
  EXPECT_NE(s.find("const int from0 = col < 64 ? 64 : -64;"), std::string::npos);
  EXPECT_NE(s.find("gin0 + (bx * 4096 + (utid + k * 512) * 8 + from0)"), std::string::npos);
  EXPECT_NE(s.find("const float scale0 = col < 64 ? -1.0f : 1.0f;"), std::string::npos);
  EXPECT_EQ(s.find("if (col <"), std::string::npos);
  // Q [16, 32, 128] and the output: the chunk's flat index.
  EXPECT_NE(s.find("gin0 + (bx * 4096 + (utid + k * 512) * 8)"), std::string::npos);
  EXPECT_NE(s.find("gout0 + (bx * 4096 + (utid + k * 512) * 8)"), std::string::npos);
  // cos [16, 1, 128]: block offset bx · 128, column only within the block.
  EXPECT_NE(s.find("gin1 + (bx * 128 + ((utid + k * 512) * 8) % 128)"), std::string::npos);
  EXPECT_EQ(s.find("__syncthreads"), std::string::npos);
  EXPECT_NE(s.find("chunk by chunk"), std::string::npos);
  EXPECT_NE(s.find("float x0[8];"), std::string::npos);
  EXPECT_EQ(s.find("= {};"), std::string::npos);
}

// Concats that are not one input's slices keep a guarded gather per operand: a concat of two
// inputs, and one of a slice times another input; a concat of one input's slices through a
// unary op other than mul_scalar picks the parts' values without a branch.
TEST(RowwisePlan, EmittedConcatGathersByTheirOperands) {
  auto two = emit_cuda(seed(R"(
input A: f16[8, 4, 32]
input B: f16[8, 4, 32]
O = add(concat(slice(A, -1, 0, 16), slice(B, -1, 16, 32), dim=-1), A)
output O
)",
                            1));
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_NE(two->find("if (col < 16)"), std::string::npos);
  EXPECT_NE(two->find("if (col >= 16)"), std::string::npos);
  EXPECT_EQ(two->find("from one load of"), std::string::npos);
  auto scaled = emit_cuda(seed(R"(
input A: f16[8, 4, 32]
input S: f16[8, 4, 16]
O = concat(mul(slice(A, -1, 16, 32), S), slice(A, -1, 0, 16), dim=-1)
output O
)",
                               1));
  ASSERT_TRUE(scaled.ok()) << scaled.error().message;
  EXPECT_NE(scaled->find("if (col < 16)"), std::string::npos);
  EXPECT_EQ(scaled->find("from one load of"), std::string::npos);
  auto unary = emit_cuda(seed(R"(
input A: f16[8, 4, 32]
O = concat(exp(slice(A, -1, 16, 32)), slice(A, -1, 0, 16), dim=-1)
output O
)",
                              1));
  ASSERT_TRUE(unary.ok()) << unary.error().message;
  EXPECT_NE(unary->find("from one load of"), std::string::npos);
  EXPECT_NE(unary->find("const int from0 = col < 16 ? 16 : -16;"), std::string::npos);
  EXPECT_NE(unary->find("col < 16 ? strata_rt::op_exp(g0[j]) : g0[j]"), std::string::npos);
  EXPECT_EQ(unary->find("if (col <"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
