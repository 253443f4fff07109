// Ragged tiles in generated code (docs/codegen.md, "Ragged tiles"): which dims of which tiles
// can be shorter than their nominal extent (the last block or iteration of a ragged split,
// docs/mugraph-semantics.md §3.1), and what each op does about it.
//
// Generated code keeps every tile at its nominal shape. Loads copy the present elements and
// zero-fill the absent ones; ops compute on whole tiles, so absent positions of computed tiles
// hold arbitrary values (never read as present data); every op that combines elements across
// a ragged dim leaves the absent ones out: reductions stop at the present extent (a mean
// divides by the count combined), accumulators mask what they add, matmuls skip or zero
// absent contraction indices; savers write present elements only.
#pragma once

#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata {

/// The ragged dims of every tensor of g: those of the input tiles (a grid split that does not
/// divide the device extent; a for-loop split whose iterations do not tile a block's part),
/// carried through the ops as the IR aligns dims (elementwise ops and broadcasting, matmul rows
/// and columns, transposes, reductions removing their reduced dim, accumulators keeping only
/// what is ragged across blocks). Errors name the constructs the code generator refuses:
/// ragged dims of two different splits meeting in one op (or one contraction); a slice,
/// concat or fmap accumulator along a ragged dim; a reduction to more than one group along a
/// ragged dim.
Result<RaggedTiles> ragged_tiles(const BlockGraph& g);

/// Records what every op of a planned kernel does about ragged tiles (OpPlan::ragged_extent,
/// ragged_mask, ragged_zero_operands): reductions and matmuls take the extent of the dim they
/// combine; accumulators, reductions folded into a loop state and matmuls accumulating their
/// product mask the dims ragged per iteration; a ragged contraction zeroes the fragments of
/// operands that are not loaded tiles (zero-filled). Needs the homes of choose_layouts.
Result<KernelPlan> plan_ragged_tiles(KernelPlan plan);

}  // namespace strata
