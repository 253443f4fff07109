// Storage types (docs/codegen.md, "The emitted source"): the type in which the generated code
// stores each kernel tensor. Graph inputs and outputs keep their dtype. An intermediate keeps
// its dtype too, except that it is widened to f32 when every intermediate is (the emitter's
// `--f32-intermediates`, knob `f32mid`) or when a customized kernel loads it as tiles whose rows
// hold an odd number of elements (2-byte rows could only be copied 2 bytes at a time,
// synchronously; in f32 they are cp.async-able: GQA's Σ exp partials).
//
// One rule for the emitter, which stores the tensors so, and the cost model, which decides the
// routed and packed outputs on these types as the emitter does (output_placement.h).
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_views.h"

namespace strata {

/// The storage type of every kernel tensor of `g` whose layout ops `views` reads in place
/// (plan_kernel_views), with every intermediate widened when `f32_intermediates`. A tensor
/// read through a view counts as a read of the view's storage (a transposed view's tiles are
/// copied along the rows of the tensor holding it); the entry of a view itself is its own
/// (the emitter stores nothing for it and reads its storage's type).
std::vector<DType> storage_types(const KernelGraph& g,
                                 const std::vector<std::optional<KernelView>>& views,
                                 bool f32_intermediates);

}  // namespace strata
