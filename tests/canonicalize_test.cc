// Tests of the program's canonical form (include/strata/opt/canonicalize.h, docs/search.md
// "Canonicalization"): each rule rewrites its patterns at several ranks, dims and extents into
// an equivalent program (checked by the verifier), leaves lookalikes and shared intermediates
// alone, and keeps the program's interface.
#include "strata/opt/canonicalize.h"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <string_view>

#include "strata/frontend/program_parser.h"
#include "strata/ir/graph_print.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"

namespace strata {
namespace {

using testing::parse;

/// The alternative-form rule of the tests below (canonicalize_program applies it on request).
constexpr std::string_view kGainRule[] = {"gain_across_matmul"};
constexpr std::span<const std::string_view> kGain = kGainRule;

CanonicalProgram canonical(const KernelGraph& g, std::span<const std::string_view> alt = {}) {
  auto c = canonicalize_program(g, alt);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() ? std::move(c).value() : CanonicalProgram{};
}

bool equivalent(const KernelGraph& a, const KernelGraph& b) {
  VerifyOptions o;
  o.threads = 2;
  auto v = verify_equivalent(a, b, o);
  EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.error().message);
  return v.ok() && v->equivalent;
}

/// `program` canonicalizes to exactly `expected` (same ops in the same order), by the rule
/// counts `rewrites`, and the verifier proves the two programs equivalent.
void expect_rewrite(const std::string& program, const std::string& expected,
                    const std::map<std::string, int>& rewrites,
                    std::span<const std::string_view> alt = {}) {
  const KernelGraph p = parse(program), e = parse(expected);
  const CanonicalProgram c = canonical(p, alt);
  EXPECT_TRUE(c.program.structurally_equal(e)) << "program:\n"
                                               << program << "canonical:\n"
                                               << format_graph(c.program) << "expected:\n"
                                               << format_graph(e);
  EXPECT_EQ(c.rewrites, rewrites) << program;
  EXPECT_TRUE(equivalent(p, c.program)) << program;
}

/// `program` is left exactly as it is.
void expect_unchanged(const std::string& program, std::span<const std::string_view> alt = {}) {
  const KernelGraph p = parse(program);
  const CanonicalProgram c = canonical(p, alt);
  EXPECT_FALSE(c.changed()) << program << "rewritten to:\n" << format_graph(c.program);
  EXPECT_TRUE(c.program.structurally_equal(p)) << program;
}

/// The same with the alternative-form rule gain_across_matmul applied too.
void expect_gain_rewrite(const std::string& program, const std::string& expected,
                         const std::map<std::string, int>& rewrites) {
  expect_rewrite(program, expected, rewrites, kGain);
}
void expect_gain_unchanged(const std::string& program) { expect_unchanged(program, kGain); }

// ---- RMSNorm ----------------------------------------------------------------------------

TEST(Canonicalize, DivBySqrtOfMeanSquareIsRmsNorm) {
  // Rank 2, last dim, with eps.
  expect_rewrite(
      "input X: f16[8, 4096]\n"
      "O = div(X, sqrt(add_scalar(mean(square(X), dim=1), 1e-5)))\noutput O\n",
      "input X: f16[8, 4096]\nO = rms_norm(X, dim=1, eps=1e-5)\noutput O\n", {{"rms_norm_div", 1}});
  // Rank 1 without eps, x² written as mul(x, x).
  expect_rewrite("input X: f32[100]\nO = div(X, sqrt(mean(mul(X, X), dim=0)))\noutput O\n",
                 "input X: f32[100]\nO = rms_norm(X, dim=0)\noutput O\n", {{"rms_norm_div", 1}});
  // Rank 4, a middle dim, odd extents.
  expect_rewrite(
      "input X: bf16[2, 3, 7, 5]\n"
      "O = div(X, sqrt(add_scalar(mean(square(X), dim=2), 0.25)))\noutput O\n",
      "input X: bf16[2, 3, 7, 5]\nO = rms_norm(X, dim=2, eps=0.25)\noutput O\n",
      {{"rms_norm_div", 1}});
}

TEST(Canonicalize, MulByReciprocalRootIsRmsNormTimesTheNumerator) {
  // The capture's rsqrt: div(C, sqrt(v)) with C an input bound to 1; both operand orders.
  expect_rewrite(
      "input X: f16[8, 4096]\ninput C: f16[1]\n"
      "O = mul(X, div(C, sqrt(add_scalar(mean(square(X), dim=-1), 1e-6))))\noutput O\n",
      "input X: f16[8, 4096]\ninput C: f16[1]\nO = mul(rms_norm(X, eps=1e-6), C)\noutput O\n",
      {{"rms_norm_mul", 1}});
  expect_rewrite(
      "input X: f32[3, 4, 64]\ninput C: f16[1]\n"
      "O = mul(div(C, sqrt(mean(square(X), dim=2))), X)\noutput O\n",
      "input X: f32[3, 4, 64]\ninput C: f16[1]\nO = mul(C, rms_norm(X))\noutput O\n",
      {{"rms_norm_mul", 1}});
  // A gain as the numerator, then a matmul (RMSNorm and linear layer of a decoder).
  expect_rewrite(
      "input X: f16[2, 256]\ninput G: f16[256]\ninput W: f16[256, 128]\n"
      "N = mul(X, div(G, sqrt(add_scalar(mean(square(X), dim=1), 1e-5))))\n"
      "O = matmul(N, W)\noutput O\n",
      "input X: f16[2, 256]\ninput G: f16[256]\ninput W: f16[256, 128]\n"
      "O = matmul(mul(rms_norm(X, eps=1e-5), G), W)\noutput O\n",
      {{"rms_norm_mul", 1}});
}

TEST(Canonicalize, RmsNormLookalikesStay) {
  const std::string x = "input X: f16[8, 64]\ninput Y: f16[8, 64]\ninput C: f16[1]\n";
  // The square of another tensor.
  expect_unchanged(x + "O = div(X, sqrt(mean(square(Y), dim=1)))\noutput O\n");
  expect_unchanged(x + "O = div(X, sqrt(mean(mul(X, Y), dim=1)))\noutput O\n");
  // Multiplied by another tensor than the one normalized.
  expect_unchanged(x + "O = mul(Y, div(C, sqrt(mean(square(X), dim=1))))\noutput O\n");
  // A sum, another numerator, no sqrt, a negative eps, a scale inside.
  expect_unchanged(x + "O = div(X, sqrt(sum(square(X), dim=1)))\noutput O\n");
  expect_unchanged(x + "O = div(exp(X), sqrt(mean(square(X), dim=1)))\noutput O\n");
  expect_unchanged(x + "O = div(X, add_scalar(mean(square(X), dim=1), 1e-5))\noutput O\n");
  expect_unchanged(x + "O = div(X, sqrt(add_scalar(mean(square(X), dim=1), -1e-5)))\noutput O\n");
  expect_unchanged(x + "O = div(X, sqrt(mul_scalar(mean(square(X), dim=1), 2)))\noutput O\n");
  // The reciprocal root divides instead of multiplying.
  expect_unchanged(x + "O = div(X, div(C, sqrt(mean(square(X), dim=1))))\noutput O\n");
}

TEST(Canonicalize, RmsNormWithSharedIntermediatesStays) {
  const std::string x = "input X: f16[8, 64]\n";
  // The statistic is an output too.
  expect_unchanged(x +
                   "S = add_scalar(mean(square(X), dim=1), 1e-5)\nO = div(X, sqrt(S))\n"
                   "output O, S\n");
  // The root is read twice.
  expect_unchanged(x + "R = sqrt(mean(square(X), dim=1))\nO = add(div(X, R), R)\noutput O\n");
  // The square is read elsewhere.
  expect_unchanged(x +
                   "Q = square(X)\nO = div(X, sqrt(mean(Q, dim=1)))\nP = add(O, Q)\n"
                   "output P\n");
}

// ---- slices -----------------------------------------------------------------------------

TEST(Canonicalize, FusedQkvProjectionBecomesMatmulsOfWeightViews) {
  expect_rewrite(
      "input X: f16[8, 2048]\ninput W: f16[2048, 3072]\n"
      "QKV = matmul(X, W)\n"
      "Q = slice(QKV, 1, 0, 2048)\nK = slice(QKV, 1, 2048, 2560)\nV = slice(QKV, 1, 2560, 3072)\n"
      "output Q, K, V\n",
      "input X: f16[8, 2048]\ninput W: f16[2048, 3072]\n"
      "Q = matmul(X, slice(W, 1, 0, 2048))\nK = matmul(X, slice(W, 1, 2048, 2560))\n"
      "V = matmul(X, slice(W, 1, 2560, 3072))\noutput Q, K, V\n",
      {{"slice_of_matmul", 3}});
}

TEST(Canonicalize, SlicePushdownThroughMatmulRowsAndBatch) {
  // Rows (dim rank−2) slice A; a partial cover still saves work.
  expect_rewrite(
      "input A: f32[6, 5]\ninput B: f32[5, 3]\nO = slice(matmul(A, B), 0, 1, 4)\noutput O\n",
      "input A: f32[6, 5]\ninput B: f32[5, 3]\nO = matmul(slice(A, 0, 1, 4), B)\noutput O\n",
      {{"slice_of_matmul", 1}});
  // Batch dim of a rank-4 matmul: both operands; columns with a negative dim.
  expect_rewrite(
      "input A: f16[2, 4, 6, 5]\ninput B: f16[2, 4, 5, 9]\nP = matmul(A, B)\n"
      "O = slice(P, 1, 1, 3)\nR = slice(P, -1, 2, 9)\noutput O, R\n",
      "input A: f16[2, 4, 6, 5]\ninput B: f16[2, 4, 5, 9]\n"
      "O = matmul(slice(A, 1, 1, 3), slice(B, 1, 1, 3))\nR = matmul(A, slice(B, 3, 2, 9))\n"
      "output O, R\n",
      {{"slice_of_matmul", 2}});
}

TEST(Canonicalize, SliceLookalikesAndSharedMatmulsStay) {
  // The matmul result is read by another op, or is an output.
  expect_unchanged(
      "input X: f16[8, 64]\ninput W: f16[64, 96]\nP = matmul(X, W)\n"
      "Q = slice(P, 1, 0, 32)\nO = exp(P)\noutput Q, O\n");
  expect_unchanged(
      "input X: f16[8, 64]\ninput W: f16[64, 96]\nP = matmul(X, W)\n"
      "Q = slice(P, 1, 0, 32)\noutput Q, P\n");
  // Slices along K (of the operands) are not rewritten.
  expect_unchanged(
      "input X: f16[8, 64]\ninput W: f16[64, 96]\n"
      "O = matmul(slice(X, 1, 0, 32), slice(W, 0, 0, 32))\noutput O\n");
  // A slice of a reduction.
  expect_unchanged("input X: f16[8, 64]\nO = slice(sum(X, dim=1), 0, 0, 4)\noutput O\n");
  // A projection of a computed tensor (RMSNorm, then the fused QKV projection) stays.
  expect_unchanged(
      "input X: f16[4, 64]\ninput G: f16[64]\ninput W: f16[64, 96]\n"
      "P = matmul(mul(rms_norm(X), G), W)\nQ = slice(P, 1, 0, 64)\nK = slice(P, 1, 64, 96)\n"
      "output Q, K\n");
  expect_unchanged(
      "input X: f16[4, 64]\ninput W: f16[64, 96]\ninput B: f16[96]\n"
      "P = add(matmul(exp(X), W), B)\nQ = slice(P, 1, 0, 64)\nK = slice(P, 1, 64, 96)\n"
      "output Q, K\n");
  // Slices that feed more than elementwise ops (attention on the Q, K, V of one projection)
  // stay views of the one matmul.
  expect_unchanged(
      "input X: f16[32, 64]\ninput W: f16[64, 48]\nP = matmul(X, W)\n"
      "Q = slice(P, 1, 0, 16)\nK = slice(P, 1, 16, 32)\nV = slice(P, 1, 32, 48)\n"
      "O = matmul(exp(matmul(Q, transpose(K))), V)\noutput O\n");
  expect_unchanged(
      "input X: f16[8, 64]\ninput W: f16[64, 96]\nP = silu(matmul(X, W))\n"
      "Q = slice(P, 1, 0, 32)\nK = slice(P, 1, 32, 96)\nO = sum(mul_scalar(Q, 2), dim=1)\n"
      "output O, K\n");
}

TEST(Canonicalize, SlicePushdownThroughElementwise) {
  // A biased QKV projection: the bias (rank 1) is sliced with the columns, a [1] bias is not.
  expect_rewrite(
      "input X: f16[4, 64]\ninput W: f16[64, 96]\ninput B: f16[96]\ninput C: f16[1]\n"
      "Y = silu(add(matmul(X, W), B))\nZ = mul(Y, C)\n"
      "Q = slice(Z, 1, 0, 64)\nK = slice(Z, 1, 64, 96)\noutput Q, K\n",
      "input X: f16[4, 64]\ninput W: f16[64, 96]\ninput B: f16[96]\ninput C: f16[1]\n"
      "Q = mul(silu(add(matmul(X, slice(W, 1, 0, 64)), slice(B, 0, 0, 64))), C)\n"
      "K = mul(silu(add(matmul(X, slice(W, 1, 64, 96)), slice(B, 0, 64, 96))), C)\n"
      "output Q, K\n",
      {{"slice_of_elementwise", 6}, {"slice_of_matmul", 2}});
  // Rows of a rank-3 tensor, an operand that broadcasts along them, the same operand twice.
  expect_rewrite(
      "input A: f32[2, 6, 4]\ninput B: f32[1, 4]\n"
      "O = slice(mul(add(A, B), add(A, B)), 1, 2, 5)\noutput O\n",
      "input A: f32[2, 6, 4]\ninput B: f32[1, 4]\n"
      "S = slice(A, 1, 2, 5)\nO = mul(add(S, B), add(S, B))\noutput O\n",
      {{"slice_of_elementwise", 3}});
}

TEST(Canonicalize, SliceIdentities) {
  expect_rewrite("input X: f16[8, 64]\nO = exp(slice(slice(X, 1, 8, 40), 1, 4, 20))\noutput O\n",
                 "input X: f16[8, 64]\nO = exp(slice(X, 1, 12, 28))\noutput O\n",
                 {{"slice_of_slice", 1}});
  expect_rewrite("input X: f16[8, 64]\nO = exp(slice(X, 0, 0, 8))\noutput O\n",
                 "input X: f16[8, 64]\nO = exp(X)\noutput O\n", {{"slice_full", 1}});
  // A full slice that is an output stays (an output must not become an input).
  expect_unchanged("input X: f16[8, 64]\nO = slice(X, 0, 0, 8)\noutput O\n");
}

// ---- other identities -------------------------------------------------------------------

TEST(Canonicalize, ScalarChainsAndTransposePairs) {
  expect_rewrite("input X: f16[4, 8]\nO = exp(transpose(transpose(X)))\noutput O\n",
                 "input X: f16[4, 8]\nO = exp(X)\noutput O\n", {{"transpose_pair", 1}});
  expect_rewrite("input X: f16[4, 8]\nO = mul_scalar(mul_scalar(X, 0.5), -3)\noutput O\n",
                 "input X: f16[4, 8]\nO = mul_scalar(X, -1.5)\noutput O\n",
                 {{"mul_scalar_chain", 1}});
  expect_rewrite("input X: f16[4, 8]\nO = add_scalar(add_scalar(X, 0.5), 0.25)\noutput O\n",
                 "input X: f16[4, 8]\nO = add_scalar(X, 0.75)\noutput O\n",
                 {{"add_scalar_chain", 1}});
  // Products and sums that double cannot hold exactly stay as two ops.
  expect_unchanged("input X: f16[4, 8]\nO = mul_scalar(mul_scalar(X, 0.1), 0.3)\noutput O\n");
  expect_unchanged("input X: f16[4, 8]\nO = add_scalar(add_scalar(X, 0.1), 0.2)\noutput O\n");
  // The inner op is read elsewhere; the inner transpose's result is an output.
  expect_unchanged(
      "input X: f16[4, 8]\nY = mul_scalar(X, 0.5)\nO = mul_scalar(Y, 4)\nP = exp(Y)\n"
      "output O, P\n");
  expect_unchanged("input X: f16[4, 8]\nT = transpose(X)\nO = transpose(T)\noutput O, T\n");
}

// ---- gains across a product ------------------------------------------------------------

TEST(Canonicalize, KGainMovesOntoQSoThatTheKNormFolds) {
  // QK-norm attention scores: both gains go to the Q side, K's norm feeds the product.
  const std::string in =
      "input Q: f16[2, 7, 64]\ninput K: f16[2, 32, 64]\ninput Gq: f16[64]\ninput Gk: f16[64]\n";
  expect_gain_rewrite(in + "Qn = mul(rms_norm(Q, eps=1e-6), Gq)\nKn = mul(rms_norm(K, eps=1e-6), Gk)\n"
                      "S = mul_scalar(matmul(Qn, transpose(Kn)), 0.125)\noutput S\n",
                 in + "Qn = mul(rms_norm(Q, eps=1e-6), Gq)\n"
                      "S = mul_scalar(matmul(mul(Qn, Gk), transpose(rms_norm(K, eps=1e-6))), "
                      "0.125)\noutput S\n",
                 {{"gain_across_matmul", 1}});
  // A computed K: the gain moves all the same.
  expect_gain_rewrite(in + "S = matmul(Q, transpose(mul(rms_norm(exp(K)), Gk)))\noutput S\n",
                 in + "S = matmul(mul(Q, Gk), transpose(rms_norm(exp(K))))\noutput S\n",
                 {{"gain_across_matmul", 1}});
  // The gain first, as [1, 1, D]; A without a gain of its own.
  const std::string in3 =
      "input Q: f16[2, 7, 64]\ninput K: f16[2, 32, 64]\ninput G: f16[1, 1, 64]\n";
  expect_gain_rewrite(in3 + "S = matmul(Q, transpose(mul(G, rms_norm(K))))\noutput S\n",
                 in3 + "S = matmul(mul(Q, G), transpose(rms_norm(K)))\noutput S\n",
                 {{"gain_across_matmul", 1}});
  // B not transposed: a column gain [D, 1] on a norm over B's rows; A gets its transpose.
  const std::string col = "input A: f16[8, 64]\ninput X: f16[64, 16]\ninput G: f16[64, 1]\n";
  expect_gain_rewrite(col + "O = matmul(A, mul(rms_norm(X, dim=0), G))\noutput O\n",
                 col + "O = matmul(mul(A, transpose(G)), rms_norm(X, dim=0))\noutput O\n",
                 {{"gain_across_matmul", 1}});
  // The captured form: the rsqrt's numerator is the gain, rms_norm_mul first makes the norm.
  const std::string cap = "input Q: f16[4, 64]\ninput K: f16[32, 64]\ninput G: f16[64]\n";
  expect_gain_rewrite(cap +
                     "Kn = mul(K, div(G, sqrt(add_scalar(mean(square(K), dim=1), 1e-5))))\n"
                     "S = matmul(Q, transpose(Kn))\noutput S\n",
                 cap + "S = matmul(mul(Q, G), transpose(rms_norm(K, eps=1e-5)))\noutput S\n",
                 {{"rms_norm_mul", 1}, {"gain_across_matmul", 1}});
}

TEST(Canonicalize, GainOnAMovesOntoB) {
  // The mirror: a gain on A's norm moves onto a B no larger than A that is no folding norm;
  // onto B's rows through B's transpose, or as a column ([1, D] transposed) for a plain B.
  const std::string t = "input X: f16[32, 64]\ninput Y: f16[16, 64]\ninput G: f16[64]\n";
  expect_gain_rewrite(t + "O = matmul(mul(rms_norm(X), G), transpose(Y))\noutput O\n",
                 t + "O = matmul(rms_norm(X), transpose(mul(Y, G)))\noutput O\n",
                 {{"gain_across_matmul", 1}});
  const std::string w = "input X: f16[32, 64]\ninput W: f16[64, 16]\ninput G: f16[1, 64]\n";
  expect_gain_rewrite(w + "O = matmul(mul(rms_norm(X), G), W)\noutput O\n",
                 w + "O = matmul(rms_norm(X), mul(W, transpose(G)))\noutput O\n",
                 {{"gain_across_matmul", 1}});
  // A rank-1 gain cannot become a column of a plain B (the IR has no reshape).
  expect_gain_unchanged(
      "input X: f16[32, 64]\ninput W: f16[64, 16]\ninput G: f16[64]\n"
      "O = matmul(mul(rms_norm(X), G), W)\noutput O\n");
  // RMSNorm then a linear layer with a weight larger than the activations: the gain stays on
  // the few rows rather than scaling the weight.
  expect_gain_unchanged(
      "input X: f16[8, 64]\ninput W: f16[64, 16]\ninput G: f16[1, 64]\n"
      "O = matmul(mul(rms_norm(X), G), W)\noutput O\n");
}

TEST(Canonicalize, GainOnBMovesOntoAWhateverTheSizes) {
  // QK-norm at prefill with more query rows than keys: K's gain still moves onto Q (K streams
  // through every row block of a fused kernel; Q is read once per block).
  const std::string in = "input Q: f16[2, 64, 32]\ninput K: f16[2, 16, 32]\n"
                         "input Gq: f16[32]\ninput Gk: f16[32]\n";
  expect_gain_rewrite(
      in + "S = matmul(mul(rms_norm(Q), Gq), transpose(mul(rms_norm(K), Gk)))\noutput S\n",
      in + "S = matmul(mul(mul(rms_norm(Q), Gq), Gk), transpose(rms_norm(K)))\noutput S\n",
      {{"gain_across_matmul", 1}});
}

TEST(Canonicalize, GainLookalikesAndSharedGainsStay) {
  const std::string in =
      "input Q: f16[2, 7, 64]\ninput K: f16[2, 32, 64]\ninput V: f16[2, 32, 64]\n"
      "input G: f16[64]\ninput R: f16[32, 1]\ninput F: f16[2, 1, 64]\ninput H: f16[1, 32, 64]\n";
  // Not along the contraction dim: a gain over K's rows, a per-batch gain, a full tensor.
  expect_gain_unchanged(in + "S = matmul(Q, transpose(mul(rms_norm(K), R)))\noutput S\n");
  expect_gain_unchanged(in + "S = matmul(Q, transpose(mul(rms_norm(K), F)))\noutput S\n");
  expect_gain_unchanged(in + "S = matmul(Q, transpose(mul(rms_norm(K), H)))\noutput S\n");
  // The norm is not over the contraction dim, or there is no norm to fold.
  expect_gain_unchanged(in + "S = matmul(Q, transpose(mul(rms_norm(K, dim=1), G)))\noutput S\n");
  expect_gain_unchanged(in + "S = matmul(Q, transpose(mul(K, G)))\noutput S\n");
  // The other operand already folds: the gain stays where it is.
  expect_gain_unchanged(in + "S = matmul(rms_norm(Q), transpose(mul(rms_norm(K), G)))\noutput S\n");
  // The gained operand has another reader, or is an output (its mul or its transpose).
  expect_gain_unchanged(in +
                   "Kn = mul(rms_norm(K), G)\nS = matmul(Q, transpose(Kn))\n"
                   "O = matmul(S, Kn)\noutput O\n");
  expect_gain_unchanged(in + "Kn = mul(rms_norm(K), G)\nS = matmul(Q, transpose(Kn))\noutput S, Kn\n");
  expect_gain_unchanged(in + "T = transpose(mul(rms_norm(K), G))\nS = matmul(Q, T)\noutput S, T\n");
  // A wrong move (the gain left out of Q) is told apart by the verifier.
  const KernelGraph p =
      parse(in + "S = matmul(mul(rms_norm(Q), G), transpose(mul(rms_norm(K), G)))\noutput S\n");
  EXPECT_TRUE(equivalent(p, canonical(p, kGain).program));
  EXPECT_FALSE(equivalent(
      p, parse(in + "S = matmul(mul(rms_norm(Q), G), transpose(rms_norm(K)))\noutput S\n")));
}

TEST(Canonicalize, GainRuleIsAnAlternativeForm) {
  // Not part of the canonical form: without the rule asked for, QK-norm stays as written.
  const std::string in =
      "input Q: f16[2, 7, 64]\ninput K: f16[2, 32, 64]\ninput Gq: f16[64]\ninput Gk: f16[64]\n"
      "Qn = mul(rms_norm(Q, eps=1e-6), Gq)\nKn = mul(rms_norm(K, eps=1e-6), Gk)\n"
      "S = matmul(Qn, transpose(Kn))\noutput S\n";
  expect_unchanged(in);
  const auto alt = alternative_rule_names();
  ASSERT_EQ(alt, std::vector<std::string_view>{"gain_across_matmul"});
  // The rule fires: one alternative form, named by it, with its rewrites (and the canonical
  // rules' rewrites: the written-out norm of the captured form becomes rms_norm first).
  const KernelGraph p = parse(in);
  auto forms = alternative_forms(p);
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_EQ(forms[0].name, "gain_across_matmul");
  ASSERT_TRUE(forms[0].form.ok());
  EXPECT_EQ(forms[0].form->rewrites, (std::map<std::string, int>{{"gain_across_matmul", 1}}));
  EXPECT_TRUE(equivalent(p, forms[0].form->program));
  const std::string cap =
      "input Q: f16[4, 64]\ninput K: f16[32, 64]\ninput G: f16[64]\n"
      "Kn = mul(K, div(G, sqrt(add_scalar(mean(square(K), dim=1), 1e-5))))\n"
      "S = matmul(Q, transpose(Kn))\noutput S\n";
  forms = alternative_forms(parse(cap));
  ASSERT_EQ(forms.size(), 1u);
  ASSERT_TRUE(forms[0].form.ok());
  EXPECT_EQ(forms[0].form->rewrites,
            (std::map<std::string, int>{{"rms_norm_mul", 1}, {"gain_across_matmul", 1}}));
  // The rule does not fire: no alternative form, whether or not canonical rules fire.
  EXPECT_TRUE(alternative_forms(parse("input X: f16[8, 64]\ninput W: f16[64, 16]\n"
                                      "O = matmul(rms_norm(X), W)\noutput O\n"))
                  .empty());
  EXPECT_TRUE(alternative_forms(parse("input X: f16[8, 64]\n"
                                      "O = div(X, sqrt(mean(square(X), dim=1)))\noutput O\n"))
                  .empty());
  // An unknown alternative is an error, not a silent canonical form.
  const std::string_view bad[] = {"rms_norm_div"};
  EXPECT_FALSE(canonicalize_program(p, bad).ok());
}

// ---- interface --------------------------------------------------------------------------

TEST(Canonicalize, KeepsTheInterfaceNamesAndUnreadTensors) {
  const KernelGraph p = parse(
      "input C: f16[1]\ninput X: f16[8, 64]\ninput U: f16[3]\n"
      "N = mul(X, div(C, sqrt(mean(square(X), dim=1))))\nD = exp(X)\n"
      "O = transpose(transpose(N))\noutput O\n");
  const CanonicalProgram c = canonical(p);
  ASSERT_EQ(c.program.inputs().size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.program.tensor_name(c.program.inputs()[i]), p.tensor_name(p.inputs()[i]));
  ASSERT_EQ(c.program.outputs().size(), 1u);
  EXPECT_EQ(c.program.tensor_name(c.program.outputs()[0]), "O");
  // The unread input U stays an input; the unread tensor D of the program is kept.
  EXPECT_GE(c.program.find_tensor("D"), 0);
  EXPECT_TRUE(equivalent(p, c.program));
}

TEST(Canonicalize, AWrongRewriteIsNotEquivalent) {
  // The check the search relies on: a canonical form with a wrong eps, a wrong dim or a wrong
  // slice is told apart from the program by the verifier.
  const KernelGraph p = parse(
      "input X: f16[8, 64]\nO = div(X, sqrt(add_scalar(mean(square(X), dim=1), 1e-5)))\n"
      "output O\n");
  EXPECT_TRUE(equivalent(p, canonical(p).program));
  EXPECT_FALSE(equivalent(p, parse("input X: f16[8, 64]\nO = rms_norm(X, eps=2e-5)\noutput O\n")));
  EXPECT_FALSE(equivalent(p, parse("input X: f16[8, 64]\nO = rms_norm(X)\noutput O\n")));
  const KernelGraph q = parse(
      "input X: f16[4, 16]\ninput W: f16[16, 24]\nP = matmul(X, W)\n"
      "Q = slice(P, 1, 0, 8)\nK = slice(P, 1, 8, 24)\noutput Q, K\n");
  EXPECT_TRUE(equivalent(q, canonical(q).program));
  EXPECT_FALSE(equivalent(
      q, parse("input X: f16[4, 16]\ninput W: f16[16, 24]\nQ = matmul(X, slice(W, 1, 0, 8))\n"
               "K = matmul(X, slice(W, 1, 7, 23))\noutput Q, K\n")));
}

TEST(Canonicalize, RuleNamesAreListed) {
  const auto names = canonical_rule_names();
  for (const char* n : {"rms_norm_div", "rms_norm_mul", "slice_of_matmul", "slice_of_elementwise",
                        "gain_across_matmul"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

}  // namespace
}  // namespace strata
