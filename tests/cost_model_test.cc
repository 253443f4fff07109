// Tests of the analytical cost model (docs/cost-model.md) and `strata cost`: bytes, FLOPs, blocks
// and α
// hand-computed for the RMSNorm + MatMul reference μGraph and for the two-op program.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "strata/cost/cost_model.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/frontend/program_parser.h"
#include "support/routed_graphs.h"
#include "support/wgmma_graphs.h"

namespace strata {
namespace {

constexpr int64_t kM = 16, kK = 4096, kN = 6144;

/// The reference block graph of docs/mugraph-semantics.md §6: grid (n/tile), forloop k/64, X imap φ
/// fmap 1,
/// W imap x→1 fmap 0, body matmul, accum + accum_rms_ld, post div, omap x→1.
BlockGraph rmsnorm_body(int64_t tile_n) {
  BlockGraph b = *BlockGraph::make({static_cast<int>(kN / tile_n), 1, 1}, 128, kK / 64);
  int x = *b.add_input(Shape{kM, kK}, kAllReplicated, 1);
  int w = *b.add_input(Shape{kK, kN}, {1, kReplicate, kReplicate}, 0);
  int mm = *b.add_op(OpKind::Matmul, {x, w});
  int am = *b.add_op(OpKind::AccumSum, {mm});
  int ax = *b.add_op(OpKind::AccumRmsLd, {x});
  int o = *b.add_op(OpKind::Div, {am, ax});
  EXPECT_TRUE(b.add_output(o, {1, kReplicate, kReplicate}).ok());
  return b;
}

KernelGraph rmsnorm_fused(int64_t tile_n = 64) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, kN}, DType::f16);
  auto outs = g.add_customized({x, w}, rmsnorm_body(tile_n), {"O"});
  EXPECT_TRUE(outs.ok()) << outs.error().message;
  EXPECT_TRUE(g.mark_output((*outs)[0]).ok());
  return g;
}

KernelGraph rmsnorm_program() {
  KernelGraph g;
  int x = *g.add_input("X", Shape{kM, kK}, DType::f16);
  int w = *g.add_input("W", Shape{kK, kN}, DType::f16);
  OpAttrs last;
  last.dim = -1;
  int y = *g.add_op(OpKind::RmsNorm, {x}, last, "Y");
  int o = *g.add_op(OpKind::Matmul, {y, w}, {}, "O");
  EXPECT_TRUE(g.mark_output(o).ok());
  return g;
}

Target h100() {
  return *Target::by_name("h100");
}

/// Predefined matmuls as the generated kernels (EmitOptions::library_matmul off).
CostOptions generated() {
  CostOptions o;
  o.library_matmul = false;
  return o;
}

// The model's formula on the kernel's own counts, checked against its outputs.
void expect_formula(const KernelCost& k, const Target& t) {
  double alpha = 1.0 + t.alpha_sm_factor * t.sm_count / static_cast<double>(k.blocks);
  double t_mem = static_cast<double>(k.load_bytes + k.store_bytes) / t.mem_bandwidth_Bps +
                 static_cast<double>(k.l2_bytes) / t.l2_bandwidth_Bps +
                 static_cast<double>(k.narrow_bytes) / t.narrow_bandwidth_Bps;
  // Matmuls run as warpgroup MMA at the wgmma rate (only on a target with wgmma).
  double t_comp = (k.tensor_flops - k.wgmma_flops) / t.tensor_peak_flops +
                  (k.wgmma_flops > 0 ? k.wgmma_flops / t.wgmma_tensor_flops : 0.0) +
                  k.simt_flops / t.simt_peak_flops;
  EXPECT_LE(k.wgmma_flops, k.tensor_flops);
  if (!t.wgmma) EXPECT_EQ(k.wgmma_flops, 0.0);
  EXPECT_DOUBLE_EQ(k.alpha, alpha);
  EXPECT_DOUBLE_EQ(k.t_mem_s, t_mem);
  EXPECT_DOUBLE_EQ(k.t_comp_s, t_comp);
  const double under = std::max(1.0, t.sm_count / static_cast<double>(k.blocks));
  EXPECT_DOUBLE_EQ(k.underfill, under);
  // The last wave's tail: the SM with the most blocks against the mean (several waves only).
  const double slots =
      static_cast<double>((k.blocks + t.sm_count - 1) / t.sm_count * t.sm_count);
  const double tail = k.waves > 1 ? std::max(1.0, slots / static_cast<double>(k.blocks)) : 1.0;
  const double throughput = (t_mem * alpha + t_comp * under +
                             static_cast<double>(k.forloop) * t.iteration_latency_s + k.t_simt_s +
                             k.t_pass_s) *
                                tail +
                            k.t_sync_s;
  EXPECT_DOUBLE_EQ(k.t_throughput_s, throughput);
  EXPECT_DOUBLE_EQ(k.predicted_s, std::max(throughput, k.t_latency_s) + t.launch_overhead_s);
}

TEST(Target, KnownAndUnknownNames) {
  Target t = h100();
  EXPECT_EQ(t.sm_count, 132);
  EXPECT_EQ(t.smem_per_block_bytes, 232448);
  EXPECT_EQ(Target::by_name("h200")->sm_count, 132);
  EXPECT_EQ(Target::by_name("a100")->sm_count, 108);
  EXPECT_GT(Target::by_name("h200")->mem_bandwidth_Bps, t.mem_bandwidth_Bps);
  auto bad = Target::by_name("v100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("`v100`"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("h100, h200, a100"), std::string::npos) << bad.error().message;
}

TEST(CostModel, RmsNormReferenceGraph) {
  Target t = h100();
  GraphCost c = estimate_cost(rmsnorm_fused(), t);
  ASSERT_EQ(c.kernels.size(), 1u);
  const KernelCost& k = c.kernels[0];
  EXPECT_EQ(k.op_id, 2);
  EXPECT_EQ(k.label, "customized → O");
  EXPECT_EQ(k.blocks, 96);
  // X tile [16,64] and W tile [64,64], f16, loaded every iteration (64) by every block (96):
  // W once from DRAM; X once from DRAM, and its re-reads by the other blocks from L2 (the 96
  // blocks run in one wave).
  EXPECT_EQ(k.load_bytes + k.l2_bytes, 16 * 64 * 2 * 64 * 96 + 64 * 64 * 2 * 64 * 96);
  EXPECT_EQ(k.load_bytes, 16 * 4096 * 2 + 4096 * 6144 * 2);
  EXPECT_EQ(k.l2_bytes, 16 * 4096 * 2 * 95);
  // One [16,64] f16 tile per block.
  EXPECT_EQ(k.store_bytes, 16 * 64 * 2 * 96);
  // The matmul tiles add up to the whole 16×4096×6144 product.
  EXPECT_DOUBLE_EQ(k.tensor_flops, 2.0 * kM * kK * kN);
  // accum: 1/element/iteration; accum_rms_ld: 2/element/iteration; div: once per block.
  EXPECT_DOUBLE_EQ(k.simt_flops, 1024.0 * 64 * 96 + 2048.0 * 64 * 96 + 1024.0 * 96);
  EXPECT_EQ(k.forloop, 64);
  EXPECT_EQ(k.waves, 1);  // 96 blocks on 132 SMs
  EXPECT_DOUBLE_EQ(k.alpha, 1.0 + t.alpha_sm_factor * 132.0 / 96.0);
  expect_formula(k, t);
  // X ×2 + W ×2 (streamed, double-buffered, f16) + matmul tile (f16) + accumulators and div (f32).
  EXPECT_EQ(k.smem_bytes, 2048 * 2 + 8192 * 2 + 2048 + 4096 + 64 + 4096);
  EXPECT_EQ(k.smem_bytes, block_smem_bytes(*rmsnorm_fused().op(2).body));
  EXPECT_DOUBLE_EQ(c.predicted_us, k.predicted_s * 1e6);
  EXPECT_NEAR(c.predicted_us, 25.04, 0.01);  // the worked example of docs/cost-model.md
}

TEST(CostModel, TwoOpProgram) {
  Target t = h100();
  GraphCost c = estimate_cost(rmsnorm_program(), t, generated());
  ASSERT_EQ(c.kernels.size(), 2u);
  const KernelCost& norm = c.kernels[0];
  EXPECT_EQ(norm.label, "rms_norm → Y");
  EXPECT_EQ(norm.load_bytes, 16 * 4096 * 2);
  EXPECT_EQ(norm.store_bytes, 16 * 4096 * 2);
  EXPECT_DOUBLE_EQ(norm.tensor_flops, 0.0);
  EXPECT_DOUBLE_EQ(norm.simt_flops, 3.0 * 16 * 4096);
  EXPECT_EQ(norm.blocks, 16 * 4096 / 1024);
  EXPECT_EQ(norm.smem_bytes, 0);
  expect_formula(norm, t);
  const KernelCost& mm = c.kernels[1];
  EXPECT_EQ(mm.label, "matmul → O");
  // As generated: 64×64 output tiles (one row of 96 blocks over [16, 6144]), K in 64 steps;
  // Y is read by each of the 96 column blocks (once from DRAM, then from L2), W once.
  EXPECT_EQ(mm.load_bytes, 16 * 4096 * 2 + 4096 * 6144 * 2);
  EXPECT_EQ(mm.l2_bytes, 16 * 4096 * 2 * 95);
  EXPECT_EQ(mm.store_bytes, 16 * 6144 * 2);
  EXPECT_DOUBLE_EQ(mm.tensor_flops, 2.0 * kM * kK * kN);
  EXPECT_DOUBLE_EQ(mm.simt_flops, 0.0);
  EXPECT_EQ(mm.blocks, 96);
  EXPECT_EQ(mm.forloop, 64);
  EXPECT_EQ(norm.forloop, 1);
  expect_formula(mm, t);
  EXPECT_DOUBLE_EQ(c.predicted_us, (norm.predicted_s + mm.predicted_s) * 1e6);
}

TEST(CostModel, FusedRmsNormPredictedFasterThanProgram) {
  for (const Target& t : known_targets()) {
    double fused = estimate_cost(rmsnorm_fused(), t).predicted_us;
    double program = estimate_cost(rmsnorm_program(), t, generated()).predicted_us;
    EXPECT_LT(fused, program) << t.name;
  }
  // Also against the program with its matmul through cuBLAS on the calibrated targets, as
  // measured (rmsnorm_b8 on an H200: the fused kernel 14.2 µs, torch.compile's norm kernel and
  // cuBLAS 17.4 µs, bench/results/h200-2026-11-25.md).
  for (const char* name : {"h100", "h200"}) {
    const Target t = *Target::by_name(name);
    const GraphCost program = estimate_cost(rmsnorm_program(), t);
    ASSERT_EQ(program.kernels.size(), 2u);
    EXPECT_TRUE(program.kernels[1].library) << name;
    EXPECT_LT(estimate_cost(rmsnorm_fused(), t).predicted_us, program.predicted_us) << name;
  }
}

// A predefined f16/bf16 matmul predicted as a cuBLAS call (CostOptions::library_matmul, the
// default): every operand moved once at cuBLAS's DRAM rate, the FLOPs at its tensor rate,
// overlapped: max(t_mem, t_comp) + launch. f32 operands keep the generated kernel's model.
TEST(CostModel, LibraryMatmuls) {
  const Target t = *Target::by_name("h200");
  // mistral_7b_qkv_p4096's product: compute-bound, 206 GFLOP at 0.6 PFLOP/s.
  KernelGraph g;
  int a = *g.add_input("A", Shape{4096, 4096}, DType::f16);
  int b = *g.add_input("B", Shape{4096, 6144}, DType::f16);
  ASSERT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {a, b})).ok());
  const KernelCost k = estimate_cost(g, t).kernels[0];
  EXPECT_TRUE(k.library);
  EXPECT_EQ(k.load_bytes, (4096LL * 4096 + 4096LL * 6144) * 2);
  EXPECT_EQ(k.l2_bytes, 0);
  EXPECT_EQ(k.store_bytes, 4096LL * 6144 * 2);
  EXPECT_DOUBLE_EQ(k.tensor_flops, 2.0 * 4096 * 4096 * 6144);
  EXPECT_DOUBLE_EQ(k.t_comp_s, k.tensor_flops / t.blas_tensor_flops);
  EXPECT_DOUBLE_EQ(k.t_mem_s,
                   static_cast<double>(k.load_bytes + k.store_bytes) / t.blas_bandwidth_Bps);
  // A cuBLAS call pays its own launch term, less than a generated kernel's (which also absorbs
  // the prologue and drain of its pipeline).
  EXPECT_DOUBLE_EQ(k.predicted_s, k.t_comp_s + t.blas_launch_s);
  EXPECT_GT(t.blas_launch_s, 0.0);
  EXPECT_LT(t.blas_launch_s, t.launch_overhead_s);
  EXPECT_EQ(k.waves, 1);  // cuBLAS picks its own grid
  EXPECT_NEAR(k.predicted_s * 1e6, 343.6, 0.03 * 343.6);  // torch.compile (cuBLAS), an H200
  // The generated kernel's prediction is far slower (as measured: 2.8x).
  EXPECT_GT(estimate_cost(g, t, generated()).predicted_us, 2 * k.predicted_s * 1e6);
  // A decode shape, bandwidth-bound: the weight's bytes at cuBLAS's DRAM rate.
  KernelGraph d;
  int x = *d.add_input("X", Shape{4, 4096}, DType::bf16);
  int w = *d.add_input("W", Shape{4096, 14336}, DType::bf16);
  ASSERT_TRUE(d.mark_output(*d.add_op(OpKind::Matmul, {x, w})).ok());
  const KernelCost dk = estimate_cost(d, t).kernels[0];
  EXPECT_TRUE(dk.library);
  EXPECT_GT(dk.t_mem_s, dk.t_comp_s);
  EXPECT_DOUBLE_EQ(dk.predicted_s, dk.t_mem_s + t.blas_launch_s);
  // Batched: all batch elements' FLOPs and bytes.
  KernelGraph bt;
  int p = *bt.add_input("P", Shape{8, 512, 128}, DType::f16);
  int q = *bt.add_input("Q", Shape{8, 128, 512}, DType::f16);
  ASSERT_TRUE(bt.mark_output(*bt.add_op(OpKind::Matmul, {p, q})).ok());
  const KernelCost bk = estimate_cost(bt, t).kernels[0];
  EXPECT_TRUE(bk.library);
  EXPECT_DOUBLE_EQ(bk.tensor_flops, 8 * 2.0 * 512 * 128 * 512);
  // f32 (and mixed) operands are generated kernels, predicted as such.
  KernelGraph f;
  int fa = *f.add_input("A", Shape{256, 256}, DType::f32);
  int fb = *f.add_input("B", Shape{256, 256}, DType::f32);
  ASSERT_TRUE(f.mark_output(*f.add_op(OpKind::Matmul, {fa, fb})).ok());
  EXPECT_FALSE(estimate_cost(f, t).kernels[0].library);
  EXPECT_FALSE(estimate_cost(g, t, generated()).kernels[0].library);
}

// A library matmul on rows that are not 16-byte aligned runs cuBLAS's alignment-1 kernels
// (bench/results/h200-2026-11-28-blas-alignment.md): γ times the aligned bound, and with an
// unaligned A or B and fewer 32 × 32 output tiles than SMs each tile's panels at β per block.
TEST(CostModel, LibraryMatmulsOnUnalignedRows) {
  const Target t = *Target::by_name("h200");
  auto pv = [&](int64_t keys) {  // decode attention's P·V: [8, 4, keys] x [8, keys, 128]
    KernelGraph g;
    int p = *g.add_input("P", Shape{8, 4, keys}, DType::f16);
    int v = *g.add_input("V", Shape{8, keys, 128}, DType::f16);
    EXPECT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {p, v})).ok());
    return estimate_cost(g, t).kernels.at(0);
  };
  const KernelCost aligned = pv(4096), odd = pv(4097);
  ASSERT_TRUE(aligned.library && odd.library);
  EXPECT_EQ(odd.blocks, 8 * 4);  // 32 tiles of 32 x 32, one block each
  EXPECT_DOUBLE_EQ(odd.t_throughput_s,
                   static_cast<double>(odd.load_bytes) / 32 / t.blas_unaligned_block_Bps);
  // Measured on an H200: 8.1 µs aligned, 50.6 µs with 4097 keys.
  EXPECT_NEAR(odd.predicted_s * 1e6, 50.6, 0.1 * 50.6);
  EXPECT_GT(odd.predicted_s, 5 * aligned.predicted_s);
  // Only the result unaligned (Q·Kᵀ over 4097 keys with K read transposed in place, ld 128):
  // γ times the aligned bound, no per-tile bound.
  auto qk = [&](int64_t keys) {
    KernelGraph g;
    int q = *g.add_input("Q", Shape{8, 4, 128}, DType::f16);
    int k = *g.add_input("K", Shape{8, keys, 128}, DType::f16);
    int kt = *g.add_op(OpKind::Transpose, {k});
    EXPECT_TRUE(g.mark_output(*g.add_op(OpKind::Matmul, {q, kt})).ok());
    const GraphCost c = estimate_cost(g, t);
    EXPECT_EQ(c.kernels.size(), 1u);  // the transpose is read in place
    return c.kernels.back();
  };
  const KernelCost qk_odd = qk(4097), qk_even = qk(4096);
  EXPECT_DOUBLE_EQ(qk_odd.t_throughput_s,
                   t.blas_unaligned_factor * std::max(qk_odd.t_mem_s, qk_odd.t_comp_s));
  EXPECT_DOUBLE_EQ(qk_even.t_throughput_s, std::max(qk_even.t_mem_s, qk_even.t_comp_s));
  EXPECT_EQ(qk_odd.blocks, t.sm_count);
}

TEST(CostModel, MoreBlocksLowerAlpha) {
  Target t = *Target::by_name("a100");  // c_α = 1 (MCFuser's); the calibrated targets hold 0.1
  KernelCost wide = estimate_cost(rmsnorm_fused(128), t).kernels[0];   // 48 blocks
  KernelCost narrow = estimate_cost(rmsnorm_fused(64), t).kernels[0];  // 96 blocks
  KernelCost many = estimate_cost(rmsnorm_fused(32), t).kernels[0];    // 192 blocks
  EXPECT_EQ(wide.blocks, 48);
  EXPECT_EQ(many.blocks, 192);
  EXPECT_GT(wide.alpha, narrow.alpha);
  EXPECT_GT(narrow.alpha, many.alpha);
  EXPECT_GT(many.alpha, 1.0);
  // The replicated X is loaded by every block: more blocks re-read more of it from L2; W and
  // X come from DRAM once.
  EXPECT_EQ(wide.load_bytes, many.load_bytes);
  EXPECT_EQ(wide.l2_bytes - many.l2_bytes, 16 * 4096 * 2 * (48 - 192));
  // W's 32-column f16 tiles have 64-byte rows, parts of longer rows: every W byte counts as
  // narrow; X's [16, 64] tiles (128-byte rows) and 64 or 128 W columns do not.
  EXPECT_EQ(many.narrow_bytes, kK * kN * 2);
  EXPECT_EQ(narrow.narrow_bytes, 0);
  EXPECT_EQ(wide.narrow_bytes, 0);
}

TEST(CostModel, ReReadsAcrossWavesOfLargeInputsGoToDram) {
  // A predefined matmul [4096, 8192] x [8192, 8192]: 64 x 128 blocks of 64 x 64, far more than
  // one wave (132 SMs x 7 blocks of 32 KB), and 192 MB of inputs, more than half the L2: only
  // re-reads within a wave (1 / waves of them) hit in L2.
  KernelGraph g;
  int a = *g.add_input("A", Shape{4096, 8192}, DType::f16);
  int b = *g.add_input("B", Shape{8192, 8192}, DType::f16);
  int o = *g.add_op(OpKind::Matmul, {a, b});
  ASSERT_TRUE(g.mark_output(o).ok());
  for (const Target& t : {h100(), *Target::by_name("h200")}) {
    const KernelCost k = estimate_cost(g, t, generated()).kernels[0];
    EXPECT_EQ(k.blocks, 64 * 128);
    const int64_t a_bytes = 4096LL * 8192 * 2, b_bytes = 8192LL * 8192 * 2;
    const int64_t loaded = a_bytes * 128 + b_bytes * 64, unique = a_bytes + b_bytes;
    const int64_t waves = (64 * 128 + 132 * 7 - 1) / (132 * 7);
    EXPECT_EQ(waves, 9);
    EXPECT_EQ(k.waves, waves) << t.name;
    EXPECT_EQ(k.load_bytes + k.l2_bytes, loaded) << t.name;
    EXPECT_NEAR(static_cast<double>(k.l2_bytes), static_cast<double>(loaded - unique) / waves, 2.0)
        << t.name;
    expect_formula(k, t);
  }
  // Small inputs stay in L2 whatever the waves: the same shape at 256 x 256 x 256.
  KernelGraph s;
  int sa = *s.add_input("A", Shape{256, 256}, DType::f16);
  int sb = *s.add_input("B", Shape{256, 256}, DType::f16);
  int so = *s.add_op(OpKind::Matmul, {sa, sb});
  ASSERT_TRUE(s.mark_output(so).ok());
  const KernelCost k = estimate_cost(s, h100(), generated()).kernels[0];
  EXPECT_EQ(k.load_bytes, 2 * 256 * 256 * 2);
  EXPECT_EQ(k.l2_bytes, 3 * 256 * 256 * 2 * 2);
}

TEST(CostModel, LoopInvariantTilesAreHoisted) {
  // A[16,256] split over 4 blocks with fmap φ: the same [16,64] tile every iteration.
  // C[16,1024] split over 4 blocks and 4 iterations: a new [16,64] tile every iteration.
  BlockGraph b = *BlockGraph::make({4, 1, 1}, 128, 4);
  int a = *b.add_input(Shape{16, 256}, {1, kReplicate, kReplicate}, kReplicate);
  int c = *b.add_input(Shape{16, 1024}, {1, kReplicate, kReplicate}, 1);
  int s = *b.add_op(OpKind::Add, {a, c});
  int acc = *b.add_op(OpKind::AccumSum, {s});
  ASSERT_TRUE(b.add_output(acc, {1, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int ta = *g.add_input("A", Shape{16, 256}, DType::f16);
  int tc = *g.add_input("C", Shape{16, 1024}, DType::f32);
  auto outs = g.add_customized({ta, tc}, b, {"O"});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  ASSERT_TRUE(g.mark_output((*outs)[0]).ok());
  KernelCost k = estimate_cost(g, h100()).kernels[0];
  // Each tensor is read exactly once overall: A once per block, C once per iteration.
  EXPECT_EQ(k.load_bytes, 16 * 256 * 2 + 16 * 1024 * 4);
  EXPECT_EQ(k.store_bytes, 16 * 256 * 2);                     // output dtype follows input 0 (f16)
  EXPECT_DOUBLE_EQ(k.simt_flops, (1024.0 + 1024.0) * 4 * 4);  // add + accum per iteration
  // Hoisted A counted once, streamed C twice (f32), add (loop, f16 as input 0), accum (f32).
  EXPECT_EQ(k.smem_bytes, 1024 * 2 + 1024 * 4 * 2 + 1024 * 2 + 1024 * 4);
  // Without dtypes the estimate assumes 2-byte tiles.
  EXPECT_EQ(block_smem_bytes(b), 1024 * 2 + 1024 * 2 * 2 + 1024 * 2 + 1024 * 4);
}

// Tensors may have up to 2^48 elements (shape.h); trip counts times tile bytes go far beyond
// 64 bits. Every count saturates instead of wrapping negative or dividing by zero.
TEST(CostModel, HugeGraphsSaturateInsteadOfOverflowing) {
  const int64_t e24 = int64_t{1} << 24;
  // 2^24 blocks, each reading the whole of X (replicated: 2^48 elements, 2^49 bytes).
  BlockGraph b = *BlockGraph::make({1 << 24, 1, 1}, 128, 1);
  int x = *b.add_input(Shape{e24, e24}, kAllReplicated, kReplicate);
  int w = *b.add_input(Shape{e24, e24}, {0, kReplicate, kReplicate}, kReplicate);
  (void)x;
  int acc = *b.add_op(OpKind::AccumSum, {w});
  ASSERT_TRUE(b.add_output(acc, {0, kReplicate, kReplicate}).ok());
  KernelGraph g;
  int tx = *g.add_input("X", Shape{e24, e24}, DType::f16);
  int tw = *g.add_input("W", Shape{e24, e24}, DType::f16);
  auto outs = g.add_customized({tx, tw}, b, {"O"});
  ASSERT_TRUE(outs.ok()) << outs.error().message;
  // A predefined matmul of two 2^48-element operands, and a huge elementwise op.
  int m = *g.add_op(OpKind::Matmul, {tx, tw}, {}, "M");
  int e = *g.add_op(OpKind::Exp, {m}, {}, "E");
  ASSERT_TRUE(g.mark_output((*outs)[0]).ok());
  ASSERT_TRUE(g.mark_output(e).ok());
  for (const Target& t : known_targets()) {
    GraphCost c = estimate_cost(g, t);
    ASSERT_EQ(c.kernels.size(), 3u);
    for (const KernelCost& k : c.kernels) {
      EXPECT_GE(k.load_bytes, 0) << k.label;
      EXPECT_GE(k.l2_bytes, 0) << k.label;
      EXPECT_GE(k.store_bytes, 0) << k.label;
      EXPECT_GE(k.smem_bytes, 0) << k.label;
      EXPECT_GE(k.blocks, 1) << k.label;
      EXPECT_TRUE(std::isfinite(k.predicted_s) && k.predicted_s > 0) << k.label;
    }
    // X alone is 2^49 bytes read by 2^24 blocks: the count saturates.
    EXPECT_EQ(c.kernels[0].load_bytes, std::numeric_limits<int64_t>::max());
    // Per block: X whole (2^49 B), a W tile (2^25 B), the f32 accumulator (2^26 B).
    EXPECT_EQ(c.kernels[0].smem_bytes,
              (int64_t{1} << 49) + (int64_t{1} << 25) + (int64_t{1} << 26));
    EXPECT_TRUE(std::isfinite(c.predicted_us));
  }
}

TEST(CostModel, ElementwiseAndTranscendentalFlops) {
  KernelGraph g;
  int x = *g.add_input("X", Shape{4, 2048}, DType::bf16);
  int e = *g.add_op(OpKind::Exp, {x}, {}, "E");
  int m = *g.add_op(OpKind::Mul, {e, x}, {}, "M");
  ASSERT_TRUE(g.mark_output(m).ok());
  GraphCost c = estimate_cost(g, h100());
  ASSERT_EQ(c.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(c.kernels[0].simt_flops, 4.0 * 8192);  // exp: a few per element
  EXPECT_DOUBLE_EQ(c.kernels[1].simt_flops, 8192.0);      // mul: one per element
  EXPECT_EQ(c.kernels[1].load_bytes, 2 * 8192 * 2);       // both inputs, bf16
  EXPECT_EQ(c.kernels[0].blocks, 8);
}

// A transpose whose readers are customized kernels is read in place (kernel_views.h): no
// kernel, no bytes. The same transpose read by a predefined op is a copy kernel.
TEST(CostModel, LayoutViewsCostNothing) {
  auto graph = [](bool predefined_reader) {
    KernelGraph g;
    int k = *g.add_input("K", Shape{256, 64}, DType::f16);
    int kt = *g.add_op(OpKind::Transpose, {k}, {}, "Kt");  // [64, 256]
    BlockGraph b = *BlockGraph::make({4, 1, 1}, 128, 1);
    int ki = *b.add_input(Shape{64, 256}, {1, kReplicate, kReplicate}, kReplicate);  // [64, 64]
    int e = *b.add_op(OpKind::Exp, {ki});
    int a = *b.add_op(OpKind::AccumSum, {e});
    EXPECT_TRUE(b.add_output(a, {1, kReplicate, kReplicate}).ok());
    int o = (*g.add_customized({kt}, std::move(b), {"O"}))[0];
    EXPECT_TRUE(g.mark_output(o).ok());
    if (predefined_reader) EXPECT_TRUE(g.mark_output(*g.add_op(OpKind::Relu, {kt}, {}, "R")).ok());
    return g;
  };
  const Target h200 = *Target::by_name("h200");
  GraphCost view = estimate_cost(graph(false), h200);
  ASSERT_EQ(view.kernels.size(), 1u);  // the customized kernel alone
  EXPECT_EQ(view.kernels[0].load_bytes + view.kernels[0].l2_bytes, 256 * 64 * 2);
  GraphCost copy = estimate_cost(graph(true), h200);
  ASSERT_EQ(copy.kernels.size(), 3u);  // the transpose, the customized kernel, the relu
  EXPECT_EQ(copy.kernels[0].store_bytes, 256 * 64 * 2);
  EXPECT_GT(copy.predicted_us, view.predicted_us);
}

// Slices whose source's kernel writes them (routed parts, output_routes.h) are no kernels and
// move no bytes of their own: the kernel stores T's bytes into the parts. Slices the kernel
// cannot route (a boundary inside a tile) are packed outputs (packed_outputs.h), no kernels
// either; with another reader of T they are neither, and copy kernels.
TEST(CostModel, RoutedSlicesCostNothing) {
  const Target h200 = *Target::by_name("h200");
  GraphCost routed = estimate_cost(testing::sliced_projection({0, 64, 80}, {64, 80, 96}), h200);
  ASSERT_EQ(routed.kernels.size(), 1u);
  EXPECT_EQ(routed.kernels[0].store_bytes, 16 * 96 * 2);
  GraphCost packed = estimate_cost(testing::sliced_projection({0, 72}, {72, 96}), h200);
  ASSERT_EQ(packed.kernels.size(), 1u);
  GraphCost copied = estimate_cost(testing::sliced_projection({0, 72}, {72, 96}, 16, true), h200);
  ASSERT_EQ(copied.kernels.size(), 4u);  // the kernel, two copies, the relu
  EXPECT_GT(copied.predicted_us, packed.predicted_us + 2 * h200.launch_overhead_s * 1e6 * 0.9);
}

TEST(CostModel, SharedMemoryPruneSlack) {
  Target t = h100();
  EXPECT_TRUE(fits_shared_memory(232448, t));
  EXPECT_TRUE(fits_shared_memory(278937, t));  // ≤ 1.2 × 232448 = 278937.6
  EXPECT_FALSE(fits_shared_memory(278938, t));
  EXPECT_FALSE(fits_shared_memory(278938, *Target::by_name("a100")));
  EXPECT_FALSE(fits_shared_memory(200301, *Target::by_name("a100")));  // > 1.2 × 166912
}

// Every reference μGraph of examples/ (the graphs the search must rediscover) gets a finite,
// positive prediction and a shared-memory estimate that pruning keeps on every target.
// Warpgroup MMA (docs/cost-model.md, "Warpgroup MMA"): on a target with wgmma a kernel whose
// plan under the knob runs a matmul as wgmma is charged those FLOPs at the wgmma rate; a target
// without wgmma, the default-variant prediction (CostOptions::wgmma off) and a kernel no matmul
// of which can take wgmma are predicted as before.
TEST(CostModel, WgmmaOnTargetsThatHaveIt) {
  const Target h200 = *Target::by_name("h200");
  EXPECT_TRUE(h200.wgmma);
  EXPECT_TRUE(h100().wgmma);
  EXPECT_GT(h200.wgmma_tensor_flops, h200.tensor_peak_flops);
  const Target a100 = *Target::by_name("a100");
  EXPECT_FALSE(a100.wgmma);
  EXPECT_EQ(a100.wgmma_tensor_flops, 0.0);
  Target no_wgmma = h200;  // the same constants on an architecture without wgmma
  no_wgmma.wgmma = false;
  CostOptions mma_sync;
  mma_sync.wgmma = false;
  // Attention with 64 query rows per block (one warpgroup): O = P·V takes wgmma, S = Q·K keeps
  // mma.sync (Q's fragments are hoisted); with QK norms in bf16 both take it (the normalized Q
  // is a computed tile, read per step). A matmul of 48 rows cannot.
  const KernelGraph attention = testing::attention_graph(8, 64, 64, 4096, 4, 64, 32, false);
  const KernelGraph qknorm =
      testing::attention_graph(8, 64, 64, 4096, 4, 64, 32, true, DType::bf16);
  const KernelGraph rows48 = testing::plain_matmul(48, 1024, 64, 64, 128, false, DType::f16);
  for (const KernelGraph* g : {&attention, &qknorm}) {
    const GraphCost with = estimate_cost(*g, h200);
    const GraphCost without = estimate_cost(*g, no_wgmma);
    const GraphCost default_variant = estimate_cost(*g, h200, mma_sync);
    EXPECT_LT(with.predicted_us, without.predicted_us);
    EXPECT_DOUBLE_EQ(without.predicted_us, default_variant.predicted_us);
    ASSERT_EQ(with.kernels.size(), without.kernels.size());
    // The first kernel's P·V (half its matmul FLOPs), or both products, at the wgmma rate.
    const KernelCost& k = with.kernels[0];
    EXPECT_DOUBLE_EQ(k.wgmma_flops, g == &attention ? k.tensor_flops / 2 : k.tensor_flops);
    EXPECT_LT(k.t_comp_s, without.kernels[0].t_comp_s);
    for (const KernelCost& c : without.kernels) EXPECT_EQ(c.wgmma_flops, 0.0);
    for (const KernelCost& c : default_variant.kernels) EXPECT_EQ(c.wgmma_flops, 0.0);
    for (const KernelCost& c : with.kernels) expect_formula(c, h200);
    // No wgmma on the a100: the knob changes nothing there.
    EXPECT_DOUBLE_EQ(estimate_cost(*g, a100).predicted_us,
                     estimate_cost(*g, a100, mma_sync).predicted_us);
  }
  const GraphCost r48 = estimate_cost(rows48, h200);
  EXPECT_EQ(r48.kernels[0].wgmma_flops, 0.0);
  EXPECT_DOUBLE_EQ(r48.predicted_us, estimate_cost(rows48, h200, mma_sync).predicted_us);
  // A plain matmul with whole 64-row tiles is no attention chain: the term, fitted on
  // attention, is not applied (on GEMM chains it predicted wgmma forms far too fast).
  const KernelGraph rows64 = testing::plain_matmul(64, 1024, 64, 64, 128, false, DType::f16);
  const GraphCost r64 = estimate_cost(rows64, h200);
  EXPECT_EQ(r64.kernels[0].wgmma_flops, 0.0);
  EXPECT_DOUBLE_EQ(r64.predicted_us, estimate_cost(rows64, h200, mma_sync).predicted_us);
}

// Head dim 128 (docs/codegen.md, "wgmma": K and V tiles [keys, 128] stored as 64-column atoms):
// both products of the searches' prefill attention form take wgmma under the knob, so on the
// h200 all the kernel's tensor FLOPs are charged at the wgmma rate.
TEST(CostModel, WgmmaAtHeadDim128) {
  const Target h200 = *Target::by_name("h200");
  CostOptions mma_sync;
  mma_sync.wgmma = false;
  for (const char* file : {"attn_d128_128x64", "attn_d128_128x64.bf16"}) {
    auto g = load_graph(std::string("tests/data/wgmma/") + file + ".json");
    ASSERT_TRUE(g.ok()) << g.error().message;
    const GraphCost with = estimate_cost(*g, h200);
    const GraphCost without = estimate_cost(*g, h200, mma_sync);
    ASSERT_EQ(with.kernels.size(), 1u) << file;
    const KernelCost& k = with.kernels[0];
    EXPECT_GT(k.tensor_flops, 0.0) << file;
    EXPECT_DOUBLE_EQ(k.wgmma_flops, k.tensor_flops) << file;
    EXPECT_LT(with.predicted_us, without.predicted_us) << file;
    EXPECT_EQ(without.kernels[0].wgmma_flops, 0.0) << file;
    expect_formula(k, h200);
  }
}

TEST(CostModel, ReferenceExamplesArePredictedAndKept) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("examples/reference")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto g = load_graph(entry.path().string());
    ASSERT_TRUE(g.ok()) << g.error().message;
    for (const Target& t : known_targets()) {
      GraphCost c = estimate_cost(*g, t);
      ASSERT_FALSE(c.kernels.empty()) << entry.path();
      double launches = 0;  // a cuBLAS call has a launch term of its own
      for (const KernelCost& k : c.kernels)
        launches += k.library ? t.blas_launch_s : t.launch_overhead_s;
      EXPECT_GT(c.predicted_us, launches * 1e6) << entry.path();
      for (const KernelCost& k : c.kernels) {
        expect_formula(k, t);
        EXPECT_GT(k.load_bytes, 0) << entry.path();
        EXPECT_GT(k.store_bytes, 0) << entry.path();
        if (g->op(k.op_id).kind == OpKind::Customized) {
          EXPECT_GT(k.smem_bytes, 0);
          if (t.name != "a100")  // the paper's graphs target Hopper-sized shared memory
            EXPECT_TRUE(fits_shared_memory(k.smem_bytes, t))
                << entry.path() << " kernel " << k.op_id << ": " << k.smem_bytes << " B";
        }
      }
    }
  }
  EXPECT_GE(files, 6);
}

std::filesystem::path temp_file(const std::string& stem) {
  return std::filesystem::temp_directory_path() /
         (stem + "_" + std::to_string(::getpid()) + ".json");
}

// Runs `bin args`, returning its combined output and setting its exit code.
std::string run_tool(const char* bin, const std::string& args, int& code) {
  auto out = temp_file("strata_cost_test_out");
  int status =
      std::system((std::string(bin) + " " + args + " > " + out.string() + " 2>&1").c_str());
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(out);
  return ss.str();
}

TEST(CostCommand, PrintsTableAndRejectsBadInput) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN must point at the strata tool (run through ctest)";
  auto path = temp_file("strata_cost_test_rmsnorm");
  ASSERT_TRUE(save_graph_json(rmsnorm_fused(), path.string()).ok());
  int code = -1;
  std::string out = run_tool(bin, "cost " + path.string() + " --target h200", code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("customized → O"), std::string::npos) << out;
  EXPECT_NE(out.find("50462720"), std::string::npos) << out;  // DRAM bytes read
  EXPECT_NE(out.find("12451840"), std::string::npos) << out;  // X re-read from L2
  EXPECT_NE(out.find("total predicted"), std::string::npos) << out;
  out = run_tool(bin, "cost " + path.string() + " --json", code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"blocks\": 96"), std::string::npos) << out;
  EXPECT_NE(out.find("\"waves\": 1"), std::string::npos) << out;
  // A predefined f16 matmul: a cuBLAS call by default, a generated kernel of 64 × 64 tiles
  // with --no-library-matmul (4 × 4 blocks, 4 iterations).
  KernelGraph mm;
  int a = *mm.add_input("A", Shape{256, 256}, DType::f16);
  int b = *mm.add_input("B", Shape{256, 256}, DType::f16);
  ASSERT_TRUE(mm.mark_output(*mm.add_op(OpKind::Matmul, {a, b})).ok());
  auto mm_path = temp_file("strata_cost_test_matmul");
  ASSERT_TRUE(save_graph_json(mm, mm_path.string()).ok());
  out = run_tool(bin, "cost " + mm_path.string() + " --json", code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"library\": true"), std::string::npos) << out;
  out = run_tool(bin, "cost " + mm_path.string() + " --json --no-library-matmul", code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"library\": false"), std::string::npos) << out;
  EXPECT_NE(out.find("\"blocks\": 16"), std::string::npos) << out;
  EXPECT_NE(out.find("\"forloop\": 4"), std::string::npos) << out;
  std::filesystem::remove(mm_path);
  out = run_tool(bin, "cost " + path.string() + " --target v100", code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("valid targets: h100, h200, a100"), std::string::npos) << out;
  out = run_tool(bin, "cost /nonexistent/graph.json", code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("cannot open"), std::string::npos) << out;
  std::filesystem::remove(path);
}

// Concurrent launches (CostOptions::concurrent_launches, off by default): a chain is predicted
// as the sum of its kernels either way; QKV's three prefill products, K's and V's 64 output
// tiles each on half of the SMs beside Q, are predicted shorter than the sum and no shorter than
// the longest kernel; a LoRA's X·W beside X·A too; with the option off the prediction is the sum.
namespace concurrent {

KernelGraph program(const char* text) {
  auto g = parse_program(text, "concurrent.strata");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

TEST(CostModelConcurrent, ChainsAreSumsAndIndependentLaunchesOverlap) {
  const Target t = *Target::by_name("h200");
  CostOptions on;
  on.concurrent_launches = true;
  const KernelGraph chain = program(
      "input X: f16[2048, 2048]\ninput W: f16[2048, 2048]\ninput U: f16[2048, 512]\n"
      "Y = matmul(silu(matmul(X, W)), U)\noutput Y\n");
  const GraphCost c_on = estimate_cost(chain, t, on), c_off = estimate_cost(chain, t);
  EXPECT_NEAR(c_on.predicted_us, c_on.sequential_us, 1e-9);
  EXPECT_NEAR(c_off.predicted_us, c_off.sequential_us, 1e-9);
  EXPECT_NEAR(c_on.sequential_us, c_off.predicted_us, 1e-9);
  for (const char* text :
       {"input X: f16[2048, 2048]\ninput Wq: f16[2048, 2048]\ninput Wk: f16[2048, 512]\n"
        "input Wv: f16[2048, 512]\nQ = matmul(X, Wq)\nK = matmul(X, Wk)\nV = matmul(X, Wv)\n"
        "output Q, K, V\n",
        "input X: f16[2048, 2048]\ninput W: f16[2048, 512]\ninput A: f16[2048, 32]\n"
        "input B: f16[32, 512]\nY = add(matmul(X, W), matmul(matmul(X, A), B))\noutput Y\n"}) {
    const KernelGraph g = program(text);
    const GraphCost off = estimate_cost(g, t), conc = estimate_cost(g, t, on);
    EXPECT_NEAR(off.predicted_us, off.sequential_us, 1e-9) << text;
    double longest = 0;
    for (const KernelCost& k : conc.kernels) longest = std::max(longest, k.predicted_s * 1e6);
    EXPECT_LT(conc.predicted_us, 0.95 * off.predicted_us) << text;
    EXPECT_GE(conc.predicted_us, longest) << text;
    EXPECT_NEAR(conc.sequential_us, off.predicted_us, 1e-9) << text;
  }
}

}  // namespace concurrent

}  // namespace
}  // namespace strata
