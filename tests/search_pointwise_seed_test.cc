// Pointwise seeds (src/search/pointwise_seed.h, docs/search.md "Pointwise seeds"): the one
// candidate built directly for programs of elementwise work, proved equivalent by the
// verifier, and refused where its kernels would need other blocks' rows.
#include <gtest/gtest.h>

#include "search/pointwise_seed.h"
#include "strata/search/search.h"
#include "strata/search/search_report.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"
#include "support/pointwise_programs.h"
#include "support/search_config.h"

namespace strata::testing {
namespace {

/// Blocks of one wave on the GPUs the search targets by default (132 SMs).
constexpr int64_t kWave = 132;

std::vector<KernelGraph> seeds_of(const char* program) {
  return search::pointwise_seeds(parse(program), kWave);
}

int customized_kernels(const KernelGraph& g) {
  int n = 0;
  for (const KernelOp& op : g.ops()) n += op.kind == OpKind::Customized;
  return n;
}

void expect_proved(const KernelGraph& program, const KernelGraph& seed) {
  auto v = verify_equivalent(program, seed, VerifyOptions{});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->equivalent) << v->detail;
  EXPECT_LE(v->log2_bound, -60.0);
}

TEST(PointwiseSeed, RotaryQAndKShareOneKernel) {
  KernelGraph p = parse(kRotaryProgram);
  auto seeds = search::pointwise_seeds(p, kWave);
  ASSERT_EQ(seeds.size(), 1u);  // 6 tokens: one row per block only
  // Qr [6,4,32] and Kr [6,2,32]: one split extent, one kernel with both outputs.
  EXPECT_EQ(customized_kernels(seeds[0]), 1);
  for (const KernelOp& op : seeds[0].ops())
    if (op.kind == OpKind::Customized) {
      EXPECT_EQ(op.body->grid().x, 6);  // split over tokens
      EXPECT_EQ(op.outputs.size(), 2u);
    }
  expect_proved(p, seeds[0]);
}

// Rows longer than 2048 elements with nothing reduced along them are cut into column chunks
// (a second grid axis): the largest divisor of the row that is at most 2048 and a multiple of 8.
TEST(PointwiseSeed, LongRowsAreCutIntoColumnChunks) {
  auto only_kernel = [](const KernelGraph& seed) -> const KernelOp* {
    for (const KernelOp& op : seed.ops())
      if (op.kind == OpKind::Customized) return &op;
    return nullptr;
  };
  KernelGraph swiglu = parse(kChunkedSwigluProgram);
  auto seeds = search::pointwise_seeds(swiglu, kWave);
  ASSERT_EQ(seeds.size(), 1u);
  const KernelOp* k = only_kernel(seeds[0]);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->body->grid().x, 4);
  EXPECT_EQ(k->body->grid().y, 3);
  const BlockGraph& b = *k->body;
  EXPECT_EQ(b.tensor(b.op(b.input_op(0)).output).shape, Shape({1, 1536}));
  EXPECT_EQ(b.op(b.input_op(2)).attrs.imap[1], 0);  // G: its only dim, chunked
  EXPECT_EQ(b.op(b.input_op(3)).attrs.imap[1], kReplicate);  // S: one column
  EXPECT_EQ(b.op(b.output_op(0)).attrs.omap[1], 1);
  expect_proved(swiglu, seeds[0]);
  // Short rows, a norm along the row, and a row with no such divisor keep one block per row.
  for (const char* text : {"input A: f16[4, 2048]\nH = silu(A)\noutput H\n",
                           "input A: f16[4, 4608]\nH = rms_norm(A)\noutput H\n",
                           "input A: f16[4, 4099]\nH = silu(A)\noutput H\n"}) {
    auto one = search::pointwise_seeds(parse(text), kWave);
    ASSERT_EQ(one.size(), 1u) << text;
    const KernelOp* kk = only_kernel(one[0]);
    ASSERT_NE(kk, nullptr) << text;
    EXPECT_EQ(kk->body->grid().y, 1) << text;
  }
}

TEST(PointwiseSeed, OutputsOfOtherSplitExtentsGetTheirOwnKernels) {
  // [6, 16] and [4, 16] split over 6 and 4 rows: two kernels.
  KernelGraph p = parse(R"(
input X: f16[6, 16]
input Y: f16[4, 16]
input G: f16[16]
A = mul(X, G)
B = exp(mul(Y, G))
output A, B
)");
  auto seeds = search::pointwise_seeds(p, 1);
  ASSERT_FALSE(seeds.empty());
  EXPECT_EQ(customized_kernels(seeds[0]), 2);
  expect_proved(p, seeds[0]);
}

TEST(PointwiseSeed, ResidualAndNormShareOneKernelOverManyRows) {
  // Two outputs of one shape: one kernel, one block per row (more rows than the search's
  // grid policy offers), RMSNorm over the unsplit last dim.
  KernelGraph p = parse(residual_norm_program(300, 40));
  auto seeds = search::pointwise_seeds(p, kWave);
  // 1 and 2 rows per block (300 / 4 = 75 blocks: fewer than a wave); each proved.
  ASSERT_EQ(seeds.size(), 2u);
  const int blocks[] = {300, 150};
  for (size_t i = 0; i < seeds.size(); ++i) {
    EXPECT_EQ(customized_kernels(seeds[i]), 1);
    for (const KernelOp& op : seeds[i].ops())
      if (op.kind == OpKind::Customized) EXPECT_EQ(op.body->grid().x, blocks[i]);
    expect_proved(p, seeds[i]);
  }
}

// The search offers the seed, verifies it and marks it in the ranking and the result
// document ("derived", which `strata profile --top K` measures beside the top K).
TEST(PointwiseSeed, TheSearchRanksTheProvedSeed) {
  KernelGraph p = parse(kRotaryProgram);
  SearchConfig config = search_config("pointwise-seed", "rope").with_time_limit(6);
  auto r = superoptimize(p, config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  int seeds = 0;
  for (const Candidate& c : r->ranked) {
    if (c.derived != "pointwise_seed") continue;
    ++seeds;
    EXPECT_TRUE(c.verification.equivalent);
    EXPECT_EQ(customized_kernels(c.graph), 1);
  }
  EXPECT_EQ(seeds, 1);  // 6 tokens: one seed
  auto target = Target::by_name(config.target);
  ASSERT_TRUE(target.ok());
  auto back = search_result_from_json(search_result_to_json(*r, config), *target);
  ASSERT_TRUE(back.ok()) << back.error().message;
  int marked = 0;
  for (const Candidate& c : back->ranked) marked += c.derived == "pointwise_seed";
  EXPECT_EQ(marked, 1);
}

TEST(PointwiseSeed, RefusedWhereBlocksWouldNeedOtherRows) {
  // A matmul is not elementwise work.
  EXPECT_TRUE(seeds_of(R"(
input A: f16[8, 16]
input B: f16[16, 16]
C = add(matmul(A, B), A)
output C
)")
                  .empty());
  // A norm, a slice or a concat along the split dim (the first non-last dim).
  EXPECT_TRUE(seeds_of(R"(
input X: f16[8, 16]
O = rms_norm(X, dim=0, eps=1e-06)
output O
)")
                  .empty());
  EXPECT_TRUE(seeds_of(R"(
input X: f16[8, 16]
O = concat(slice(X, 0, 4, 8), slice(X, 0, 0, 4), dim=0)
output O
)")
                  .empty());
  // An input of extent 1 along the split dim is replicated to every block.
  auto seeds = seeds_of(R"(
input X: f16[8, 16]
input B: f16[1, 16]
O = sub(X, B)
output O
)");
  ASSERT_EQ(seeds.size(), 1u);
  expect_proved(parse(R"(
input X: f16[8, 16]
input B: f16[1, 16]
O = sub(X, B)
output O
)"),
                seeds[0]);
}

}  // namespace
}  // namespace strata::testing
