// Kernel-level layout ops read in place (docs/codegen.md, "Views"): a predefined transpose or
// slice whose readers are customized kernels, or predefined matmuls that run as library calls
// and can address it (cuBLAS: a pointer offset, a leading dimension, a transposed operation), is
// not a kernel of its own. The readers address the tensor it views with its index map, so it
// costs no launch, no memory and no bytes (the cost model agrees: docs/cost-model.md).
#pragma once

#include <functional>
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

/// Whether predefined matmul op `op` of the graph runs as a library call (cuBLAS) that reads its
/// operands through GemmOperand: the caller's decision (the emitter's options, the cost model's).
using LibraryMatmulReader = std::function<bool(int op)>;

/// Decides which predefined layout ops (transpose, slice) are views: those whose result is not
/// a graph output and is read only by customized kernels, by layout ops that are views
/// themselves, and by predefined matmuls that `library_reader` accepts and whose library call can
/// read the view in place (gemm_operand). Returns, per kernel tensor, its view (composed through
/// chains of layout ops) or nullopt for a tensor with memory of its own. Without
/// `library_reader`, a layout op feeding a predefined matmul is a copy.
std::vector<std::optional<KernelView>> plan_kernel_views(
    const KernelGraph& g, const LibraryMatmulReader& library_reader = {});

/// Whether kernel op `op` is a layout op read in place (per plan_kernel_views): no kernel.
bool is_kernel_view(const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
                    int op);

/// How a library gemm reads a matmul operand X of shape [batch…, R, C] (rank ≥ 2): the
/// row-major matrices of `storage` starting at element `offset`, `ld` elements from one stored
/// row to the next, `stride` elements from one batch entry (the batch dims flattened) to the
/// next; with `transposed` the stored matrices are X's transposes (C rows of R elements).
struct GemmOperand {
  int storage = -1;
  int64_t offset = 0;
  int64_t ld = 0;
  int64_t stride = 0;
  bool transposed = false;
};

/// The GemmOperand of kernel tensor `t` read through `view` (nullopt: a dense tensor of its own):
/// a dense tensor, or a slice along any dim and a transpose of the last two dims of one, except
/// a slice along a batch dim other than the first (the flattened batch would not have one
/// stride). nullopt when the view cannot be read that way, or when ld or a shape does not fit
/// the library's 32-bit arguments.
std::optional<GemmOperand> gemm_operand(const KernelGraph& g, int t,
                                        const std::optional<KernelView>& view);

}  // namespace strata
