// Library epilogues (library_epilogues.h, docs/codegen.md "Library epilogues"): which ops after a
// cuBLAS matmul the call absorbs — a bias along the columns, then relu or gelu — and every
// condition that keeps them kernels; the cost model charges the call alone, and the library
// forms of the search leave the absorbed ops predefined.
#include <gtest/gtest.h>

#include "strata/cost/cost_model.h"
#include "strata/opt/library_epilogues.h"
#include "strata/opt/matmul_lowering.h"
#include "support/parse.h"

namespace strata::testing {
namespace {

/// The epilogues of `g` with every matmul that cuBLAS can run taken as a library call.
std::vector<std::optional<LibraryEpilogue>> plan(const KernelGraph& g) {
  return plan_library_epilogues(
      g,
      [&](int i) {
        const KernelOp& op = g.op(i);
        const KernelTensor &a = g.tensor(op.inputs[0]), &b = g.tensor(op.inputs[1]);
        return library_matmul_supported(a.shape, b.shape, a.dtype, b.dtype,
                                        g.tensor(op.outputs[0]).dtype);
      },
      {});
}

/// The one epilogue of `g` (the first matmul's), or nullopt.
std::optional<LibraryEpilogue> only(const KernelGraph& g) {
  for (const auto& e : plan(g))
    if (e) return e;
  return std::nullopt;
}

int op_of(const KernelGraph& g, const std::string& tensor) {
  return g.tensor(g.find_tensor(tensor)).producer;
}

TEST(LibraryEpilogues, BiasThenActivation) {
  const KernelGraph g = parse(R"(input X: f16[64, 128]
input W: f16[128, 96]
input B: f16[96]
Y = matmul(X, W)
Z = add(Y, B)
O = gelu(Z)
output O
)");
  const auto e = only(g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->matmul, op_of(g, "Y"));
  EXPECT_EQ(e->bias, g.find_tensor("B"));
  EXPECT_EQ(e->activation, EpilogueActivation::Gelu);
  EXPECT_EQ(e->absorbed, (std::vector<int>{op_of(g, "Z"), op_of(g, "O")}));
  EXPECT_EQ(e->result, g.find_tensor("O"));
  const auto all = plan(g);
  EXPECT_TRUE(is_absorbed_epilogue(all, op_of(g, "Z")));
  EXPECT_FALSE(is_absorbed_epilogue(all, op_of(g, "Y")));
  EXPECT_TRUE(is_epilogue_intermediate(all, g, g.find_tensor("Y")));
  EXPECT_TRUE(is_epilogue_intermediate(all, g, g.find_tensor("Z")));
  EXPECT_FALSE(is_epilogue_intermediate(all, g, g.find_tensor("O")));
}

TEST(LibraryEpilogues, BiasShapesAndOperandOrder) {
  // The bias as [1, N] and as the add's first operand; batched with a shared [1, 1, N] bias;
  // relu alone.
  for (const char* text :
       {"input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[1, 96]\n"
        "Y = matmul(X, W)\nO = add(B, Y)\noutput O\n",
        "input X: bf16[2, 64, 128]\ninput W: bf16[2, 128, 96]\n"
        "input B: bf16[1, 1, 96]\nY = matmul(X, W)\nO = add(Y, B)\noutput O\n"}) {
    const KernelGraph g = parse(text);
    const auto e = only(g);
    ASSERT_TRUE(e) << text;
    EXPECT_EQ(e->bias, g.find_tensor("B")) << text;
    EXPECT_EQ(e->activation, EpilogueActivation::None) << text;
    EXPECT_EQ(e->result, g.find_tensor("O")) << text;
  }
  const KernelGraph relu = parse(
      "input X: f16[64, 128]\ninput W: f16[128, 96]\nY = matmul(X, W)\nO = relu(Y)\n"
      "output O\n");
  const auto e = only(relu);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->bias, -1);
  EXPECT_EQ(e->activation, EpilogueActivation::Relu);
  EXPECT_EQ(e->result, relu.find_tensor("O"));
}

TEST(LibraryEpilogues, WhatStaysAKernel) {
  const char* cases[] = {
      // a bias along the rows, a full matrix, a bias of another type
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[64, 1]\n"
      "Y = matmul(X, W)\nO = add(Y, B)\noutput O\n",
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput R: f16[64, 96]\n"
      "Y = matmul(X, W)\nO = add(Y, R)\noutput O\n",
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f32[96]\n"
      "Y = matmul(X, W)\nO = add(Y, B)\noutput O\n",
      // the product is an output, or read twice
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[96]\n"
      "Y = matmul(X, W)\nO = add(Y, B)\noutput O\noutput Y\n",
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[96]\n"
      "Y = matmul(X, W)\nO = add(Y, B)\nP = exp(Y)\noutput O\noutput P\n",
      // another elementwise op, and a matmul cuBLAS does not run (f32)
      "input X: f16[64, 128]\ninput W: f16[128, 96]\nY = matmul(X, W)\nO = silu(Y)\noutput O\n",
      "input X: f32[64, 128]\ninput W: f32[128, 96]\ninput B: f32[96]\n"
      "Y = matmul(X, W)\nO = add(Y, B)\noutput O\n",
      // the bias is computed after the product
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput C: f16[96]\n"
      "Y = matmul(X, W)\nB = exp(C)\nO = add(Y, B)\noutput O\n",
  };
  for (const char* text : cases) EXPECT_FALSE(only(parse(text))) << text;
  // An absorbed bias whose result is read twice still absorbs the add, not the activation.
  const KernelGraph g = parse(
      "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[96]\nY = matmul(X, W)\n"
      "Z = add(Y, B)\nO = gelu(Z)\noutput O\noutput Z\n");
  const auto e = only(g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->activation, EpilogueActivation::None);
  EXPECT_EQ(e->result, g.find_tensor("Z"));
}

TEST(LibraryEpilogues, CostModelChargesTheCallAlone) {
  const KernelGraph plain =
      parse("input X: f16[512, 1024]\ninput W: f16[1024, 3072]\nY = matmul(X, W)\noutput Y\n");
  const KernelGraph fused = parse(
      "input X: f16[512, 1024]\ninput W: f16[1024, 3072]\ninput B: f16[3072]\n"
      "Y = matmul(X, W)\nZ = add(Y, B)\nO = gelu(Z)\noutput O\n");
  const Target t = *Target::by_name("h200");
  const GraphCost p = estimate_cost(plain, t);
  const GraphCost f = estimate_cost(fused, t);
  ASSERT_EQ(f.kernels.size(), 1u);  // the add and the gelu are no kernels
  EXPECT_TRUE(f.kernels[0].library);
  EXPECT_EQ(f.kernels[0].load_bytes, p.kernels[0].load_bytes + 3072 * 2);
  EXPECT_NEAR(f.predicted_us, p.predicted_us, 0.01);
  CostOptions kernels;
  kernels.library_matmul = false;  // generated kernels: the epilogue ops are kernels again
  EXPECT_EQ(estimate_cost(fused, t, kernels).kernels.size(), 3u);
}

}  // namespace
}  // namespace strata::testing
