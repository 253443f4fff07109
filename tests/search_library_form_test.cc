// Library forms (src/search/library_form.h, docs/search.md "Library forms"): which ops land in
// which kernel, slices of a product pushed into its operands, refusals, the composed proof
// (and that it catches a wrong part), and the search finding, proving and ranking the forms of
// small prefill-like programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "search/library_form.h"
#include "search/library_form_proof.h"
#include "strata/opt/canonicalize.h"
#include "strata/search/search.h"
#include "strata/search/search_report.h"
#include "strata/verify/verifier.h"
#include "support/library_form_programs.h"
#include "support/parse.h"
#include "support/search_config.h"

namespace strata::testing {
namespace {

/// Blocks of a wave in these tests: small, so that small programs get several row counts.
constexpr int64_t kWave = 8;

/// The region form the search uses: the canonical form, else the region as written.
KernelGraph canonical(const KernelGraph& region) {
  auto c = canonicalize_program(region);
  return c.ok() ? c->program : region;
}

/// The op kinds of the graph's kernels (inputs left out), in order.
std::vector<std::string> kernel_ops(const KernelGraph& g) {
  std::vector<std::string> out;
  for (const KernelOp& op : g.ops())
    if (op.kind != OpKind::Input) out.emplace_back(op_name(op.kind));
  return out;
}

/// The op kinds in the body of the graph's customized kernel number `k` (thread graphs
/// expanded to the ops they hold).
std::multiset<std::string> body_ops(const KernelGraph& g, int k) {
  std::multiset<std::string> out;
  for (const KernelOp& op : g.ops()) {
    if (op.kind != OpKind::Customized || k-- != 0) continue;
    for (const BlockOp& b : op.body->ops()) {
      if (b.kind == OpKind::ThreadFused) {
        for (const ThreadStep& t : b.chain) out.insert(std::string(op_name(t.kind)));
        continue;
      }
      if (b.kind != OpKind::Input && b.kind != OpKind::Output)
        out.insert(std::string(op_name(b.kind)));
    }
  }
  return out;
}

void expect_equivalent(const KernelGraph& program, const KernelGraph& form) {
  auto v = verify_equivalent(program, form, VerifyOptions{});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->equivalent) << v->detail;
  EXPECT_LE(v->log2_bound, -60.0);
}

void expect_composed_proof(const search::LibraryForms& forms) {
  search::LibraryFormProver prover(forms, VerifyOptions{});
  for (const search::LibraryForm& f : forms.forms) {
    auto v = prover.prove(f);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
    EXPECT_FALSE(v->unknown);
    EXPECT_LE(v->log2_bound, -60.0);
    EXPECT_NE(v->detail.find("composed"), std::string::npos);
  }
}

TEST(LibraryForm, NormQkvFusesTheNormAndPushesTheSlicesIntoTheWeight) {
  // 67 tokens: one row per block only (67 is odd); K = 40, Q 32 and K/V 8 columns.
  const KernelGraph p = parse(norm_qkv_program(67, 40, 32, 8));
  const search::LibraryForms lf = search::library_forms(p, kWave, canonical);
  EXPECT_EQ(lf.pushed_slices, 3);
  // The region once per variant: the slices pushed, then the product kept whole.
  ASSERT_EQ(lf.regions.size(), 2u);
  EXPECT_EQ(kernel_ops(lf.regions[0]), (std::vector<std::string>{"rms_norm", "mul"}));
  EXPECT_EQ(kernel_ops(lf.regions[1]), (std::vector<std::string>{"rms_norm", "mul"}));
  ASSERT_EQ(lf.forms.size(), 2u);
  const KernelGraph& f = lf.forms[0].graph;
  EXPECT_EQ(lf.forms[0].pushed_slices, 3);
  // The norm and the gain in one kernel; each of Q, K, V a product with a column block of W.
  EXPECT_EQ(kernel_ops(f), (std::vector<std::string>{"customized", "slice", "matmul", "slice",
                                                     "matmul", "slice", "matmul"}));
  EXPECT_EQ(body_ops(f, 0), (std::multiset<std::string>{"rms_norm", "mul", "accum"}));
  const int w = f.find_tensor("W"), y = f.find_tensor("Y");
  ASSERT_GE(w, 0);
  ASSERT_GE(y, 0);
  const int64_t starts[] = {0, 32, 40}, ends[] = {32, 40, 48};
  int k = 0;
  for (const KernelOp& op : f.ops()) {
    if (op.kind == OpKind::Slice) {
      EXPECT_EQ(op.inputs[0], w);
      EXPECT_EQ(op.attrs.dim, 1);
      EXPECT_EQ(op.attrs.start, starts[k]);
      EXPECT_EQ(op.attrs.end, ends[k]);
    }
    if (op.kind == OpKind::Matmul) {
      EXPECT_EQ(op.inputs[0], y);
      ++k;
    }
  }
  ASSERT_EQ(f.outputs().size(), 3u);
  EXPECT_EQ(f.tensor_name(f.outputs()[1]), "K");
  EXPECT_EQ(f.tensor(f.outputs()[1]).shape, Shape({67, 8}));
  // The packed form: the fused norm, one product, its three slices the outputs (packed in the
  // caller's allocation: docs/codegen.md, "Packed outputs").
  const search::LibraryForm& packed = lf.forms[1];
  EXPECT_EQ(packed.pushed_slices, 0);
  EXPECT_EQ(kernel_ops(packed.graph),
            (std::vector<std::string>{"customized", "matmul", "slice", "slice", "slice"}));
  EXPECT_EQ(packed.parts.at(0).region, 1);
  expect_composed_proof(lf);
  expect_equivalent(p, f);
  expect_equivalent(p, packed.graph);
}

TEST(LibraryForm, LayerNormFfnGetsAKernelBeforeAndAfterTheMatmul) {
  // 64 tokens: 1, 2, 4 and 8 rows per block (8 blocks a wave here).
  const KernelGraph p = parse(layernorm_ffn_program(64, 48, 40));
  const search::LibraryForms lf = search::library_forms(p, kWave, canonical);
  EXPECT_EQ(lf.pushed_slices, 0);
  // The written-out LayerNorm with its gain and bias; the bias and gelu after the matmul are
  // the cuBLAS call's epilogue (docs/codegen.md, "Library epilogues"): no region, kept as the
  // program has them.
  ASSERT_EQ(lf.regions.size(), 1u);
  EXPECT_EQ(kernel_ops(lf.regions[0]),
            (std::vector<std::string>{"mean", "sub", "square", "mean", "add_scalar", "sqrt", "div",
                                      "mul", "add"}));
  ASSERT_EQ(lf.forms.size(), 4u);
  const int64_t rows[] = {1, 2, 4, 8};
  for (size_t i = 0; i < lf.forms.size(); ++i) {
    const search::LibraryForm& f = lf.forms[i];
    EXPECT_EQ(f.rows, rows[i]);
    EXPECT_EQ(kernel_ops(f.graph),
              (std::vector<std::string>{"customized", "matmul", "add", "gelu"}));
    // The region in its canonical form: the mean, then rms_norm of x − mean (a reduction the
    // block holds whole rows for).
    const std::multiset<std::string> norm = body_ops(f.graph, 0);
    EXPECT_EQ(norm.count("mean"), 1u);
    EXPECT_EQ(norm.count("rms_norm"), 1u);
    for (const KernelOp& op : f.graph.ops())
      if (op.kind == OpKind::Customized) EXPECT_EQ(op.body->grid().x, 64 / rows[i]);
  }
  expect_composed_proof(lf);
  expect_equivalent(p, lf.forms.back().graph);
  // Without the canonical form the written-out LayerNorm is one kernel as well: its two means
  // are reductions along the unsplit last dim.
  const search::LibraryForms as_written = search::library_forms(p, kWave);
  ASSERT_FALSE(as_written.forms.empty());
  EXPECT_EQ(body_ops(as_written.forms[0].graph, 0).count("mean"), 2u);
  expect_composed_proof(as_written);
}

TEST(LibraryForm, GatedMlpFusesSiluAndMulAfterBothProducts) {
  const KernelGraph p = parse(gated_mlp_program(33, 40, 24));
  const search::LibraryForms lf = search::library_forms(p, kWave, canonical);
  ASSERT_EQ(lf.regions.size(), 1u);
  ASSERT_EQ(lf.regions[0].inputs().size(), 2u);  // the two products
  ASSERT_EQ(lf.forms.size(), 1u);                // 33 rows: one per block
  EXPECT_EQ(kernel_ops(lf.forms[0].graph),
            (std::vector<std::string>{"matmul", "matmul", "customized"}));
  EXPECT_EQ(body_ops(lf.forms[0].graph, 0), (std::multiset<std::string>{"silu", "mul", "accum"}));
  expect_composed_proof(lf);
  expect_equivalent(p, lf.forms[0].graph);
}

TEST(LibraryForm, RowSlicesArePushedIntoTheLeftOperand) {
  const KernelGraph p = parse(R"(
input X: f16[48, 32]
input W: f16[32, 24]
C = matmul(X, W)
A = relu(slice(C, 0, 0, 16))
B = slice(C, 0, 16, 48)
output A, B
)");
  const search::LibraryForms lf = search::library_forms(p, kWave, canonical);
  EXPECT_EQ(lf.pushed_slices, 2);
  ASSERT_FALSE(lf.forms.empty());
  const KernelGraph& f = lf.forms[0].graph;
  int matmuls = 0;
  for (const KernelOp& op : f.ops()) {
    if (op.kind != OpKind::Matmul) continue;
    ++matmuls;
    const KernelOp& a = f.op(f.tensor(op.inputs[0]).producer);
    EXPECT_EQ(a.kind, OpKind::Slice);
    EXPECT_EQ(a.attrs.dim, 0);
    EXPECT_EQ(op.inputs[1], f.find_tensor("W"));
  }
  EXPECT_EQ(matmuls, 2);
  expect_composed_proof(lf);
  expect_equivalent(p, f);
}

TEST(LibraryForm, Refusals) {
  // No matmul, or none that runs as a library call (f32).
  EXPECT_TRUE(search::library_forms(parse("input X: f16[8, 16]\nY = relu(X)\noutput Y\n"), kWave)
                  .forms.empty());
  EXPECT_TRUE(search::library_forms(parse(R"(
input X: f32[8, 16]
input W: f32[16, 8]
Y = relu(matmul(X, W))
output Y
)"),
                                    kWave)
                  .forms.empty());
  // Nothing around the matmul: the form would be the program.
  EXPECT_TRUE(
      search::library_forms(
          parse("input X: f16[8, 16]\ninput W: f16[16, 8]\nY = matmul(X, W)\noutput Y\n"), kWave)
          .forms.empty());
  // A product read whole (or an output) besides its slices is not split; the slice is
  // elementwise work of the region after it.
  const search::LibraryForms mixed = search::library_forms(parse(R"(
input X: f16[8, 16]
input W: f16[16, 8]
C = matmul(X, W)
D = add(slice(C, -1, 0, 4), slice(C, -1, 4, 8))
output C, D
)"),
                                                           kWave);
  EXPECT_EQ(mixed.pushed_slices, 0);
  ASSERT_EQ(mixed.forms.size(), 1u);
  EXPECT_EQ(kernel_ops(mixed.forms[0].graph), (std::vector<std::string>{"matmul", "customized"}));
  // A norm along the split dim after the product: that region keeps its predefined ops; the
  // norm before the product is still fused.
  const KernelGraph col = parse(R"(
input X: f16[8, 16]
input G: f16[16]
input W: f16[16, 8]
Y = mul(rms_norm(X, eps=1e-05), G)
O = relu(rms_norm(matmul(Y, W), dim=0, eps=1e-05))
output O
)");
  const search::LibraryForms lf = search::library_forms(col, kWave);
  ASSERT_EQ(lf.forms.size(), 1u);
  EXPECT_EQ(lf.regions.size(), 1u);
  EXPECT_EQ(kernel_ops(lf.forms[0].graph),
            (std::vector<std::string>{"customized", "matmul", "rms_norm", "relu"}));
  expect_composed_proof(lf);
  // A region of one op is left alone (one kernel either way): no form.
  EXPECT_TRUE(search::library_forms(parse(R"(
input X: f16[8, 16]
input W: f16[16, 8]
Y = relu(matmul(rms_norm(X, eps=1e-05), W))
output Y
)"),
                                    kWave)
                  .forms.empty());
}

TEST(LibraryForm, AResidualAcrossTheProductSplitsByLevel) {
  // Y is read by the product and by the op after it: the ops before and after the product are
  // regions of their own (one path through a matmul between them), so no kernel waits on itself.
  const KernelGraph p = parse(R"(
input X: f16[16, 32]
input G: f16[32]
input W: f16[32, 32]
Y = mul(rms_norm(X, eps=1e-05), G)
O = relu(add(matmul(Y, W), Y))
output O
)");
  const search::LibraryForms lf = search::library_forms(p, kWave, canonical);
  ASSERT_EQ(lf.regions.size(), 2u);
  ASSERT_FALSE(lf.forms.empty());
  EXPECT_EQ(kernel_ops(lf.forms[0].graph),
            (std::vector<std::string>{"customized", "matmul", "customized"}));
  expect_composed_proof(lf);
  expect_equivalent(p, lf.forms[0].graph);
}

TEST(LibraryForm, TheComposedProofRejectsAWrongPart) {
  // The kernels of a region that adds the gain where the program multiplies by it have the
  // region's interface; the proof of the form holding them must fail.
  const KernelGraph p = parse(norm_qkv_program(16, 32, 16, 8));
  std::string wrong_text = norm_qkv_program(16, 32, 16, 8);
  wrong_text.replace(wrong_text.find("Y = mul("), 8, "Y = add(");
  const search::LibraryForms lf = search::library_forms(p, kWave);
  const search::LibraryForms wrong = search::library_forms(parse(wrong_text), kWave);
  ASSERT_FALSE(lf.forms.empty());
  ASSERT_FALSE(wrong.forms.empty());
  search::LibraryForm planted = lf.forms[0];
  planted.parts[0].kernels = wrong.forms[0].parts[0].kernels;
  search::LibraryFormProver prover(lf, VerifyOptions{});
  auto v = prover.prove(planted);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_FALSE(v->equivalent);
  EXPECT_NE(v->detail.find("region 1 of 2"), std::string::npos) << v->detail;
  auto right = prover.prove(lf.forms[0]);
  ASSERT_TRUE(right.ok());
  EXPECT_TRUE(right->equivalent);
}

// The search builds the forms, proves them and ranks them ("derived": "library_form" in the
// result document, which `strata profile --top K` measures beside the top K).
TEST(LibraryForm, TheSearchFindsProvesAndRanksTheForms) {
  const std::pair<const char*, std::string> programs[] = {
      {"norm_qkv", norm_qkv_program(264, 64, 32, 16)},
      {"layernorm_ffn", layernorm_ffn_program(264, 48, 40)},
      {"gated_mlp", gated_mlp_program(264, 64, 48)},
  };
  for (const auto& [name, text] : programs) {
    const KernelGraph p = parse(text);
    SearchConfig config = search_config("library-form", name).with_time_limit(20).with_top_k(1);
    auto r = superoptimize(p, config);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
    const Candidate& program = r->ranked[r->program_index()];
    int forms = 0;
    double best = INFINITY;
    for (const Candidate& c : r->ranked) {
      if (c.derived != "library_form") continue;
      ++forms;
      EXPECT_TRUE(c.verification.equivalent) << name;
      EXPECT_LE(c.verification.log2_bound, -60.0) << name;
      EXPECT_NE(c.verification.detail.find("composed"), std::string::npos) << name;
      best = std::min(best, c.cost.predicted_us);
    }
    EXPECT_GE(forms, 1) << name;
    // Some form beats the program (not every one: with its outputs packed, the program's
    // product is one library call, and the pushed forms' three calls may cost more).
    EXPECT_LT(best, program.cost.predicted_us) << name;
    auto target = Target::by_name(config.target);
    ASSERT_TRUE(target.ok());
    auto back = search_result_from_json(search_result_to_json(*r, config), *target);
    ASSERT_TRUE(back.ok()) << back.error().message;
    int marked = 0;
    for (const Candidate& c : back->ranked) marked += c.derived == "library_form";
    EXPECT_EQ(marked, forms) << name;
  }
}

}  // namespace
}  // namespace strata::testing
