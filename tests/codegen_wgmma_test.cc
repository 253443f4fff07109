// Warpgroup MMA in emitted kernels (PlanOptions::wgmma; docs/codegen.md, "wgmma"): the emitted
// sources run on the CPU emulator (runtime/strata_rt/emulate.h models wgmma.mma_async) against
// the reference interpreter, threads in both orders; matmuls whose tiles do not meet the
// layout conditions keep mma.sync (the plan says why); and nvcc compiles the wgmma kernels
// for sm_90a (ptxas verifies the PTX).
#include <gtest/gtest.h>

#include "strata/frontend/graph_loader.h"
#include "support/benchmark_graphs.h"
#include "support/coverage_graphs.h"
#include "support/emulation.h"
#include "support/wgmma_graphs.h"

namespace strata::testing {
namespace {

EmitOptions wgmma_options(int groups = 1) {
  EmitOptions o;
  o.plan.wgmma = true;
  o.plan.loop_groups = groups;
  return o;
}

/// Emits g with `opts`, checks the emitted source contains every `expect` (and none of
/// `absent`), and compares the emulation with the reference in both thread orders.
void check(const std::string& name, const KernelGraph& g, const EmitOptions& opts,
           const std::vector<std::string>& expect, const std::vector<std::string>& absent = {},
           double amp = 0.5, double rtol = 2e-2) {
  EmulatedGraph emu(g, opts, name);
  ASSERT_TRUE(emu.ok()) << name << ": " << emu.log();
  for (const std::string& text : expect)
    EXPECT_NE(emu.source().find(text), std::string::npos) << name << ": no `" << text << "`";
  for (const std::string& text : absent)
    EXPECT_EQ(emu.source().find(text), std::string::npos) << name << ": `" << text << "`";
  const std::vector<HostTensor> inputs = rounded_random_inputs(g, 4321, amp);
  auto reference = run_reference(g, inputs);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  for (bool reverse : {false, true}) {
    std::vector<HostTensor> out;
    ASSERT_TRUE(emu.run(inputs, out, reverse)) << name << ": " << emu.log();
    ASSERT_EQ(out.size(), reference->size());
    for (size_t i = 0; i < out.size(); ++i) {
      const Comparison c = compare(out[i], (*reference)[i], rtol);
      EXPECT_EQ(c.bad, 0) << name << " output " << i << (reverse ? " (reverse)" : "") << ": rel L2 "
                          << c.rel_l2 << ", max abs " << c.max_abs;
      EXPECT_LT(c.rel_l2, rtol / 2) << name << " output " << i;
    }
  }
}

TEST(WgmmaEmulation, PlainMatmulRegisterAccumulator) {
  // 64 rows (one warpgroup), N = 64: B [64][64] MN-major; the product goes into registers.
  check("wg_mm", plain_matmul(64, 256, 64, 64, 128, false, DType::f16), wgmma_options(),
        {"strata_rt::warpgroup_mma<", "wgmma: m64n64k16, B MN-major"}, {"strata_rt::warp_mma<"});
  // 128 rows: two warpgroups of 8 warps.
  check("wg_mm_bf16", plain_matmul(128, 128, 64, 64, 256, false, DType::bf16), wgmma_options(),
        {"strata_rt::warpgroup_mma<", "wgmma: m64n64k16"});
}

TEST(WgmmaEmulation, PlainMatmulEpilogueChunks) {
  // One iteration (K = 64), the product handed to a gelu epilogue through chunks.
  check("wg_mm_gelu", plain_matmul(128, 64, 64, 64, 256, true, DType::f16), wgmma_options(),
        {"strata_rt::warpgroup_mma<"});
}

TEST(WgmmaEmulation, PlainMatmulKMajorColumnChunks) {
  // N = 256 keys-major columns in chunks of 128 (one wgmma m64n128k16 each, the second at
  // column tile 16), K = 64 halves per 128-byte row.
  check("wg_nt", plain_matmul_nt(64, 64, 256, 128, DType::f16), wgmma_options(),
        {"strata_rt::warpgroup_mma<", "B K-major"});
  check("wg_nt_bf16", plain_matmul_nt(128, 64, 64, 256, DType::bf16), wgmma_options(),
        {"strata_rt::warpgroup_mma<", "B K-major"});
}

TEST(WgmmaEmulation, RaggedContraction) {
  // K = 1020 in 16 iterations of 64: the last holds 60. Loaded operands are zero-filled there.
  check("wg_ragged", ragged_matmul(64, 1020, 64, 16, false), wgmma_options(),
        {"strata_rt::warpgroup_mma<", "wgmma: m64n64k16"});
  // A computed (log X²) is −inf at absent indices: warpgroup_mma zeroes it past klimit.
  check("wg_ragged_masked", ragged_matmul(64, 1020, 64, 16, true), wgmma_options(),
        {"strata_rt::warpgroup_mma<mma", ", true>(", "wgmma: m64n64k16"}, {}, 0.5, 5e-2);
}

TEST(WgmmaEmulation, OddExtentsFallBack) {
  // 48 rows: three row tiles, no 64-row warpgroup tile.
  check("wg_rows48", plain_matmul(48, 128, 64, 64, 128, false, DType::f16), wgmma_options(),
        {"mma.sync, not wgmma: ", "strata_rt::warp_mma<"}, {"strata_rt::warpgroup_mma"});
  // N = 128 with B [K][128]: an MN-major B wider than one 128-byte row.
  check("wg_n128", plain_matmul(64, 128, 128, 64, 128, false, DType::f16), wgmma_options(),
        {"not wgmma: the B tile's rows are not swizzled rows of 128 bytes", "strata_rt::warp_mma<"},
        {"strata_rt::warpgroup_mma"});
  // B rows of 48 and 32 halves: not the descriptor's 128-byte swizzled rows.
  check("wg_n48", plain_matmul(64, 128, 48, 64, 128, false, DType::f16), wgmma_options(),
        {"mma.sync, not wgmma: ", "strata_rt::warp_mma<"}, {"strata_rt::warpgroup_mma"});
  check("wg_n32", plain_matmul(128, 128, 32, 64, 256, false, DType::bf16), wgmma_options(),
        {"mma.sync, not wgmma: the B tile's rows", "strata_rt::warp_mma<"},
        {"strata_rt::warpgroup_mma"});
}

TEST(WgmmaEmulation, KnobOffKeepsMmaSync) {
  check("wg_off", plain_matmul(64, 256, 64, 64, 128, false, DType::f16), EmitOptions{},
        {"strata_rt::warp_mma<"}, {"warpgroup_mma", "wgmma"});
  // wgmma exists on sm_90a only: for another target the knob changes nothing.
  EmitOptions sm80 = wgmma_options();
  sm80.arch = "sm_80";
  EmitOptions off = wgmma_options();
  off.plan.wgmma = false;
  off.arch = "sm_80";
  const KernelGraph g = attention_graph(2, 64, 64, 1024, 2, 64, 32, false);
  auto a = emit_cuda_source(g, sm80), b = emit_cuda_source(g, off);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->code, b->code);
  EXPECT_EQ(a->code.find("warpgroup_mma"), std::string::npos);
}

TEST(WgmmaEmulation, AttentionChainHeadDim64) {
  // FlashDecoding attention, head dim 64, 64 queries per block: S = Q·K with K stored [d, keys]
  // (MN-major B), O = P·V with V [keys, d] (MN-major). Q's fragments are hoisted out of the key
  // loop, a form that gave wrong answers on an H200 (h200-2026-11-29-wgmma): S keeps mma.sync
  // and says why, O = P·V takes wgmma with P from S's accumulators.
  const KernelGraph g = attention_graph(2, 64, 64, 1024, 2, 64, 32, false);
  check("wg_gqa", g, wgmma_options(),
        {"warpgroup MMA for the second product", "strata_rt::warpgroup_mma_chained<",
         "not wgmma: A's fragments are hoisted out of the loop"},
        {"strata_rt::warpgroup_mma_rega<"}, 0.25);
  check("wg_gqa_g2", g, wgmma_options(2), {"warpgroup MMA for the second product"}, {}, 0.25);
  check("wg_qknorm_bf16", attention_graph(2, 64, 64, 1024, 2, 64, 32, true, DType::bf16),
        wgmma_options(), {"warpgroup MMA for"}, {}, 0.25, 6e-2);
}

TEST(WgmmaEmulation, AttentionChain256RowsOver128Keys) {
  // The tiling the search now ranks first for prefill attention at head dim 64 (docs/search.md,
  // "Dimension classes"): 256 query rows per block (16 warps, four warpgroups) over key tiles
  // of 128. P·V takes wgmma (m64n64k16) with A from S's 128-column registers, eight k-steps
  // per call; S keeps mma.sync here (K stored [d, keys]: rows of 128 keys are 256 bytes).
  const KernelGraph g = attention_graph(2, 256, 64, 512, 2, 128, 64, false);
  check("wg_gqa_256x128", g, wgmma_options(),
        {"warpgroup MMA for the second product", "wgmma: m64n64k16", "512 threads",
         "not wgmma: the B tile's rows are not swizzled rows of 128 bytes"},
        {}, 0.25);
  // K read as [keys, d] through a transpose (as the suite's programs store it): S takes wgmma
  // too, m64n128k16 with a K-major B of 128 rows of 64 halves.
  check("wg_kmajor_256x128", qknorm_gain_on_q(2, 256, 64, 512, 4, false), wgmma_options(),
        {"wgmma: m64n128k16, B K-major", "wgmma: m64n64k16", "512 threads"}, {}, 0.25, 6e-2);
}

TEST(WgmmaEmulation, AttentionKeysMajorK) {
  // K read as [keys, d] through a transpose in place: S = Q·Kᵀ has a K-major B (d = 64 halves
  // per row); rms_norm of K folded into the product as column scales.
  for (bool norm_first : {false, true})
    check(std::string("wg_kmajor") + (norm_first ? "_nf" : ""),
          qknorm_gain_on_q(2, 64, 64, 256, 4, norm_first), wgmma_options(),
          {"B K-major", "strata_rt::warpgroup_mma"}, {}, 0.25, 6e-2);
}

// Suite programs with 64-row tiles (bench/wgmma_rows.py: a search result's graph with one grid
// axis divided, tests/data/wgmma/<program>.rows64.json) at their real shapes, against the
// program's float64 reference: ViT-L self-attention (K-major S through the transpose of K,
// ragged-free online softmax), GEMM chains with both products or only the second as wgmma.
TEST(WgmmaEmulation, SuiteProgramsWith64RowTiles) {
  for (const char* name : {"mcfuser_s5", "mcfuser_g8", "mcfuser_g10"}) {
    auto g = load_graph(std::string("tests/data/wgmma/") + name + ".rows64.json");
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto program = load_graph(std::string("bench/suite/") + name + ".strata");
    ASSERT_TRUE(program.ok()) << program.error().message;
    EmulatedGraph emu(*g, wgmma_options(0), std::string("wg_") + name);
    ASSERT_TRUE(emu.ok()) << emu.log();
    EXPECT_NE(emu.source().find("wgmma: m64n"), std::string::npos) << name;
    const std::vector<HostTensor> inputs = rounded_random_inputs(*g, 99, 0.5);
    auto reference = run_reference(*program, inputs);
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    for (bool reverse : {false, true}) {
      std::vector<HostTensor> out;
      ASSERT_TRUE(emu.run(inputs, out, reverse)) << name << ": " << emu.log();
      ASSERT_EQ(out.size(), reference->size());
      const Comparison c = compare(out[0], (*reference)[0], 2e-2);
      EXPECT_EQ(c.bad, 0) << name << (reverse ? " (reverse)" : "") << ": rel L2 " << c.rel_l2;
      EXPECT_LT(c.rel_l2, 1e-2) << name;
    }
  }
}

TEST(WgmmaCompile, Sm90aPtxas) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "nvcc not found (this test is registered only with nvcc)";
  TempDir dir("wgmma_nvcc");
  const std::pair<std::string, KernelGraph> graphs[] = {
      {"mm", plain_matmul(64, 256, 64, 64, 128, false, DType::f16)},
      {"mm_gelu", plain_matmul(128, 64, 64, 64, 256, true, DType::bf16)},
      {"gqa", attention_graph(2, 64, 64, 1024, 2, 64, 32, false)},
      {"kmajor", qknorm_gain_on_q(2, 64, 64, 256, 4, false)},
      {"kmajor256", qknorm_gain_on_q(2, 256, 64, 512, 4, false)}};
  for (const auto& [name, g] : graphs) {
    EmitOptions opts = wgmma_options();
    opts.name = name;
    auto src = emit_cuda_source(g, opts);
    ASSERT_TRUE(src.ok()) << src.error().message;
    EXPECT_NE(src->code.find("warpgroup_mma"), std::string::npos) << name;
    const std::string cu = dir.file(name + ".cu");
    write_file(cu, src->code);
    const std::string cmd = nvcc + " -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a" +
                            " -Xptxas -v -I" + cuda_runtime_include_dir() +
                            " -shared -Xcompiler -fPIC -o " + dir.file(name + ".so") + " " + cu;
    std::string log;
    EXPECT_EQ(run_command(cmd, log), 0) << cmd << "\n" << log;
    EXPECT_EQ(log.find("error"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace strata::testing
