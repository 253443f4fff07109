// Shape rules of the compute ops and accumulators (docs/mugraph-semantics.md), shared by the
// kernel and block levels.
#pragma once

#include <vector>

#include "strata/ir/op.h"
#include "strata/ir/shape.h"
#include "strata/util/status.h"

namespace strata {

/// Output shape of a compute op (categories Matmul, Unary, Binary, Reduce, Norm, Concat,
/// Layout, Scan) on inputs of the given shapes. Normalizes negative dims in `attrs` and checks
/// scalar attributes (finite; clamp lo ≤ hi; eps ≥ 0). The error message states the violated
/// rule; callers prefix where the op is.
Result<Shape> infer_compute_shape(OpKind kind, const std::vector<Shape>& inputs, OpAttrs& attrs);

/// Output shape of a for-loop accumulator applied to per-iteration tiles of the given shapes
/// (the accumulated tile; for accum_rescale(_ld) also the shift, which must broadcast to it)
/// with `forloop` iterations. Normalizes attrs.fmap.
Result<Shape> infer_accum_shape(OpKind kind, const std::vector<Shape>& inputs, int forloop,
                                OpAttrs& attrs);

/// Output shape of a thread graph (an elementwise chain) over inputs of the given shapes;
/// checks that every step is elementwise and refers to earlier values only.
Result<Shape> infer_thread_graph_shape(const std::vector<ThreadStep>& chain,
                                       const std::vector<Shape>& inputs);

}  // namespace strata
