// Shape rules of the compute ops and accumulators (docs/mugraph-semantics.md §2.1, §3.3), shared by
// the
// kernel and block levels.
#pragma once

#include <vector>

#include "strata/op.h"
#include "strata/shape.h"
#include "strata/status.h"

namespace strata {

/// Output shape of a compute op (categories Matmul, Unary, Binary, Reduce, Norm, Concat) on
/// inputs of the given shapes. Normalizes negative dims in `attrs`. The error message states
/// the violated rule; callers prefix where the op is.
Result<Shape> infer_compute_shape(OpKind kind, const std::vector<Shape>& inputs, OpAttrs& attrs);

/// Output shape of a for-loop accumulator applied to a per-iteration tile of shape `in`
/// with `forloop` iterations. Normalizes attrs.fmap.
Result<Shape> infer_accum_shape(OpKind kind, const Shape& in, int forloop, OpAttrs& attrs);

/// Output shape of a thread graph (an elementwise chain) over inputs of the given shapes;
/// checks that every step is elementwise and refers to earlier values only.
Result<Shape> infer_thread_graph_shape(const std::vector<ThreadStep>& chain,
                                       const std::vector<Shape>& inputs);

}  // namespace strata
