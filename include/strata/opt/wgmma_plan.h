// Warpgroup MMA (wgmma.mma_async, sm_90a) as a plan decision (PlanOptions::wgmma;
// docs/codegen.md, "wgmma"): which tensor-core matmuls of a planned kernel run as wgmma, and
// the warp tiling that lets a plain matmul's warpgroups own 64-row tiles.
#pragma once

#include <cstdint>

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Under PlanOptions::wgmma, the tiling of a plain tensor-core matmul (batch · ⌈m / 16⌉ row
/// tiles, n / 8 column tiles) that wgmma can run: one row tile per warp, one warp column
/// (warps_m = the row tiles, a multiple of 4 per batch, at most `warps`), column chunks of at
/// most 128 columns (one wgmma each, or one per 64-column atom of an MN-major B: past 64
/// columns a chunk covers whole atoms or lies inside one); `whole` asks for one chunk of all
/// columns (a register accumulator) within `reg_budget` floats per thread. False when there is
/// none.
bool wgmma_tiling(int64_t batch, int64_t m, int64_t n, int warps, bool whole, int reg_budget,
                  MmaTiling& out);

/// Whether the B tile of matmul i can hold the descriptor's rows, judged before layouts are
/// chosen: a multiple of 64 stored columns (128-byte rows, or 64-column atoms of them). Plain
/// matmuls take the wgmma tiling only then (so the knob leaves the tiling of the others alone).
bool wgmma_b_rows_fit(const KernelPlan& plan, int i);

/// Under PlanOptions::wgmma: decides for every tensor-core matmul whether it runs as wgmma
/// (OpPlan::wgmma) and records why or why not (OpPlan::wgmma_note); the B tiles of those that
/// do get 1024-byte aligned offsets and stages (TileLayout::align), and rows wider than 128
/// bytes are stored as 64-column atoms (TileLayout::atoms, ld 64). The conditions are layout
/// conditions: warps_n = 1 and mt = chunk_mt = 1 with ⌈M / 16⌉ % 4 == 0 (a warpgroup owns 64
/// rows of one batch), 8 · chunk_nt ≤ 256, a B tile stored in shared memory (not a view, read
/// without a slice offset) with swizzled rows of a multiple of 128 bytes of a 16-bit type, a
/// batch stride of whole 8-row groups; with atoms, whole 8-row groups per matrix, no view
/// hosted, no tensor-core read of the tile other than wgmma B reads, and for an MN-major B
/// column chunks that cover whole atoms or lie inside one; a contraction whose B needs no
/// masking (a ragged K masks A only), A's fragments not hoisted, and no task entry (its shared
/// memory is only 128-byte aligned). Runs after plan_ragged_tiles.
Result<KernelPlan> plan_wgmma(KernelPlan plan);

}  // namespace strata
