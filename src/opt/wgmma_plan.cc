#include "strata/opt/wgmma_plan.h"

#include <string>
#include <vector>

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
    // At most 128 columns (64 f32 registers) per chunk; past 64 columns, chunks that never
    // straddle a 64-column atom of an MN-major B (a multiple or a divisor of 8 column tiles).
    while (cn > 16 || ct % cn != 0 || (ct > 8 && cn % 8 != 0 && 8 % cn != 0)) --cn;
  }
  out = {static_cast<int>(rt), 1, 1, static_cast<int>(ct), 1, static_cast<int>(cn)};
  return true;
}

bool wgmma_b_rows_fit(const KernelPlan& plan, int i) {
  const int root = alias_root(plan, matmul_operand(plan, i, 1));
  return stored_shape(plan, root).dims().back() % 64 == 0;
}

namespace {

/// Why matmul i cannot run as wgmma, or "" when it can; `atoms`: the 64-column atoms B's rows
/// are then stored in (TileLayout::atoms).
std::string wgmma_refusal(const KernelPlan& plan, int i, bool& k_major, int64_t& atoms) {
  const BlockGraph& g = *plan.graph;
  const OpPlan& p = plan.ops[i];
  const MmaTiling& t = p.tiling;
  if (plan.options.task_entry) return "a task entry's shared memory is only 128-byte aligned";
  // The mask of a chain's absent keys (docs/codegen.md, "Ragged tiles") is checked with
  // mma.sync fragments only (the emulator; no GPU run of it with warpgroup MMA yet).
  if ((p.chain_into >= 0 || p.chain_from >= 0) && plan.ragged.any())
    return "a chain over ragged tiles";
  // B's layout first: what the tiling cannot change.
  const int b = matmul_operand(plan, i, 1);
  const int root = alias_root(plan, b);
  const TensorPlan& rp = plan.tensors[root];
  if (rp.home != TensorHome::Shared) return "the B tile is not a tile of its own in shared memory";
  const IndexMap map = alias_map(plan, b);
  for (int64_t o : map.origin)
    if (o != 0) return "B is read through a slice";
  const int64_t width = rp.layout.row_elems();  // (already in atoms when planned again)
  if (dtype_size(rp.dtype) != 2 || !rp.layout.swizzle || width % 64 != 0 ||
      (rp.layout.atoms > 1 && rp.layout.ld != 64))
    return "the B tile's rows are not swizzled rows of a multiple of 128 bytes";
  atoms = width / 64;
  const Shape s = stored_shape(plan, root);
  const int64_t rows = s[s.rank() - 2] + rp.layout.pad_rows;
  if (s.rank() > 2 && rows % 8 != 0) return "the B tile's batches are not whole 8-row groups";
  if (atoms > 1) {
    if (rows % 8 != 0) return "the B tile's atoms would not be whole 8-row groups";
    for (const TensorPlan& v : plan.tensors)
      if (v.home == TensorHome::View && v.view_of == root)
        return "the B tile hosts views (its rows cannot be split into atoms)";
  }
  k_major = map.transposed;
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
  // An MN-major B in atoms: one wgmma per atom a chunk covers (warpgroup_mma's pieces), so a
  // chunk covers whole atoms or lies inside one.
  const int chunk = t.chunk_nt * 8;
  if (!k_major && atoms > 1 && chunk % 64 != 0 && 64 % chunk != 0)
    return "column chunks of an MN-major B would straddle its 64-column atoms";
  // A's fragments hoisted out of the loop (OpPlan::a_in_registers) passed the emulator but gave
  // wrong answers on an H200 (h200-2026-11-29-wgmma: prefill attention with Q's fragments held
  // across the key loop); until that is understood the hoisted form keeps mma.sync.
  if (p.a_in_registers) return "A's fragments are hoisted out of the loop (wrong on the GPU)";
  return "";
}

/// Whether tensor-core matmul i reads tile `root` other than as the B operand of a wgmma.
bool reads_without_wgmma(const KernelPlan& plan, int i, int root) {
  const OpPlan& p = plan.ops[i];
  if (p.matmul != MatmulPath::TensorCore) return false;
  if (p.chain_from < 0 && alias_root(plan, matmul_operand(plan, i, 0)) == root) return true;
  return !p.wgmma && alias_root(plan, matmul_operand(plan, i, 1)) == root;
}

}  // namespace

Result<KernelPlan> plan_wgmma(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  std::vector<int64_t> atoms(nops, 1);
  std::vector<bool> k_major(nops, false);
  for (int i = 0; i < nops; ++i) {
    OpPlan& p = plan.ops[i];
    p.wgmma = false;
    p.wgmma_note.clear();
    if (!plan.options.wgmma || p.matmul != MatmulPath::TensorCore) continue;
    bool km = false;
    p.wgmma_note = wgmma_refusal(plan, i, km, atoms[i]);
    k_major[i] = km;
    p.wgmma = p.wgmma_note.empty();
  }
  // A B tile split into atoms is read by nothing that addresses its rows with one stride: every
  // tensor-core read of it is a wgmma B read (other readers go through the tile's address
  // function). Refusing one matmul can make another reader of a tile mma.sync: to a fixed point.
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < nops; ++i) {
      if (!plan.ops[i].wgmma || atoms[i] == 1) continue;
      const int root = alias_root(plan, matmul_operand(plan, i, 1));
      for (int j = 0; j < nops && plan.ops[i].wgmma; ++j) {
        if (j == i || !reads_without_wgmma(plan, j, root)) continue;
        plan.ops[i].wgmma = false;
        plan.ops[i].wgmma_note =
            "the B tile in atoms is also read by mma.sync (op #" + std::to_string(j) + ")";
        changed = true;
      }
    }
  }
  for (int i = 0; i < nops; ++i) {
    OpPlan& p = plan.ops[i];
    if (!p.wgmma) continue;
    const int chunk = p.tiling.chunk_nt * 8;
    const bool pieces = !k_major[i] && chunk > 64;  // one m64n64k16 per atom (warpgroup_mma)
    p.wgmma_note = (pieces ? "m64n64k16 x" + std::to_string(chunk / 64)
                           : "m64n" + std::to_string(chunk) + "k16") +
                   ", B " + (k_major[i] ? "K" : "MN") + "-major in 128-byte swizzled rows";
    if (atoms[i] > 1) p.wgmma_note += ", B in " + std::to_string(atoms[i]) + " atoms of 64 columns";
    // The B tile (and each stage) starts 1024-byte aligned: the 128-byte swizzle's period. Rows
    // wider than 128 bytes are stored as 64-column atoms, each in the descriptor's layout.
    TensorPlan& rp = plan.tensors[alias_root(plan, matmul_operand(plan, i, 1))];
    rp.layout.align = 1024;
    if (atoms[i] > 1) {
      rp.layout.atoms = atoms[i];
      rp.layout.ld = 64;
    }
    const int64_t per = 1024 / dtype_size(rp.dtype);
    rp.layout.stage_elems = (rp.layout.stage_elems + per - 1) / per * per;
  }
  return plan;
}

}  // namespace strata
