// Internal: how the generic kernel of a predefined elementwise op (a unary or binary op of the op
// table, operands broadcast by NumPy rules) walks its output — the dims it indexes, how many
// consecutive output elements one thread handles per step, and the width of its index
// arithmetic (docs/codegen.md, "Predefined elementwise kernels").
#pragma once

#include <cstdint>
#include <vector>

#include "strata/ir/shape.h"

namespace strata::codegen {

/// The access plan of one elementwise op.
///
/// Coalesced dims: dims of extent 1 in the output are dropped and adjacent dims merged where
/// every operand either has the output's extent in both (read along them) or 1 in both
/// (broadcast along them), so each coalesced dim of an operand is either the output's extent or
/// 1. `out` and every `operands[k]` have the same rank (≥ 1); an operand equal to `out` is read
/// at the output's flat index. Flat row-major offsets in the coalesced shapes are the offsets in
/// the original dense tensors.
///
/// Vector width: `vector` consecutive output elements along the innermost coalesced dim per
/// thread step, loaded and stored as one access per tensor (an operand broadcast along that dim
/// loads one element). The widest of 16 / (the smallest element size among the output and the
/// operands read along the innermost dim), halved until it divides the innermost extent: 16-byte
/// accesses for the smallest type when the extent allows, 1 (one element per step) for an odd
/// extent. Every vector then starts at a multiple of `vector` elements in every tensor read
/// along it, so a tensor 16-byte aligned at its start is aligned for each access.
struct ElementwiseAccess {
  Shape out;
  std::vector<Shape> operands;
  int vector = 1;
};

/// The access plan of an elementwise op with output shape `out` of `out_size`-byte elements and
/// operands of shapes `in` (each broadcastable to `out`) and element sizes `in_sizes`.
ElementwiseAccess elementwise_access(const Shape& out, int out_size, const std::vector<Shape>& in,
                                     const std::vector<int>& in_sizes);

/// Whether a grid-stride loop over `work` items with a step of `stride` items, indexing tensors
/// of at most `max_elements` elements, can do all its index arithmetic in 32-bit `int`: the loop
/// variable (below work + stride), element offsets and every flat index stay below 2^31.
bool index_fits_int32(int64_t work, int64_t stride, int64_t max_elements);

}  // namespace strata::codegen
