// Packed outputs (packed_outputs.h, docs/codegen.md "Packed outputs"): which kernel tensors are
// packed, the layout the generated code reports for every output, the launcher's check of the
// caller's pointers with its fallback copies, and the cost model's agreement (a packed slice is
// no kernel). The results on the CPU emulator are in codegen_library_matmul_test.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "strata/codegen/cuda_emitter.h"
#include "strata/cost/cost_model.h"
#include "strata/opt/output_placement.h"
#include "strata/opt/packed_outputs.h"
#include "support/parse.h"

namespace strata::testing {
namespace {

/// A fused QKV projection of [64, 128] by [128, 96] whose outputs are the column slices `parts`
/// (start, end) of the product, then `extra` program lines.
std::string sliced_qkv(const std::vector<std::pair<int, int>>& parts, const std::string& extra = "",
                       const std::string& outputs = "") {
  std::string text = "input X: f16[64, 128]\ninput W: f16[128, 96]\nQKV = matmul(X, W)\n";
  std::string names;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string n = "P" + std::to_string(i);
    text += n + " = slice(QKV, -1, " + std::to_string(parts[i].first) + ", " +
            std::to_string(parts[i].second) + ")\n";
    names += (names.empty() ? "" : ", ") + n;
  }
  return text + extra + "output " + (outputs.empty() ? names : outputs) + "\n";
}

std::optional<PackedOutput> packing_of(const KernelGraph& g, const std::string& name) {
  const auto views = plan_kernel_views(g);
  const auto packed = plan_packed_outputs(g, views, plan_output_routes(g, views));
  for (size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensor_name(static_cast<int>(t)) == name) return packed[t];
  ADD_FAILURE() << "no tensor " << name;
  return std::nullopt;
}

TEST(PackedOutputs, ColumnSlicesOfAProductArePacked) {
  const KernelGraph g = parse(sliced_qkv({{64, 80}, {0, 64}, {80, 96}}));  // out of order
  const std::optional<PackedOutput> p = packing_of(g, "QKV");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->dim, 1);
  ASSERT_EQ(p->parts.size(), 3u);
  EXPECT_EQ(p->parts[0].start, 0);  // ascending
  EXPECT_EQ(p->parts[0].output, 1);
  EXPECT_EQ(p->parts[2].end, 96);
  // The layouts: output 1 (columns 0..64) is the base and allocates the whole product.
  const auto views = plan_kernel_views(g);
  std::vector<std::optional<PackedOutput>> packed =
      plan_packed_outputs(g, views, plan_output_routes(g, views));
  const std::vector<OutputLayout> l = output_layouts(g, packed);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[1].base, 1);
  EXPECT_EQ(l[1].offset, 0);
  EXPECT_EQ(l[1].alloc, 64 * 96);
  EXPECT_EQ(l[0].base, 1);
  EXPECT_EQ(l[0].offset, 64);
  EXPECT_EQ(l[0].alloc, 0);
  EXPECT_EQ(l[2].offset, 80);
  EXPECT_EQ(l[0].strides, (std::vector<int64_t>{96, 1}));
  int slices = 0;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) slices += is_packed_slice(g, packed, i);
  EXPECT_EQ(slices, 3);
}

TEST(PackedOutputs, RowSlicesArePackedWithTheirOffsets) {
  const KernelGraph g = parse(
      "input X: f16[64, 128]\ninput W: f16[128, 96]\nY = matmul(X, W)\n"
      "A = slice(Y, 0, 0, 16)\nB = slice(Y, 0, 16, 64)\noutput B, A\n");
  const std::optional<PackedOutput> p = packing_of(g, "Y");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->dim, 0);
  const auto views = plan_kernel_views(g);
  const std::vector<OutputLayout> l =
      output_layouts(g, plan_packed_outputs(g, views, plan_output_routes(g, views)));
  EXPECT_EQ(l[1].base, 1);  // A starts the allocation
  EXPECT_EQ(l[0].base, 1);
  EXPECT_EQ(l[0].offset, 16 * 96);
  EXPECT_EQ(l[0].strides, (std::vector<int64_t>{96, 1}));  // contiguous rows either way
}

TEST(PackedOutputs, WhatIsNotPacked) {
  // Not a partition: a gap, an overlap, short of the end.
  EXPECT_FALSE(packing_of(parse(sliced_qkv({{0, 64}, {72, 96}})), "QKV").has_value());
  EXPECT_FALSE(packing_of(parse(sliced_qkv({{0, 72}, {64, 96}})), "QKV").has_value());
  EXPECT_FALSE(packing_of(parse(sliced_qkv({{0, 64}, {64, 80}})), "QKV").has_value());
  // A part read by another op; a part that is no output; the product itself an output.
  EXPECT_FALSE(packing_of(parse(sliced_qkv({{0, 64}, {64, 96}}, "E = exp(P0)\n", "P0, P1, E")),
                          "QKV")
                   .has_value());
  EXPECT_FALSE(
      packing_of(parse(sliced_qkv({{0, 64}, {64, 96}}, "E = exp(P0)\n", "E, P1")), "QKV")
          .has_value());
  EXPECT_FALSE(
      packing_of(parse(sliced_qkv({{0, 64}, {64, 96}}, "", "P0, P1, QKV")), "QKV").has_value());
  // Slices along two dims.
  EXPECT_FALSE(packing_of(parse("input X: f16[64, 128]\ninput W: f16[128, 96]\n"
                                "Y = matmul(X, W)\nA = slice(Y, 0, 0, 64)\n"
                                "B = slice(Y, 1, 0, 96)\noutput A, B\n"),
                          "Y")
                   .has_value());
  // A graph input is never packed.
  EXPECT_FALSE(packing_of(parse("input X: f16[64, 96]\nA = slice(X, 1, 0, 32)\n"
                                "B = slice(X, 1, 32, 96)\noutput A, B\n"),
                          "X")
                   .has_value());
}

TEST(PackedOutputs, TheLauncherChecksThePointersAndFallsBack) {
  const KernelGraph g = parse(sliced_qkv({{0, 64}, {64, 80}, {80, 96}}));
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string& c = src->code;
  // K lies 64 elements (128 bytes) after Q, V 80 (160 bytes).
  EXPECT_NE(c.find("static_cast<const char*>(outputs[1]) == static_cast<const char*>(outputs[0]) "
                   "+ 128"),
            std::string::npos)
      << c;
  EXPECT_NE(c.find("outputs[2]) == static_cast<const char*>(outputs[0]) + 160"), std::string::npos);
  EXPECT_NE(c.find("packed2 ? static_cast<__half*>(outputs[0])"), std::string::npos);
  // The copies run after everything else, on the caller's stream, only when not packed: no
  // side streams for them.
  const size_t branch = c.find("if (!packed2)");
  ASSERT_NE(branch, std::string::npos);
  EXPECT_LT(c.find("gemm_strided_batched"), branch);
  EXPECT_EQ(c.find("StreamFork"), std::string::npos);
  EXPECT_EQ(src->launch_accesses.size(), 1u);  // the copies are not in the launch plan
  // The layout queries and their table.
  EXPECT_NE(c.find("extern \"C\" long long strata_output_alloc(int i)"), std::string::npos);
  EXPECT_NE(c.find("{0, 64, {96, 1, 1, 1}, 0},"), std::string::npos);
  EXPECT_NE(c.find("\"layout\":{\"base\":0,\"offset\":80"), std::string::npos);
  ASSERT_EQ(src->output_layouts.size(), 3u);
  EXPECT_EQ(src->output_layouts[0].alloc, 64 * 96);
  // Without packing every output reports the dense layout of its own.
  const KernelGraph plain = parse(sliced_qkv({{0, 64}, {64, 96}}, "E = exp(P0)\n", "E, P1"));
  auto dense = emit_cuda_source(plain);
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  EXPECT_EQ(dense->code.find("packed"), std::string::npos);
  EXPECT_EQ(dense->output_layouts[1].base, 1);
  EXPECT_EQ(dense->output_layouts[1].alloc, 64 * 32);
  EXPECT_EQ(dense->code.find("\"layout\""), std::string::npos);
}

TEST(PackedOutputs, TheCostModelCountsNoCopies) {
  const KernelGraph packed = parse(sliced_qkv({{0, 64}, {64, 80}, {80, 96}}));
  const KernelGraph copied =
      parse(sliced_qkv({{0, 64}, {64, 80}, {80, 96}}, "E = exp(P0)\n", "E, P1, P2"));
  const Target t = *Target::by_name("h100");
  const GraphCost a = estimate_cost(packed, t);
  const GraphCost b = estimate_cost(copied, t);
  ASSERT_EQ(a.kernels.size(), 1u);  // the matmul alone
  EXPECT_GE(b.kernels.size(), 4u);  // the matmul, three copies, the exp
  EXPECT_LT(a.predicted_us, b.predicted_us);
}

// An intermediate stored in f32 (--f32-intermediates) is not packed with its f16 outputs: the
// slices are copies that round, launched whatever the caller's pointers. The cost model, given
// the same storage types, decides through the same function (output_placement.h) and predicts
// the copies; it used to predict the packed case, one kernel, whatever the emitter stored.
TEST(PackedOutputs, AWidenedIntermediateIsPackedByNeitherSide) {
  const KernelGraph g = parse(sliced_qkv({{0, 64}, {64, 80}, {80, 96}}));
  EmitOptions o;
  o.f32_intermediates = true;
  auto src = emit_cuda_source(g, o);
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ(src->code.find("packed"), std::string::npos);
  ASSERT_EQ(src->output_layouts.size(), 3u);
  EXPECT_EQ(src->output_layouts[1].base, 1);
  EXPECT_EQ(src->output_layouts[1].alloc, 64 * 16);
  EXPECT_EQ(src->launch_accesses.size(), 4u);  // the matmul and three copies, all launched
  const Target t = *Target::by_name("h100");
  CostOptions widened;
  widened.f32_intermediates = true;
  const GraphCost a = estimate_cost(g, t, widened);
  EXPECT_EQ(a.kernels.size(), src->launch_accesses.size());
  EXPECT_GT(a.predicted_us, estimate_cost(g, t).predicted_us);
  // The one decision: stored types, and neither a route nor a packing of the product.
  const OutputPlacement p = plan_output_placement(g, plan_kernel_views(g), true);
  int qkv = -1;
  for (int i = 0; i < static_cast<int>(g.tensors().size()); ++i)
    if (g.tensor_name(i) == "QKV") qkv = i;
  ASSERT_GE(qkv, 0);
  EXPECT_EQ(p.stored[qkv], DType::f32);
  EXPECT_FALSE(p.packed[qkv].has_value());
  EXPECT_TRUE(plan_output_placement(g, plan_kernel_views(g), false).packed[qkv].has_value());
}

}  // namespace
}  // namespace strata::testing
