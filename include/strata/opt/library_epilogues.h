// Library epilogues (docs/codegen.md, "Library epilogues"): a predefined matmul that runs as a
// library call (cuBLAS) absorbs the elementwise ops that follow it where the library can apply
// them to its accumulators before it rounds and stores the result — a bias added along the
// result's columns (the linear layer's bias), then relu or gelu (the library's gelu is the
// tanh form, as strata's). The absorbed ops are no kernels, and the matmul's own result is
// never stored: the call writes the last absorbed op's result (the cost model agrees:
// docs/cost-model.md).
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_views.h"

namespace strata {

/// What a library matmul applies after its product.
enum class EpilogueActivation { None, Relu, Gelu };

/// The epilogue of library matmul `matmul`: D = act(A·B + bias), written into `result`.
struct LibraryEpilogue {
  int matmul = -1;  ///< the matmul op
  int bias = -1;    ///< kernel tensor of N elements added along the columns, or -1
  EpilogueActivation activation = EpilogueActivation::None;
  std::vector<int> absorbed;  ///< the ops absorbed, in order (the add, the activation)
  int result = -1;            ///< the tensor the call writes: the last absorbed op's result
  bool operator==(const LibraryEpilogue&) const = default;
};

/// Decides, per op, the epilogue of each predefined matmul that `library_call` accepts: it
/// absorbs, in this order and each optional, (1) an add of its result and a bias — a kernel
/// tensor whose shape, aligned to the result's from the right, is 1 but for the last dim (N),
/// stored dense, not a view, and written by an op before the matmul (the call runs in the
/// matmul's place) — then (2) a relu or gelu of that. An op is absorbed only when the
/// tensor it reads is read by it alone and is not a graph output, and its result has the
/// matmul result's type (`dtype_of(t)`, when given, the storage type of tensor t; the bias too).
/// An op index with no absorbed op gets nullopt; so does every op that is not such a matmul.
std::vector<std::optional<LibraryEpilogue>> plan_library_epilogues(
    const KernelGraph& g, const LibraryMatmulReader& library_call,
    const std::vector<std::optional<KernelView>>& views, const std::vector<DType>& dtype_of = {});

/// Whether kernel op `op` is absorbed into a library matmul's epilogue: no kernel.
bool is_absorbed_epilogue(const std::vector<std::optional<LibraryEpilogue>>& epilogues, int op);

/// Whether kernel tensor `t` is a library matmul's result or an intermediate of its epilogue
/// that the call never stores (no memory).
bool is_epilogue_intermediate(const std::vector<std::optional<LibraryEpilogue>>& epilogues,
                              const KernelGraph& g, int t);

}  // namespace strata
