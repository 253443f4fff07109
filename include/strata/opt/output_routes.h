// Routed outputs (docs/codegen.md, "Routed outputs"): a customized kernel's result that is read
// only by predefined slices which cut it, along one dim, into consecutive parts — a fused QKV
// projection whose Q, K and V are column slices of one product — is never stored whole. The
// kernel writes each saved tile straight into the slice it falls in, and the slices are no
// kernels of their own (no launch, no bytes; the cost model agrees: docs/cost-model.md).
//
// A route needs every tile to fall in one part: the kernel's grid splits the sliced dim (one
// axis, the tiles exactly covering the dim, none ragged) and every slice boundary is a multiple
// of the tile. The kernel then picks its part per block (a block-uniform branch) and saves with
// that part's pointer and shape. The slices' outputs keep their own memory and readers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_views.h"

namespace strata {

/// One part of a routed kernel tensor: the slice op reading it and the range [start, end) of the
/// routed dim it takes, its result `tensor`.
struct RoutePart {
  int slice_op = -1;
  int tensor = -1;
  int64_t start = 0, end = 0;
  bool operator==(const RoutePart&) const = default;
};

/// How a kernel tensor is routed: the sliced dim and the parts in ascending order, which
/// partition [0, extent) of that dim.
struct OutputRoute {
  int dim = -1;
  std::vector<RoutePart> parts;
  bool operator==(const OutputRoute&) const = default;
};

/// The slices reading kernel tensor `t` (`readers[t]`: the ops reading it) when they are all
/// predefined slices along one dim, none of them a view (`views`), each stored in t's type
/// (`dtype_of`, when given: storage types), whose ranges partition [0, extent) of that dim:
/// the dim and the parts in ascending order. nullopt otherwise. Routed and packed outputs
/// (packed_outputs.h) both start from it.
std::optional<OutputRoute> slice_partition(const KernelGraph& g, int t,
                                           const std::vector<std::vector<int>>& readers,
                                           const std::vector<std::optional<KernelView>>& views,
                                           const std::vector<DType>& dtype_of = {});

/// Decides which kernel tensors are routed: a result of a customized op that is not a graph
/// output (nor a graph input) and whose
/// readers are all predefined slices along one dim, none of them a view (`views`, from
/// plan_kernel_views: a slice read in place needs its source stored), whose ranges partition the
/// dim, and whose kernel saves it in tiles that the grid splits along that dim, exactly (no
/// ragged tile), with every boundary a multiple of the tile. `dtype_of(t)`, when given, is the
/// storage type of tensor t: the parts must share the routed tensor's. Returns, per kernel
/// tensor, its route or nullopt.
std::vector<std::optional<OutputRoute>> plan_output_routes(
    const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
    const std::vector<DType>& dtype_of = {});

/// What the plan of customized op `op` records for its output `oi` routed by `route`: the
/// grid axis and tile that split the routed dim, and the parts' ranges.
OutputParts output_parts(const KernelOp& op, int oi, const OutputRoute& route);

/// Whether kernel op `op` is a slice whose result its source's kernel writes (a routed part):
/// no kernel.
bool is_routed_slice(const KernelGraph& g, const std::vector<std::optional<OutputRoute>>& routes,
                     int op);

}  // namespace strata
