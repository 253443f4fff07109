// Kernel-level layout ops read in place (docs/codegen.md, "Views"): a predefined transpose or
// slice whose readers are customized kernels is not a kernel of its own. The customized
// kernels' input iterators address the tensor it views with its index map, so it costs no
// launch, no memory and no bytes (the cost model agrees: docs/cost-model.md).
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_plan.h"

namespace strata {

/// A kernel tensor read in place: its elements are those of `storage` (a kernel tensor with
/// memory of its own, dense row-major) through `map`.
struct KernelView {
  int storage = -1;
  IndexMap map;
};

/// Decides which predefined layout ops (transpose, slice) are views: those whose result is not
/// a graph output and is read only by customized kernels and by layout ops that are views
/// themselves. Returns, per kernel tensor, its view (composed through chains of layout ops) or
/// nullopt for a tensor with memory of its own.
std::vector<std::optional<KernelView>> plan_kernel_views(const KernelGraph& g);

/// Whether kernel op `op` is a layout op read in place (per plan_kernel_views): no kernel.
bool is_kernel_view(const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
                    int op);

}  // namespace strata
