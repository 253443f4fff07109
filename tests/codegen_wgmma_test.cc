// Warpgroup MMA in emitted kernels (PlanOptions::wgmma; docs/codegen.md, "wgmma"): the emitted
// sources run on the CPU emulator (runtime/strata_rt/emulate.h models wgmma.mma_async) against
// the reference interpreter, threads in both orders (B in 128-byte rows, and wider rows in
// 64-column atoms: head dim 128); matmuls whose tiles do not meet the layout conditions keep
// mma.sync (the plan says why); and nvcc compiles the wgmma kernels for sm_90a (ptxas verifies
// the PTX).
#include <gtest/gtest.h>

#include <algorithm>

#include "strata/frontend/graph_loader.h"
#include "support/benchmark_graphs.h"
#include "support/coverage_graphs.h"
#include "support/emulation_check.h"
#include "support/wgmma_graphs.h"

namespace strata::testing {
namespace {

EmitOptions wgmma_options(int groups = 1) {
  EmitOptions o;
  o.plan.wgmma = true;
  o.plan.loop_groups = groups;
  return o;
}

/// Emits g with `opts`, checks the emitted source contains every `expect` (a miss quotes the
/// plan's lines on wgmma) and none of `absent`, and compares the emulation with the reference
/// in both thread orders: every element within rtol, rel L2 below half of it.
void check(const std::string& name, const KernelGraph& g, const EmitOptions& opts,
           const std::vector<std::string>& expect, const std::vector<std::string>& absent = {},
           double amp = 0.5, double rtol = 2e-2) {
  check_emulation(g, {.name = name,
                      .options = opts,
                      .expect = expect,
                      .absent = absent,
                      .notes_word = "wgmma",
                      .seed = 4321,
                      .amp = amp,
                      .rtol = rtol,
                      .rel_l2 = rtol / 2});
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
  // B rows of 48, 32 and 96 halves: neither the descriptor's 128-byte swizzled rows nor whole
  // 64-column atoms of them.
  check("wg_n48", plain_matmul(64, 128, 48, 64, 128, false, DType::f16), wgmma_options(),
        {"mma.sync, not wgmma: ", "strata_rt::warp_mma<"}, {"strata_rt::warpgroup_mma"});
  check("wg_n32", plain_matmul(128, 128, 32, 64, 256, false, DType::bf16), wgmma_options(),
        {"mma.sync, not wgmma: the B tile's rows", "strata_rt::warp_mma<"},
        {"strata_rt::warpgroup_mma"});
  check("wg_n96", plain_matmul(64, 128, 96, 64, 128, false, DType::f16), wgmma_options(),
        {"not wgmma: the B tile's rows are not swizzled rows of a multiple of 128 bytes",
         "strata_rt::warp_mma<"},
        {"strata_rt::warpgroup_mma", "atoms"});
}

// B tiles whose rows are wider than 128 bytes, stored as 64-column atoms (TileLayout::atoms;
// docs/codegen.md, "wgmma"): every writer and reader goes through the tile's address function.
TEST(WgmmaEmulation, PlainMatmulBInAtomsMnMajor) {
  // B [64][128] and [64][256] MN-major: one m64n64k16 per atom on the accumulators of its
  // columns; the product in registers (128 columns) or handed to an epilogue through chunks
  // of 128 columns (256).
  check("wg_n128", plain_matmul(64, 128, 128, 64, 128, false, DType::f16), wgmma_options(),
        {"wgmma: m64n64k16 x2, B MN-major", "B in 2 atoms of 64 columns",
         "rows in 2 atoms of 64 columns", "strata_rt::warpgroup_mma<"},
        {"strata_rt::warp_mma<"});
  check("wg_n256_bf16", plain_matmul(128, 64, 256, 64, 256, true, DType::bf16), wgmma_options(),
        {"B in 4 atoms of 64 columns", "strata_rt::warpgroup_mma<"}, {"strata_rt::warp_mma<"});
  check("wg_n256_gelu", plain_matmul(64, 64, 256, 64, 128, true, DType::f16), wgmma_options(),
        {"wgmma: m64n64k16 x2, B MN-major", "B in 4 atoms of 64 columns"},
        {"strata_rt::warp_mma<"});
}

TEST(WgmmaEmulation, PlainMatmulBInAtomsKMajor) {
  // W stored [n][k] with K = 128 and 256 halves per row, read through a transpose: the k-step's
  // descriptor starts in atom k / 64.
  check("wg_nt_k128", plain_matmul_nt(64, 128, 64, 128, DType::f16), wgmma_options(),
        {"wgmma: m64n64k16, B K-major", "B in 2 atoms of 64 columns"}, {"strata_rt::warp_mma<"});
  check("wg_nt_k256_bf16", plain_matmul_nt(128, 256, 128, 256, DType::bf16), wgmma_options(),
        {"wgmma: m64n128k16, B K-major", "B in 4 atoms of 64 columns"}, {"strata_rt::warp_mma<"});
}

TEST(WgmmaEmulation, RaggedContractionBInAtoms) {
  // K = 1020 over 16 iterations of 64 with B [64][128] in atoms: zero-filled loads of the
  // absent rows in both atoms; a computed A zeroed past the present extent.
  check("wg_ragged_n128", ragged_matmul(64, 1020, 128, 16, false), wgmma_options(),
        {"wgmma: m64n64k16 x2", "B in 2 atoms"});
  check("wg_ragged_n128_masked", ragged_matmul(64, 1020, 128, 16, true), wgmma_options(),
        {", true>(", "B in 2 atoms"}, {}, 0.5, 5e-2);
}

TEST(WgmmaEmulation, AttentionChainHeadDim128) {
  // Head dim 128 (Llama-3-8B, Qwen2.5-7B, Mistral): V [keys, 128] in two atoms for O = P·V
  // (MN-major, two m64n64k16 per k-step from S's registers); S = Q·K with K stored [d, keys]
  // (MN-major rows of 64 keys, Q's fragments loaded per step).
  check("wg_gqa_d128", attention_graph(2, 64, 128, 512, 2, 64, 32, false), wgmma_options(),
        {"warpgroup MMA for both products", "wgmma: m64n64k16 x2, B MN-major", "B in 2 atoms"}, {},
        0.25);
  // Two loop groups: each group's copies of the K and V tiles in atoms, 1024-byte aligned.
  check("wg_gqa_d128_g2", attention_graph(2, 64, 128, 512, 2, 64, 32, false), wgmma_options(2),
        {"B in 2 atoms", "one copy per loop group"}, {}, 0.25);
  check("wg_qknorm_d128_bf16", attention_graph(2, 64, 128, 512, 2, 64, 32, true, DType::bf16),
        wgmma_options(), {"warpgroup MMA for", "B in 2 atoms"}, {}, 0.25, 6e-2);
  // K read as [keys, d] through a transpose (as the suite's programs store it): S = Q·Kᵀ with
  // a K-major B whose contraction spans both atoms, and O = P·V with V in atoms; f16 and bf16,
  // 64 and 256 query rows per block.
  check("wg_kmajor_d128", qknorm_gain_on_q(2, 64, 128, 256, 4, false), wgmma_options(),
        {"wgmma: m64n64k16, B K-major", "wgmma: m64n64k16 x2, B MN-major",
         "warpgroup MMA for both products"},
        {}, 0.25, 6e-2);
  check("wg_kmajor_d128_bf16", qknorm_gain_on_q(2, 64, 128, 256, 4, true, DType::bf16),
        wgmma_options(), {"warpgroup MMA for both products", "B in 2 atoms"}, {}, 0.25, 6e-2);
}

// The searches' forms of prefill attention at head dim 128 (bench/search/suite/
// qwen25_7b_attn_p1024.json, ranks 0 and 2) at reduced shapes (tests/data/wgmma/attn_d128_*):
// S = Q·Kᵀ scaled, a running max, exp, P·V, with K and V tiles [keys, 128] in two atoms each.
// 256 query rows per block over 128 keys: S as m64n128k16 with a K-major B spanning both atoms;
// 128 rows over 64 keys, f16 and bf16.
TEST(WgmmaEmulation, SuiteAttentionHeadDim128) {
  const struct {
    const char* file;
    std::vector<std::string> expect;
  } cases[] = {{"attn_d128_256x128",
                {"wgmma: m64n128k16, B K-major", "wgmma: m64n64k16 x2, B MN-major", "512 threads",
                 "warpgroup MMA for both products"}},
               {"attn_d128_128x64",
                {"wgmma: m64n64k16, B K-major", "B in 2 atoms", "warpgroup MMA for both products"}},
               {"attn_d128_128x64.bf16", {"warpgroup MMA for both products", "__nv_bfloat16"}}};
  for (const auto& c : cases) {
    auto g = load_graph(std::string("tests/data/wgmma/") + c.file + ".json");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EmitOptions o = wgmma_options();
    if (std::string(c.file) == "attn_d128_256x128") {
      // Its chain holds 128 floats per thread in blocks of 16 warps, more than a thread can
      // keep there on an H100/H200 (chain_register_cap: 96): the plan refuses the chain, and
      // without it the tiles exceed shared memory. The code path is tested with twice the
      // register file.
      EXPECT_FALSE(emit_cuda_source(*g, o).ok());
      o.plan.sm_registers = 2 * 65536;
    }
    check(std::string("wg_") + c.file, *g, o, c.expect, {"strata_rt::warp_mma"}, 0.5, 6e-2);
  }
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
  // per call; S too, with K stored [d, keys] in two atoms of 64 keys (MN-major, one
  // m64n64k16 per atom).
  const KernelGraph g = attention_graph(2, 256, 64, 512, 2, 128, 64, false);
  check("wg_gqa_256x128", g, wgmma_options(),
        {"warpgroup MMA for both products", "wgmma: m64n64k16 x2, B MN-major", "B in 2 atoms",
         "wgmma: m64n64k16, B MN-major", "512 threads"},
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
    check_emulation(*g, {.name = std::string("wg_") + name,
                         .options = wgmma_options(0),
                         .expect = {"wgmma: m64n"},
                         .reference = &*program,
                         .seed = 99,
                         .rtol = 2e-2,
                         .rel_l2 = 1e-2});
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
      {"kmajor256", qknorm_gain_on_q(2, 256, 64, 512, 4, false)},
      {"mm_n256", plain_matmul(128, 64, 256, 64, 256, true, DType::bf16)},
      {"nt_k256", plain_matmul_nt(128, 256, 128, 256, DType::f16)},
      {"gqa_d128", attention_graph(2, 64, 128, 512, 2, 64, 32, false)},
      {"kmajor_d128", qknorm_gain_on_q(2, 64, 128, 256, 4, false)}};
  std::vector<std::pair<std::string, KernelGraph>> all(std::begin(graphs), std::end(graphs));
  for (const char* file : {"attn_d128_256x128", "attn_d128_128x64.bf16"}) {
    auto g = load_graph(std::string("tests/data/wgmma/") + file + ".json");
    ASSERT_TRUE(g.ok()) << g.error().message;
    std::string name = file;
    std::replace(name.begin(), name.end(), '.', '_');
    all.emplace_back(name, *g);
  }
  for (const auto& [name, g] : all) {
    EmitOptions opts = wgmma_options();
    opts.name = name;
    if (name == "attn_d128_256x128") opts.plan.sm_registers = 2 * 65536;  // as above
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
