// Graphviz rendering of a μGraph, showing its levels (render with `dot -Tsvg`).
#pragma once

#include <string>

#include "strata/ir/kernel_graph.h"

namespace strata {

/// A complete `digraph` in the DOT language. Kernel-graph tensors (ellipses; inputs filled,
/// outputs double-bordered) and predefined ops (boxes) are nodes. Each customized op is a
/// `subgraph cluster_k<op id>` labelled with its grid, block size and forloop range, holding
/// one node per block op: input iterators (inverted houses) with edges from their kernel
/// tensors labelled `imap=… fmap=…`, loop-body ops (boxes), accumulators (filled hexagons),
/// post-loop ops (filled boxes), thread graphs (boxes listing their chain), and output
/// savers (houses) with edges to their kernel tensors labelled `omap=…`. Node ids are
/// generated (`t<id>`, `k<id>`, `k<id>_b<op>`); every label is quoted and escaped, so any
/// tensor name is safe.
std::string kernel_graph_to_dot(const KernelGraph& g);

}  // namespace strata
