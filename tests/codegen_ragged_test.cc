// Ragged tiles in generated code (docs/codegen.md, "Ragged tiles"): block graphs whose grid or
// loop splits do not divide their extents are emitted with masked loads and stores, reductions
// over the present elements and masked accumulation, run on the CPU emulator of the CUDA
// execution model (which also fails any copy past the end of a tensor, and any store past the
// end of an output), and must match the float64 interpreter — and, where one exists, the naive
// program the μGraph implements.
#include <gtest/gtest.h>

#include <functional>

#include "strata/codegen/emit_knobs.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/graph_json.h"
#include "strata/opt/kernel_plan.h"
#include "strata/frontend/program_parser.h"
#include "strata/search/search.h"
#include "support/emulation_check.h"
#include "support/kernel_ir.h"
#include "support/ragged_graphs.h"

namespace strata::testing {
namespace {

/// Checks of the kernel IR of a case's (first) customized kernel: the masked paths it must take.
using IrCheck = std::function<void(const ir::Stmt&)>;

/// Emits `g`, checks the kernel IR of its first customized kernel with `expect`, runs it on the
/// emulator (threads in order and in reverse) and compares every output with the interpreter's,
/// and the interpreter's with `program`'s when given.
void check_ragged(const std::string& name, const KernelGraph& g, const IrCheck& expect,
                  const KernelGraph* program = nullptr, double amp = 0.5, double rtol = 2e-2) {
  if (expect) {
    SCOPED_TRACE(name);
    expect(kernel_ir(g));
  }
  const std::string src = check_emulation(g, {.name = name,
                                              .reference = program,
                                              .graph_matches_reference = program != nullptr,
                                              .seed = 4321,
                                              .amp = amp,
                                              .rtol = rtol,
                                              .rel_l2 = rtol / 2});
  if (const char* d = std::getenv("DUMP_RAGGED")) write_file(std::string(d) + "/" + name + ".cu", src);
}

/// Emits the case, checks its kernel IR with `expect` (the masked paths), runs it on the
/// emulator and compares with the interpreter and the program.
void check_case(const RaggedCase& c, const IrCheck& expect) {
  check_ragged(c.name, c.graph, expect, c.program ? &*c.program : nullptr, c.amp);
}

/// `strata_rt::imin(tile, …)` calls: the present extent of a ragged dim split by the loop.
std::vector<const ir::ExprNode*> present_extents(const ir::Stmt& k, int64_t tile) {
  std::vector<const ir::ExprNode*> out;
  for (const ir::ExprNode* c : calls_to(k, "strata_rt::imin"))
    if (c->args.size() == 2 && c->args[0].is(tile)) out.push_back(c);
  return out;
}

/// `if (cond) continue;` statements whose condition reads `var`: positions left out.
int skips_reading(const ir::Stmt& k, const std::string& var) {
  int n = 0;
  for (const ir::StmtNode* x : ir::walk(k))
    if (x->kind == ir::StmtKind::If && x->body.size() == 1 &&
        x->body[0]->kind == ir::StmtKind::Continue && reads(x->exprs[0], var))
      ++n;
  return n;
}

// N = 1000 over 9 blocks: tiles of 112, the last 104 wide (loads zero-filled, stores clipped).
TEST(RaggedCodegen, RmsNormMatmulRaggedN) {
  RaggedCase c = ragged_rmsnorm_n1000();
  ASSERT_TRUE(c.graph.tensor(c.graph.outputs()[0]).shape == (Shape{4, 1000}));
  check_case(c, [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::cp_async_zfill<").empty());
    EXPECT_TRUE(declares(k, "rgp0"));        // the block's part of N
    EXPECT_GE(skips_reading(k, "rgp0"), 1);  // the saver writes the present columns only
  });
}

// N = 1000 over 7 blocks (tiles of 143, the last 142: scalar copies) and K = 300 over 7
// iterations (43 each, the last 42): the RMS divides by the 300 elements present, not 7 · 43.
TEST(RaggedCodegen, RmsNormMatmulRaggedNAndK) {
  check_case(ragged_rmsnorm_k300(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::copy_sync_zfill<").empty());
    // The RMS over the loop's ragged split divides by the block's part, 300.
    bool count = false;
    for (const ir::ExprNode* e : all_exprs(k))
      count |= e->kind == ir::ExprKind::Verbatim &&
               e->name.find("static_cast<float>(300)") != std::string::npos;
    EXPECT_TRUE(count);
  });
}

// K = 1100 in 35 iterations of 32 (the last 12: a k-step of 16 half present), tensor cores.
TEST(RaggedCodegen, MatmulRaggedLoopKTensorCores) {
  check_case(ragged_matmul_k1100_tc(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::cp_async_zfill<").empty());
    EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma<").empty());  // loaded operands: zero-filled
    // The present K of the iteration a refill loads: min(32, 1100 - next · 32).
    bool present = false;
    for (const ir::ExprNode* c : present_extents(k, 32))
      present |= c->args[1]->kind == ir::ExprKind::Binary && c->args[1]->name == "-" &&
                 c->args[1]->args[0].is(1100) && reads(c->args[1], "next");
    EXPECT_TRUE(present);
  });
}

// K = 1100 in 9 iterations of 123 (the last 116), N = 250 over 2 blocks of 125.
TEST(RaggedCodegen, MatmulRaggedLoopKOddTiles) {
  check_case(ragged_matmul_k1100_odd(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::copy_sync_zfill<").empty());
  });
}

// Gated MLP with hidden 1100 over 23 blocks (tiles of 48, the last 44).
TEST(RaggedCodegen, GatedMlpRaggedHidden) {
  check_case(ragged_gatedmlp_h1100(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::cp_async_zfill<").empty());
  });
}

// The whole gated MLP in one kernel, the loop over hidden 1100 (23 iterations of 48).
TEST(RaggedCodegen, GatedMlpDownProjectionRaggedLoop) {
  check_case(ragged_gatedmlp_down_h1100(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma_ragged<").empty());
  });
}

// Max, mean, softmax and RMS norm over a dim split raggedly across blocks.
TEST(RaggedCodegen, RowReductionsRaggedAcrossBlocks) {
  RaggedCase c = ragged_rows_grid();
  ASSERT_TRUE(c.graph.tensor(c.graph.outputs()[0]).shape == (Shape{4, 9}));
  ASSERT_TRUE(c.graph.tensor(c.graph.outputs()[2]).shape == (Shape{4, 1000}));
  check_case(c, [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::cp_async_zfill<").empty());
    EXPECT_GE(skips_reading(k, "rgp0"), 1);
  });
}

// Running maxima and means over a ragged loop, rows ragged across blocks.
TEST(RaggedCodegen, RowReductionsRaggedLoop) {
  check_case(ragged_rows_loop(),
             [](const ir::Stmt& k) { EXPECT_FALSE(present_extents(k, 143).empty()); });
}

// A computed operand that is −inf at absent indices reaches a ragged contraction.
TEST(RaggedCodegen, ComputedOperandRaggedContraction) {
  check_case(ragged_log_down_h220(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma_ragged<").empty());
  });
}

// Safe attention with the online softmax over a ragged key loop: the running max, the row
// sums and the product with V leave the absent keys of the last iteration out (tensor-core
// steps over tiles of 16; the general path over tiles of 51).
TEST(RaggedCodegen, OnlineSoftmaxRaggedKeyLoop) {
  check_case(ragged_attention_k1025(), [](const ir::Stmt& k) {
    EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma_ragged<").empty());
  });
  check_case(ragged_attention_k203(), [](const ir::Stmt&) {});
}

// Safe attention over a key loop no tile divides, on fragments (FlashAttention style): the
// scores' absent columns are −∞ before the running max, so their exps leave the row sums and
// the product with V; with query rows ragged across blocks too (the chain had been off for every ragged graph: prefill attention over
// 1000 keys at head dim 256 then needed 263 KB of shared memory and had no one-kernel form).
TEST(RaggedCodegen, ChainOverARaggedKeyLoop) {
  for (const RaggedCase& c : {ragged_attention_chain_k1000(), ragged_attention_chain_rows56_k1000()})
    check_case(c, [](const ir::Stmt& k) {
      EXPECT_FALSE(calls_to(k, "strata_rt::warp_mma_chained<").empty());
      EXPECT_FALSE(present_extents(k, 32).empty());
    });
}

// The search end to end on programs whose extents no tile divides: every ranked graph (fused
// ragged ones among them) is emitted, runs on the emulator and matches the interpreter.
TEST(RaggedCodegen, SearchedRaggedGraphsRun) {
  const char* programs[] = {
      "input X: f16[2, 256]\ninput G: f16[1, 256]\ninput W: f16[256, 1000]\n"
      "Y = rms_norm(X)\nZ = mul(Y, G)\nO = matmul(Z, W)\noutput O\n",
      "input X: f16[2, 256]\ninput W1: f16[256, 1100]\ninput W3: f16[256, 1100]\n"
      "A = matmul(X, W1)\nB = matmul(X, W3)\nO = mul(silu(A), B)\noutput O\n",
  };
  int ragged = 0, p = 0;
  for (const char* text : programs) {
    auto prog = parse_program(text, "ragged" + std::to_string(p) + ".strata");
    ASSERT_TRUE(prog.ok()) << prog.error().message;
    auto r = superoptimize(
        *prog, SearchConfig{}.with_threads(2).with_quiet(true).with_cache(false).with_top_k(3));
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (size_t k = 0; k < r->ranked.size(); ++k) {
      const KernelGraph& g = r->ranked[k].graph;
      bool any = false;
      for (const KernelOp& op : g.ops())
        if (op.kind == OpKind::Customized && op.body->ragged()) any = true;
      if (!any) continue;
      ++ragged;
      check_ragged("searched" + std::to_string(p) + "_rank" + std::to_string(k), g, nullptr,
                   &*prog);
    }
    ++p;
  }
  EXPECT_GE(ragged, 2);  // at least one fused ragged graph per program
}

// The ragged cases read back from μGraph JSON stay ragged and emit; with STRATA_RAGGED_JSON_DIR
// set they are also written there (the ragged part of the emitted-code corpus,
// scripts/emit-corpus.sh, docs/codegen.md).
TEST(RaggedCodegen, CasesRoundTripThroughJson) {
  const char* dir = std::getenv("STRATA_RAGGED_JSON_DIR");
  for (const RaggedCase& c : ragged_cases()) {
    auto back = kernel_graph_from_json(kernel_graph_to_json(c.graph), c.name);
    ASSERT_TRUE(back.ok()) << c.name << ": " << back.error().message;
    auto again = kernel_graph_from_json(kernel_graph_to_json(*back), c.name);
    ASSERT_TRUE(again.ok()) << c.name << ": " << again.error().message;
    EXPECT_EQ(kernel_graph_to_json(*back), kernel_graph_to_json(*again)) << c.name;
    bool ragged = false;
    for (const KernelOp& op : back->ops())
      ragged |= op.kind == OpKind::Customized && op.body->ragged();
    EXPECT_TRUE(ragged) << c.name;
    auto src = emit_cuda(*back);
    EXPECT_TRUE(src.ok()) << c.name << ": " << (src.ok() ? "" : src.error().message);
    if (dir)
      EXPECT_TRUE(save_graph_json(*back, std::string(dir) + "/" + c.name + ".json").ok()) << c.name;
  }
}

// What the code generator does not mask is refused with a message naming it (and the search
// does not offer it): here an accumulator keeping a dim split raggedly both across blocks
// (1000 in parts of 334, the last 332) and by the loop (iterations of 112, the last 108).
TEST(RaggedCodegen, RefusalNamesTheConstruct) {
  KernelGraph g;
  int x = must(g.add_input("X", Shape{4, 1000}, DType::f16));
  BlockGraph b = must(BlockGraph::make({3, 1, 1}, 128, 3));
  int xi = must(b.add_input(Shape{4, 1000}, {1, P, P}, 1));
  must(b.add_output(must(b.add_op(OpKind::AccumSum, {xi})), {1, P, P}));
  const std::string why = block_graph_codegen_unsupported(b);
  EXPECT_NE(why.find("ragged both across blocks and per iteration"), std::string::npos) << why;
  must(g.mark_output(must(g.add_customized({x}, std::move(b), {"O"}))[0]));
  auto src = emit_cuda_source(g);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.error().message.find("ragged both across blocks"), std::string::npos)
      << src.error().message;
}

}  // namespace
}  // namespace strata::testing
