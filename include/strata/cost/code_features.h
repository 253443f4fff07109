// Features of a kernel's emitted code, read off the plan the graph optimizer makes for it
// (kernel_plan.h): what the per-kernel totals of the cost model (bytes, FLOPs, blocks, for-loop
// iterations) do not say about the latency of one iteration — how many threads run it, how many
// barrier-separated steps and serial reduction steps it takes, and how many ops run inside the
// loop against after it, and how long the serial chains of SIMT matmuls are (docs/cost-model.md,
// "Code features"). Reported by `strata cost --json` for the calibration (bench/calibrate.py).
// The prediction uses the SIMT chains (KernelCost::t_simt_s, "SIMT matmul chains") and the
// passes outside the matmuls (KernelCost::t_pass_s, "Passes outside the matmuls"); the search
// orders graphs the model predicts within a few percent of each other by their loop barriers
// (docs/search.md, "Ties of the model").
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_plan.h"
#include "strata/opt/kernel_views.h"

namespace strata {

/// The code features of one planned kernel. Counts are per block.
struct KernelCodeFeatures {
  int threads = 0;      ///< threads per block (KernelPlan::threads)
  int64_t smem_bytes = 0;  ///< dynamic shared memory per block (KernelPlan::smem_bytes)
  int loop_groups = 1;  ///< loop groups (KernelPlan::groups)
  /// Compute ops (every block op but input iterators and output savers) that run every
  /// iteration (Phase::Loop), and those that run once (Phase::Prologue or Phase::Post).
  int loop_ops = 0;
  int once_ops = 0;
  /// Block-level barriers per iteration: one before each loop level ≥ 1
  /// (KernelPlan::barriers_per_iteration) and two per block-wide reduction in the loop (the
  /// runtime's block_sum / block_max).
  int loop_barriers = 0;
  /// The barriers outside the loop: prologue, post levels and the block-wide reductions there.
  int once_barriers = 0;
  /// Serial reduction steps per iteration: Σ over the reductions in the loop of the depth of a
  /// combining tree over one output's group, ⌈log2 group⌉ (reduction_shape); the same for the
  /// reductions outside the loop.
  int loop_reduce_steps = 0;
  int once_reduce_steps = 0;
  /// Dependent multiply-adds per thread of the matmuls that run on the SIMT path
  /// (OpPlan::matmul, layout.h): Σ ⌈outputs / threads⌉ · K, each output a serial chain over K
  /// (the loop's matmuls per iteration; those outside the loop).
  int64_t loop_simt_mm_steps = 0;
  int64_t once_simt_mm_steps = 0;
  /// Elements per thread of the ops that pass over a tile on their own, outside the matmuls
  /// (shared_pass_elements, layout.h: elementwise ops, reductions and norms not folded, fused or
  /// inlined): Σ ⌈elements / threads⌉ over the loop's ops per iteration (a group's team in the
  /// loop), and over those outside the loop.
  int64_t loop_pass_steps = 0;
  int64_t once_pass_steps = 0;
  /// A rowwise kernel (KernelPlan::rowwise): every thread loads its chunks with vector loads
  /// straight into registers, one batch in flight, where the other kernels keep tiles of
  /// cp.async copies in flight (docs/cost-model.md, "Loads into registers").
  bool register_loads = false;
  /// Tensor-core FLOPs per block of the matmuls the plan runs as warpgroup MMA (OpPlan::wgmma,
  /// only under PlanOptions::wgmma): per iteration of the loop, and outside it.
  double loop_wgmma_flops = 0;
  double once_wgmma_flops = 0;
};

/// The features of `plan` (a plan optimize_block_graph has completed).
KernelCodeFeatures code_features_of_plan(const KernelPlan& plan);

/// The features of kernel op `op` of `g` as the CUDA emitter plans it: its block graph (a
/// customized op's body or a predefined matmul lowered to a block graph, kernel_block_graph)
/// planned with `options`, the tensors' dtypes and the inputs' views `views` (plan_kernel_views,
/// indexed by kernel tensor). nullopt when the emitter writes no planned kernel for it: a
/// predefined op without a block graph, or a block graph the optimizer refuses (the emitter
/// then fails for a customized op, and writes a generic kernel for a matmul).
std::optional<KernelCodeFeatures> kernel_code_features(
    const KernelGraph& g, int op, const std::vector<std::optional<KernelView>>& views,
    const PlanOptions& options);

}  // namespace strata
