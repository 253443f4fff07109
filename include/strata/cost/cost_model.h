// The analytical cost model (docs/cost-model.md; MCFuser §IV-A, eq. 2-5). Documented with the
// source
// of every constant in docs/cost-model.md.
//
// Every kernel of a kernel graph is predicted independently and the predictions are summed
// (CostOptions::concurrent_launches: overlapped where the launches run concurrently):
//   t = max((t_mem · α + t_comp · u + F · t_iter + t_simt + t_pass) · tail, t_latency) + launch,
//   α = 1 + c_α · N_SM / N_blocks,   u = max(1, N_SM / N_blocks),
// tail the last wave's empty slots and t_latency the latency bound of a planned kernel
// (KernelCost::t_throughput_s, t_latency_s; docs/cost-model.md, "Latency bound and the last
// wave's tail"),
// where t_mem is the DRAM traffic of the kernel's loads and stores divided by the sustained
// bandwidth plus the re-reads that hit in L2 divided by the L2 bandwidth, and t_comp its FLOPs
// divided by the peak rate (tensor-core rate for matmul FLOPs, SIMT rate for the rest), u the
// underfill of compute (a grid of fewer blocks than SMs computes on only that many SMs), α that of
// the memory stream, F the for-loop's trip count and t_iter the latency of one iteration (a tile
// load that cannot be hidden plus the barriers; it bounds kernels that loop over tiny tiles).
// MCFuser's α has c_α = 1; ours is fitted to measurements. For a customized kernel, traffic and
// FLOPs are tile sizes times the trip counts of the loops around them (grid blocks, for-loop
// iterations); a tile that does not change across the for-loop (fmap φ) is loaded once per block.
// Bytes of an input read beyond its size are re-reads of tiles other blocks read too: they hit in
// L2 when the blocks run in one wave or the kernel's inputs fit in half the L2, else all but 1 /
// waves of them go to DRAM. A predefined kernel op is one library-like kernel reading each input
// once and writing its output once (a matmul re-reads A per column of blocks and B per row of
// blocks); a predefined f16/bf16 matmul emitted as a cuBLAS call is max(t_mem, t_comp) + its launch
// with t_comp at cuBLAS's sustained rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cost/code_features.h"
#include "strata/util/arch_traits.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// The cost model's constants for one GPU beyond its architecture's facts: rates fitted to
/// measurements or taken from the model (docs/cost-model.md). All rates are sustained or peak
/// per second.
struct CostConstants {
  double mem_bandwidth_Bps;     ///< sustained DRAM bandwidth, bytes/s
  double l2_bandwidth_Bps;      ///< rate of tile re-reads that hit in L2, bytes/s
  double narrow_bandwidth_Bps;  ///< extra cost of bytes in narrow tiles (rows < 128 B), bytes/s
  double tensor_peak_flops;     ///< fp16/bf16 tensor-core rate (dense) the model uses, FLOP/s
  double simt_peak_flops;       ///< fp32 CUDA-core rate (elementwise, reductions), FLOP/s
  double launch_overhead_s;     ///< per kernel launch within a CUDA graph, seconds
  double alpha_sm_factor;       ///< c_α in α = 1 + c_α · N_SM / N_blocks
  double iteration_latency_s;   ///< t_iter: per for-loop iteration of a customized kernel
  /// The tensor-core rate cuBLAS sustains on a predefined f16/bf16 matmul (a library call,
  /// library_matmul_supported), FLOP/s: measured on the suite's prefill matmuls where a library
  /// gemm is what PyTorch runs (docs/cost-model.md, "Predefined matmuls through cuBLAS").
  double blas_tensor_flops;
  /// The DRAM rate cuBLAS sustains on a bandwidth-bound predefined matmul (few rows against a
  /// large weight), bytes/s (same source).
  double blas_bandwidth_Bps;
  /// t_simt: per dependent multiply-add of a thread's SIMT matmul chains, per wave (the
  /// latency of a shared-memory load and an FMA that each output's chain over K waits on;
  /// docs/cost-model.md, "SIMT matmul chains").
  double simt_mm_step_s;
  /// t_barrier: per block-level barrier of one loop iteration, per dependent iteration an SM
  /// runs after the first ((waves · ⌈F / loop groups⌉ − 1) · loop barriers; the first waits on
  /// the prologue, which the launch term charges; docs/cost-model.md, "Latency bound and the
  /// last wave's tail").
  double barrier_latency_s;
  /// t_tbyte: per byte one thread loads (DRAM or L2) over the kernel, per wave: what a thread
  /// with many bytes to load waits when few threads share the work (same section).
  double thread_byte_latency_s;
  /// t_rbyte: t_tbyte for a kernel that loads into registers (KernelCodeFeatures::
  /// register_loads): a thread waits on each batch of vector loads it issues (docs/cost-model.md,
  /// "Loads into registers").
  double register_byte_latency_s;
  /// γ: a library matmul with an operand or result whose rows are not 16-byte aligned (row
  /// stride or start not a multiple of 16 bytes: 4097 keys, a vocabulary of 32001) runs
  /// cuBLAS's alignment-1 kernels, γ times the aligned call's throughput bound
  /// (docs/cost-model.md, "Library matmuls on unaligned rows").
  double blas_unaligned_factor;
  /// β: with an unaligned A or B and fewer 32 × 32 output tiles than SMs (no split-K), each
  /// tile's block streams its A and B panels at this rate, bytes/s (same section).
  double blas_unaligned_block_Bps;
  /// t_pass: per element a thread handles in a pass over a tile outside the matmuls
  /// (KernelCodeFeatures::loop_pass_steps, once_pass_steps), per wave (docs/cost-model.md,
  /// "Passes outside the matmuls").
  double pass_step_s;
  /// The launch term of a predefined matmul run as a cuBLAS call, in place of
  /// launch_overhead_s (which also absorbs a generated kernel's prologue and drain),
  /// seconds (docs/cost-model.md, "The launch of a cuBLAS call").
  double blas_launch_s;
  /// The rate at which a matmul that the wgmma plan runs as warpgroup MMA (plan_wgmma,
  /// wgmma_plan.h) is charged its tensor FLOPs, in place of tensor_peak_flops, FLOP/s; 0 on a
  /// target without wgmma (ArchTraits::wgmma false: every matmul at tensor_peak_flops). An
  /// effective rate of the model's additive form, fitted to the ratio of each graph's time with
  /// and without the knob (docs/cost-model.md, "Warpgroup MMA").
  double wgmma_tensor_flops;
  /// t_sync: per block-level barrier a block passes in its loop after its first iteration,
  /// spread over the SMs and added to the throughput bound (N_blocks · (⌈F / loop groups⌉ − 1) ·
  /// loop barriers / N_SM · t_sync): the issue time an SM loses while a block's warps drain to
  /// each barrier, which other resident blocks do not hide (docs/cost-model.md, "Barriers in
  /// the throughput bound").
  double barrier_sync_s;
  /// t_chain: per dependent loop iteration an SM runs after the first (waves · ⌈F / loop
  /// groups⌉ − 1), divided by the blocks it holds, in the latency bound: the wait of an
  /// iteration's dependent chain (its tiles' arrival, the matmuls, reductions and barriers
  /// that follow one another) that a block alone cannot overlap and b resident blocks hide
  /// b-fold (docs/cost-model.md, "The iteration chain of few-block kernels").
  double iteration_chain_s;
};

/// A GPU as the cost model sees it: the architecture's facts (arch_traits.h: name, SM count
/// N_SM in α, opt-in shared memory per block, L2 size, …) and the model's constants.
struct Target : ArchTraits, CostConstants {
  /// The built-in target of that name; the error lists the valid names.
  static Result<Target> by_name(std::string_view name);
  /// The built-in target of the architecture a device is by its name (known_arch_for_device,
  /// e.g. "NVIDIA H200" → h200), else the default architecture's (h100).
  static Target for_device(std::string_view device_name);
};

/// The built-in targets, in the order they are listed to users (the one table of constants).
const std::vector<Target>& known_targets();

/// The prediction for one kernel (one non-input op of the kernel graph).
struct KernelCost {
  int op_id;             ///< kernel op id
  std::string label;     ///< "<op> → <output names>"
  int64_t load_bytes;    ///< DRAM bytes read, trip counts included
  int64_t l2_bytes;      ///< bytes re-read by further blocks that hit in L2
  int64_t narrow_bytes;  ///< bytes loaded in tiles whose rows are shorter than 128 B (a part
                         ///< of a longer row: every row a separate, partly used L2 line)
  int64_t store_bytes;   ///< DRAM bytes written
  double tensor_flops;   ///< matmul FLOPs (tensor cores)
  /// Of tensor_flops, those of the matmuls the kernel's wgmma plan runs as warpgroup MMA
  /// (CostOptions::wgmma on a target with wgmma; charged at Target::wgmma_tensor_flops).
  double wgmma_flops = 0;
  double simt_flops;     ///< all other FLOPs (CUDA cores)
  int64_t blocks;        ///< thread blocks of the launch (N_blocks in α)
  int64_t forloop;       ///< for-loop trip count F (1 for predefined ops)
  /// Waves of the launch: ⌈N_blocks / (N_SM · blocks per SM)⌉, blocks per SM limited by the
  /// shared-memory estimate, 2048 threads per SM and 32 blocks (1 for a cuBLAS call, which
  /// picks its own grid). waves · F is the number of dependent loop iterations an SM runs.
  int64_t waves = 1;
  /// Blocks of the kernel one SM holds at once (the waves' rule: shared memory, 2048 threads,
  /// 32 blocks; 1 for a cuBLAS call).
  int64_t blocks_per_sm = 1;
  double alpha;          ///< 1 + c_α · N_SM / N_blocks (underfill of the memory stream)
  double underfill;      ///< max(1, N_SM / N_blocks) (compute runs on min(N_blocks, N_SM) SMs)
  double t_mem_s;        ///< (load_bytes + store_bytes) / bandwidth + l2_bytes / L2 bandwidth
  /// (tensor_flops − wgmma_flops) / tensor peak + wgmma_flops / wgmma rate + simt_flops / SIMT
  /// peak
  double t_comp_s;
  /// waves · (F · loop + once SIMT matmul steps per thread) · t_simt: the serial chains of the
  /// kernel's SIMT matmuls (0 when every matmul runs on the tensor cores).
  double t_simt_s = 0;
  /// waves · (⌈F / loop groups⌉ · loop + once pass steps per thread) · t_pass: the kernel's
  /// passes over tiles outside the matmuls (elementwise ops, reductions and norms on their own;
  /// a loop group's team passes over its own iterations).
  double t_pass_s = 0;
  /// N_blocks · (⌈F / loop groups⌉ − 1) · loop barriers / N_SM · t_sync: the barriers the
  /// kernel's blocks pass after their first iteration, spread over the SMs (0 for a kernel
  /// without a plan; part of t_throughput_s, outside the tail).
  double t_sync_s = 0;
  /// (waves · ⌈F / loop groups⌉ − 1) · (loop barriers · t_barrier + t_chain / blocks per SM) +
  /// waves · (load + L2 bytes) / (blocks · threads) · t_tbyte: the latency bound of a planned
  /// kernel (0 for a kernel without a plan: a cuBLAS call or a generic predefined kernel).
  double t_latency_s = 0;
  /// (t_mem_s · alpha + t_comp_s · underfill + F · t_iter + t_simt_s + t_pass_s) · tail +
  /// t_sync_s, tail = ⌈blocks / N_SM⌉ · N_SM / blocks for several waves (the last one's empty
  /// slots), else 1: the throughput bound (for a cuBLAS call max(t_mem_s, t_comp_s)).
  double t_throughput_s = 0;
  double predicted_s;    ///< max(t_throughput_s, t_latency_s) + launch
  int64_t smem_bytes;    ///< block_smem_bytes of a customized kernel; 0 for predefined ops
  /// A predefined matmul predicted as a cuBLAS call (CostOptions::library_matmul): predicted_s
  /// = max(t_mem_s, t_comp_s) + launch, t_mem_s at Target::blas_bandwidth_Bps, t_comp_s at
  /// Target::blas_tensor_flops, α = u = 1.
  bool library = false;
  /// Features of the kernel's code (code_features.h), when CostOptions::code_features asked for
  /// them and the emitter plans the kernel (a customized kernel or a lowered matmul). The
  /// prediction plans a customized kernel for its SIMT matmul steps (t_simt_s) whenever a matmul
  /// of its block graph cannot run on the tensor cores (matmul_tiles_fit_mma, or an input type
  /// without mma), and for its loop barriers and threads (t_latency_s) when the target's latency
  /// constants are not 0.
  std::optional<KernelCodeFeatures> code;
};

/// How the kernels will be emitted, as far as the prediction depends on it.
struct CostOptions {
  /// Predefined matmuls that library_matmul_supported accepts run as cuBLAS calls (the
  /// emitter's default, EmitOptions::library_matmul); false: as generated kernels.
  bool library_matmul = true;
  /// Also plan every generated kernel as the emitter does and report its code features
  /// (KernelCost::code; `strata cost --json`). Off by default: planning costs far more than the
  /// prediction, and the search predicts every candidate (it asks for the features only of the
  /// graphs whose predictions tie, docs/search.md "Ties of the model").
  bool code_features = false;
  /// On a target with wgmma (ArchTraits::wgmma, a wgmma rate in the constants), predict each
  /// customized kernel as the tuning variant `wgmma=1` emits it (PlanOptions::wgmma: plan_wgmma
  /// decides per matmul) when that plan runs one of its matmuls as wgmma, else as the default
  /// variant; false: every kernel as the default variant (mma.sync), the code a profile of the
  /// default variant timed (`strata cost --no-wgmma`; docs/cost-model.md, "Warpgroup MMA").
  bool wgmma = true;
  /// Predict the graph with the launches that do not depend on each other running at the same
  /// time, on the side streams of the emitter's launch plan (docs/codegen.md, "Concurrent
  /// launches"; the model: concurrent_graph_seconds, src/cost/launch_overlap.h). Off by
  /// default: the sum of the kernels, as every calibration record was timed (one launch after
  /// another) — not adopted until GPU records with side streams are fitted
  /// (docs/cost-model.md, "Concurrent launches"). `strata cost --concurrent-launches`.
  bool concurrent_launches = false;
  /// The side streams the plan may use (EmitOptions::max_side_streams).
  int max_side_streams = 3;
  /// Predict code emitted with every intermediate stored in f32 (EmitOptions::f32_intermediates,
  /// knob `f32mid`): the routed and packed outputs are decided on those storage types, as the
  /// emitter decides them (output_placement.h), so an intermediate's slices that are graph
  /// outputs are predicted as copies. The kernels' bytes stay those of the graph's types.
  bool f32_intermediates = false;
};

/// The prediction for a whole kernel graph: kernels in op order, and the graph's time.
struct GraphCost {
  double predicted_us;  ///< Σ kernels' predicted_s, in microseconds (with
                        ///< CostOptions::concurrent_launches: the concurrent prediction)
  std::vector<KernelCost> kernels;
  double sequential_us = 0;  ///< Σ kernels' predicted_s, in microseconds, always
};

/// Predicts the run time of every kernel of `g` on `t` (see the file comment).
GraphCost estimate_cost(const KernelGraph& g, const Target& t, const CostOptions& options = {});

/// Shared-memory estimate of one thread block of `b`, in bytes, assuming 2-byte (f16/bf16)
/// device tensors: input-iterator tiles that change across the for-loop count twice (double
/// buffering), hoisted ones once; every other block tensor once, loop-body tiles at 2 bytes
/// per element, accumulators and post-loop tensors at 4 (f32). The operand tiles of matmuls
/// padded to the mma step count their padded extents (mma_storage_shape, layout.h). Reuse of
/// dead tiles is ignored, so the estimate is an upper bound of what a memory planner needs.
int64_t block_smem_bytes(const BlockGraph& b);

/// As above with the element sizes taken from the customized op's input dtypes: input tile i
/// at dtype_size(input_dtypes[i]), loop-body tiles at the size of input 0's dtype.
/// `input_dtypes` must have b.num_inputs() entries; missing ones count as f16.
int64_t block_smem_bytes(const BlockGraph& b, const std::vector<DType>& input_dtypes);

/// Slack allowed over the per-block limit when pruning by block_smem_bytes: the estimate
/// ignores tile reuse, so, like MCFuser's rule 4, candidates are pruned only above 1.2× the limit.
inline constexpr double kSmemPruneSlack = 1.2;

/// True when a block needing `smem_bytes` (a block_smem_bytes estimate) is kept on `t`:
/// smem_bytes ≤ kSmemPruneSlack · t.smem_per_block_bytes.
bool fits_shared_memory(int64_t smem_bytes, const Target& t);

}  // namespace strata
