// Output placement: the kernel tensors that are not stored whole in memory of their own — routed
// outputs (output_routes.h: a customized kernel writes its result straight into the slices read
// from it) and packed outputs (packed_outputs.h: slices that are graph outputs are views of one
// allocation of the caller's) — decided on the storage types (storage_types.h), which a route's
// or a packing's parts must share with the tensor they slice (an f32 intermediate is not packed
// with its f16 outputs: they are copies that round).
//
// The emitter and the cost model both decide through plan_output_placement, from the same facts
// (the graph, its views, whether every intermediate is widened): a slice the emitter leaves a
// kernel is one the cost model predicts, and a slice it routes or packs is none there either.
#pragma once

#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_views.h"
#include "strata/opt/output_routes.h"
#include "strata/opt/packed_outputs.h"

namespace strata {

/// The storage type of every kernel tensor, and per kernel tensor its route or packing.
struct OutputPlacement {
  std::vector<DType> stored;                        ///< storage_types
  std::vector<std::optional<OutputRoute>> routes;   ///< plan_output_routes on `stored`
  std::vector<std::optional<PackedOutput>> packed;  ///< plan_packed_outputs on `stored`
};

/// The placement of `g`'s tensors whose layout ops `views` reads in place (plan_kernel_views),
/// with every intermediate stored in f32 when `f32_intermediates` (the emitter's option).
OutputPlacement plan_output_placement(const KernelGraph& g,
                                      const std::vector<std::optional<KernelView>>& views,
                                      bool f32_intermediates);

}  // namespace strata
