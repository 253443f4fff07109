// Tests of the emitter's statement / expression IR (src/codegen/cuda_ir.h), its one CUDA printer
// (cuda_printer.h), and the structure of the kernels the emitter builds in it.
#include <gtest/gtest.h>

#include "codegen/block_emitter.h"
#include "codegen/code_writer.h"
#include "codegen/cuda_ir.h"
#include "codegen/cuda_printer.h"
#include "strata/opt/graph_optimizer.h"
#include "support/kernel_ir.h"
#include "support/op_coverage_graphs.h"

namespace strata::testing {
namespace {

TEST(KernelIr, FoldsConstantsAndIdentities) {
  const ir::Expr x = ir::var("x");
  EXPECT_TRUE((ir::int_lit(6) * 7).is(42));
  EXPECT_TRUE((ir::int_lit(9) / 2 + 3 % 2).is(5));
  EXPECT_EQ(ir::print_expr(x * 1 + 0), "x");
  EXPECT_TRUE((x * 0).is(0));
  EXPECT_TRUE((x % 1).is(0));
  EXPECT_EQ(ir::print_expr(ir::sum({0, x, 0, x * 3})), "x + x * 3");
  EXPECT_TRUE(ir::sum({}).is(0));
}

// Offsets of a flat index: dims contiguous in memory are addressed as one, a broadcast run
// is left out, the outermost run is not reduced.
TEST(KernelIr, LinearOffsetMergesContiguousDims) {
  const ir::Expr e = ir::var("e");
  EXPECT_EQ(ir::print_expr(codegen::linear_offset(e, Shape({1, 32, 64}), {2048, 64, 1})), "e");
  EXPECT_EQ(ir::print_expr(codegen::linear_offset(e, Shape({1, 32, 64}), {0, 0, 1})), "e % 64");
  // A view of [4, 320] at columns 64 … 319: rows of 256 in rows of 320.
  EXPECT_EQ(ir::print_expr(codegen::linear_offset(e, Shape({4, 256}), {320, 1})),
            "(e / 256) * 320 + e % 256");
  // A broadcast middle dim: [2, 3, 8] of a [2, 1, 8] tensor.
  EXPECT_EQ(ir::print_expr(codegen::linear_offset(e, Shape({2, 3, 8}), {8, 0, 1})),
            "(e / 24) * 8 + e % 8");
  EXPECT_TRUE(codegen::linear_offset(e, Shape({1, 1}), {0, 0}).is(0));
  // Every element against the plain sum of index · stride.
  const Shape s({3, 4, 5});
  const std::vector<int64_t> strides = {40, 0, 2};
  for (int64_t f = 0; f < s.numel(); ++f) {
    ir::Expr off = codegen::linear_offset(ir::int_lit(f), s, strides);
    int64_t v = -1;
    ASSERT_TRUE(off.is_int(&v));
    EXPECT_EQ(v, f / 20 * 40 + f % 5 * 2) << f;
  }
}

TEST(KernelIr, PrintsWithTheParenthesesPrecedenceNeeds) {
  const ir::Expr a = ir::var("a"), b = ir::var("b"), c = ir::var("c");
  EXPECT_EQ(ir::print_expr((a + b) * 8), "(a + b) * 8");
  EXPECT_EQ(ir::print_expr(a + b * 8), "a + b * 8");
  EXPECT_EQ(ir::print_expr(a / 8 % 4 * 520), "(a / 8 % 4) * 520");
  EXPECT_EQ(ir::print_expr(ir::binary("+", a, b + c)), "a + (b + c)");  // grouping kept
  EXPECT_EQ(ir::print_expr(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(ir::print_expr(ir::binary(">>", a, ir::int_lit(5)) < 4), "(a >> 5) < 4");
  EXPECT_EQ(ir::print_expr(ir::land(a < b, ir::eq(c % 2, 0))), "(a < b) && (c % 2 == 0)");
  EXPECT_EQ(ir::print_expr(ir::select(a > 0, b, ir::float_lit(0.0)) + c), "(a > 0 ? b : 0.0f) + c");
  EXPECT_EQ(ir::print_expr(ir::index(a + 16, b)), "(a + 16)[b]");
  EXPECT_EQ(ir::print_expr(ir::call("strata_rt::cp_async<16>", {ir::addr(ir::index(a, b)), c})),
            "strata_rt::cp_async<16>(&a[b], c)");
  EXPECT_EQ(ir::print_expr(ir::c_cast("void", a)), "(void)a");
  EXPECT_EQ(ir::print_expr(ir::reinterpret_cast_to("float*", ir::binary("+", a, ir::int_lit(0)))),
            "reinterpret_cast<float*>(a + 0)");
  EXPECT_EQ(ir::print_expr(ir::int_lit(5, "LL")), "5LL");
  EXPECT_EQ(ir::print_expr(ir::float_lit(-std::numeric_limits<double>::infinity())),
            "__int_as_float(0xff800000)");
}

TEST(KernelIr, PrintsStatements) {
  codegen::CodeWriter w;
  const ir::Expr k = ir::var("k"), x = ir::var("x");
  w.open(ir::for_loop("k", 0, k < 4, {}, "unroll"));
  w.add(ir::decl("const int", "c", ir::var("tid") + k * 128));
  w.add(ir::if_compact(ir::var("c") >= 500, ir::brk()));
  w.add(ir::decl_array("float", "v", {2, 4}, ir::aggregate_zero(), "registers"));
  w.sync();
  w.close();
  w.add(ir::for_compact("x", 0, x < 8, ir::assign(ir::index(ir::var("r"), x), x, "+=")));
  w.open(ir::lambda_call("f", {ir::var("acc")}, "int b"));
  w.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  w.close();
  EXPECT_EQ(w.str(),
            "#pragma unroll\n"
            "for (int k = 0; k < 4; ++k) {\n"
            "  const int c = tid + k * 128;\n"
            "  if (c >= 500) break;\n"
            "  float v[2][4] = {};  // registers\n"
            "  __syncthreads();\n"
            "}\n"
            "for (int x = 0; x < 8; ++x) r[x] += x;\n"
            "f(acc, [&](int b) {\n"
            "  (void)b;\n"
            "});\n");
}

TEST(KernelIr, PrintsContinueAndReturn) {
  codegen::CodeWriter w;
  const ir::Expr e = ir::var("e"), r = ir::var("r");
  w.open(ir::for_loop("e", 0, e < 8));
  w.add(ir::if_compact(ir::lor(e >= ir::var("rgp0"), e < 2), ir::cont()));
  w.close();
  w.add(ir::if_compact(ir::ne(r, 0), ir::ret(r + 10000)));
  w.open(ir::if_then(ir::var("done")));
  w.add(ir::ret());
  w.close();
  EXPECT_EQ(w.str(),
            "for (int e = 0; e < 8; ++e) {\n"
            "  if ((e >= rgp0) || (e < 2)) continue;\n"
            "}\n"
            "if (r != 0) return r + 10000;\n"
            "if (done) {\n"
            "  return;\n"
            "}\n");
}

TEST(KernelIr, KernelStructureFollowsThePlan) {
  // rmsnorm without loop groups: the barriers the plan counts are the __syncthreads calls
  // (prologue + one per iteration level + post), loads are cp.async calls inside chunk loops.
  PlanOptions o;
  o.loop_groups = 1;
  const KernelGraph g = rmsnorm_graph(16, 4096, 6144);
  std::vector<DType> in, out;
  const KernelOp* cop = nullptr;
  for (const KernelOp& op : g.ops())
    if (op.kind == OpKind::Customized) cop = &op;
  for (int t : cop->inputs) in.push_back(g.tensor(t).dtype);
  for (int t : cop->outputs) out.push_back(g.tensor(t).dtype);
  KernelPlan plan = must(optimize_block_graph(cop->body, in, out, o));
  const ir::Stmt k = kernel_ir(g, o);
  EXPECT_EQ(count_calls(k, "__syncthreads"),
            plan.barriers_prologue + plan.barriers_per_iteration + plan.barriers_post);
  EXPECT_GE(count_calls(k, "strata_rt::cp_async<"), 2);
  // One for-loop over the iterations, with the plan's pipeline.
  int loops = 0;
  for (const ir::StmtNode* x : ir::walk(k))
    if (x->kind == ir::StmtKind::For && x->names[0] == "it") ++loops;
  EXPECT_EQ(loops, 1);
  // The launch bounds of the plan (a scope header is the only text the kernel's signature is).
  const ir::StmtNode* fn = nullptr;
  for (const ir::StmtNode* x : ir::walk(k))
    if (x->kind == ir::StmtKind::Scope && x->text.find("__global__") != std::string::npos) fn = x;
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(fn->text.find("__launch_bounds__(" + std::to_string(plan.threads) + ", " +
                          std::to_string(plan.emission.min_blocks_per_sm) + ")"),
            std::string::npos);
  // Loop groups: the loop barriers are group barriers.
  const ir::Stmt grouped = kernel_ir(g);
  EXPECT_GT(count_calls(grouped, "strata_rt::group_sync<"), 0);
}

}  // namespace
}  // namespace strata::testing
