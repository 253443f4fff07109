#include "strata/opt/wgmma_plan.h"

#include <string>

#include "strata/opt/register_fusion.h"

namespace strata {

bool wgmma_tiling(int64_t batch, int64_t m, int64_t n, int warps, bool whole, int reg_budget,
                  MmaTiling& out) {
  const int64_t mtiles = (m + 15) / 16, rt = batch * mtiles, ct = n / 8;
  if (mtiles % 4 != 0 || rt > warps || ct < 1 || ct > 32) return false;
  int64_t cn = ct;
  if (whole) {
    if (ct * 4 > reg_budget) return false;
  } else {
    while (cn > 16 || ct % cn != 0) --cn;  // at most 128 columns (64 f32 registers) per chunk
  }
  out = {static_cast<int>(rt), 1, 1, static_cast<int>(ct), 1, static_cast<int>(cn)};
  return true;
}

bool wgmma_b_rows_fit(const KernelPlan& plan, int i) {
  const BlockGraph& g = *plan.graph;
  const int b = matmul_operand(plan, i, 1);
  const int root = alias_root(plan, b);
  if (stored_shape(plan, root).dims().back() != 64) return false;
  const Shape& as = g.tensor(g.op(i).inputs[0]).shape;
  const Shape& out = g.tensor(g.op(i).output).shape;
  return alias_map(plan, b).transposed ? as.dims().back() <= 64 : out.dims().back() <= 64;
}

namespace {

/// Why matmul i cannot run as wgmma, or "" when it can.
std::string wgmma_refusal(const KernelPlan& plan, int i, bool& k_major) {
  const BlockGraph& g = *plan.graph;
  const OpPlan& p = plan.ops[i];
  const MmaTiling& t = p.tiling;
  if (plan.options.task_entry) return "a task entry's shared memory is only 128-byte aligned";
  // B's layout first: what the tiling cannot change.
  const int b = matmul_operand(plan, i, 1);
  const int root = alias_root(plan, b);
  const TensorPlan& rp = plan.tensors[root];
  if (rp.home != TensorHome::Shared) return "the B tile is not a tile of its own in shared memory";
  const IndexMap map = alias_map(plan, b);
  for (int64_t o : map.origin)
    if (o != 0) return "B is read through a slice";
  if (dtype_size(rp.dtype) != 2 || !rp.layout.swizzle || rp.layout.ld != 64)
    return "the B tile's rows are not swizzled rows of 128 bytes";
  const Shape s = stored_shape(plan, root);
  if (s.rank() > 2 && (s[s.rank() - 2] + rp.layout.pad_rows) % 8 != 0)
    return "the B tile's batches are not whole 8-row groups";
  k_major = map.transposed;
  if (k_major && p.mma_k > 64) return "a K-major B with K > 64 (more than one 128-byte row)";
  if (!k_major && p.mma_n > 64) return "an MN-major B with N > 64 (more than one 128-byte row)";
  const int k_true = static_cast<int>(g.tensor(g.op(i).inputs[0]).shape.dims().back());
  const bool masked = p.ragged_zero_operands != 0 && !(p.ragged_extent < 0 && p.mma_k == k_true);
  if (masked && (p.ragged_zero_operands & 2u) != 0)
    return "a ragged contraction masks the B operand";
  // Then the warps: 64-row warpgroup tiles.
  const Shape& out = g.tensor(g.op(i).output).shape;
  const int64_t mtiles = (out[out.rank() - 2] + 15) / 16;
  if (mtiles % 4 != 0) return "the rows per batch are not whole 64-row warpgroup tiles";
  if (t.warps_n != 1 || t.mt != 1 || t.chunk_mt != 1)
    return "the warp tiling is not one row tile per warp in one warp column";
  if (t.chunk_nt * 8 > 256) return "more than 256 columns per chunk";
  // A's fragments hoisted out of the loop (OpPlan::a_in_registers) passed the emulator but gave
  // wrong answers on an H200 (h200-2026-11-29-wgmma: prefill attention with Q's fragments held
  // across the key loop); until that is understood the hoisted form keeps mma.sync.
  if (p.a_in_registers) return "A's fragments are hoisted out of the loop (wrong on the GPU)";
  return "";
}

}  // namespace

Result<KernelPlan> plan_wgmma(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  for (int i = 0; i < nops; ++i) {
    OpPlan& p = plan.ops[i];
    p.wgmma = false;
    p.wgmma_note.clear();
    if (!plan.options.wgmma || p.matmul != MatmulPath::TensorCore) continue;
    bool k_major = false;
    p.wgmma_note = wgmma_refusal(plan, i, k_major);
    if (!p.wgmma_note.empty()) continue;
    p.wgmma = true;
    p.wgmma_note = "m64n" + std::to_string(p.tiling.chunk_nt * 8) + "k16, B " +
                   (k_major ? "K" : "MN") + "-major in 128-byte swizzled rows";
    // The B tile (and each stage) starts 1024-byte aligned: the 128-byte swizzle's period.
    TensorPlan& rp = plan.tensors[alias_root(plan, matmul_operand(plan, i, 1))];
    rp.layout.align = 1024;
    const int64_t per = 1024 / dtype_size(rp.dtype);
    rp.layout.stage_elems = (rp.layout.stage_elems + per - 1) / per * per;
  }
  return plan;
}

}  // namespace strata
