// Packed outputs (docs/codegen.md, "Packed outputs"): graph outputs that are consecutive slices
// of one kernel tensor along one dim — the Q, K and V column blocks of a fused QKV projection —
// are views of one allocation of the caller's. The tensor they slice is stored there whole (a
// library matmul writes it in one call), and the slices are no kernels.
//
// The generated code declares the layout (strata_output_base / _offset / _stride / _alloc,
// docs/codegen.md) and checks it per launch: when the caller's output pointers are laid out as
// declared, the tensor's producer writes the caller's memory and nothing else runs; otherwise
// the tensor lives in the workspace and each slice is copied into its output as a kernel of
// its own, so a caller that allocates every output alone still gets its outputs, contiguous.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_views.h"
#include "strata/opt/output_routes.h"

namespace strata {

/// One output of a packed tensor: the slice op making it, its result `tensor`, its position
/// `output` among the graph's outputs, and the range [start, end) of the packed dim it takes.
struct PackedPart {
  int slice_op = -1;
  int tensor = -1;
  int output = -1;
  int64_t start = 0, end = 0;
  bool operator==(const PackedPart&) const = default;
};

/// How a kernel tensor is packed: the sliced dim and the parts in ascending order, which
/// partition [0, extent) of that dim. The first part's output pointer is the allocation's base.
struct PackedOutput {
  int dim = -1;
  std::vector<PackedPart> parts;
  bool operator==(const PackedOutput&) const = default;
};

/// Decides which kernel tensors are packed: a tensor that is neither a graph input nor a graph
/// output, not routed (`routes`: a customized kernel that writes its slices straight into them
/// needs no layout of the caller's), whose readers are all predefined slices along one dim, none
/// of them a view (`views`), each slice's result a graph output listed once, not a graph input
/// and read by no op, the slices' ranges partitioning the dim, and every part stored in the
/// tensor's type (`dtype_of`, when given: storage types). Returns, per kernel tensor, its
/// packing or nullopt. A tensor a library epilogue never stores (library_epilogues.h) is never
/// packed: its one reader is the absorbed op. The emitter and the cost model call this through
/// plan_output_placement (output_placement.h), on the storage types.
std::vector<std::optional<PackedOutput>> plan_packed_outputs(
    const KernelGraph& g, const std::vector<std::optional<KernelView>>& views,
    const std::vector<std::optional<OutputRoute>>& routes, const std::vector<DType>& dtype_of = {});

/// Whether kernel op `op` is a slice making a part of a packed tensor: no kernel when the
/// caller packs its outputs (the fallback copy otherwise).
bool is_packed_slice(const KernelGraph& g, const std::vector<std::optional<PackedOutput>>& packed,
                     int op);

/// The layout of every graph output under `packed` (the generated code's strata_output_*
/// queries): the output whose pointer is its allocation's base (itself when it has its own),
/// its element offset from that base, its element strides, and the elements to allocate at its
/// own pointer (0 when it lies in another output's allocation).
struct OutputLayout {
  int base = -1;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  int64_t alloc = 0;
};
std::vector<OutputLayout> output_layouts(const KernelGraph& g,
                                         const std::vector<std::optional<PackedOutput>>& packed);

}  // namespace strata
