// Layout ops read in place (docs/codegen.md, "Views"): a block-level transpose or slice is a
// view of its input tile, not a copy.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// Marks every Layout op (transpose, slice) of the block graph as read in place
/// (OpPlan::in_place; its tensor's home becomes TensorHome::Alias in choose_layouts): its
/// readers address its input's storage through the op's index map (IndexMap: the last two
/// indices swapped, an offset added), so it costs no level, no barrier and no shared memory.
/// The one exception is an operand of a tensor-core matmul that ldmatrix cannot read in
/// place (ldmatrix_addressable); that layout op is materialized as a copy into its own tile.
/// Needs a scheduled plan; schedules again.
Result<KernelPlan> plan_layout_views(KernelPlan plan);

/// Whether operand k (0 = A, 1 = B) of tensor-core matmul `matmul`, a tile read in place
/// through the Layout ops above it, can be read by ldmatrix from the storage it aliases: that
/// storage has 16-byte rows (a last extent that is a multiple of 8), the map's column offset
/// keeps rows 16-byte aligned, a transposed A has whole 16-row tiles (M % 16 == 0; MmaSpec::TA),
/// and the batch dims of the view address batches with one flat stride.
bool ldmatrix_addressable(const KernelPlan& plan, int matmul, int k);

}  // namespace strata
