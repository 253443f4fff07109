// Human-readable listings of μGraphs at every level (kernel, block, thread).
//
// The listing is for people, not machines (JSON is the machine format): it may change
// between versions and is never parsed back. φ is printed as `φ`; grid axes as x, y, z.
#pragma once

#include <string>

#include "strata/ir/block_graph.h"
#include "strata/ir/kernel_graph.h"
#include "strata/ir/op.h"

namespace strata {

/// A multi-line listing: `input` lines with dtypes and shapes, one line per kernel op
/// (`O[16, 6144] = matmul(Y, W)`), each customized op followed by its indented block graph
/// (grid/block/forloop; input iterators with imap and fmap; loop-body ops, accumulators and
/// post-loop ops marked by stage; thread graphs with their chains; output savers with omap),
/// and `output` lines. Ends with a newline.
std::string format_graph(const KernelGraph& g);

/// One paragraph (no trailing newline): whether the graph is a plain program (predefined
/// ops only) or a μGraph with customized kernels; the numbers of inputs, outputs, kernel ops
/// (excluding inputs), customized kernels and block ops (all ops of all block graphs,
/// iterators and savers included); and the inputs and outputs with dtypes and shapes.
std::string summarize_graph(const KernelGraph& g);

/// "{x:1, y:φ, z:φ}".
std::string format_grid_map(const GridMap& m);

/// A dimension index, or "φ" for kReplicate.
std::string format_dim(int d);

/// The attributes an op's category uses, as keyword arguments: "dim=1, to=4",
/// "scalar=0.5", "fmap=φ"; empty when the op has none. Block input iterators and output
/// savers are not covered (their maps are printed by the callers).
std::string format_op_attrs(OpKind kind, const OpAttrs& attrs);

/// The chain of a thread-graph op as "s0 = exp(b2); s1 = mul(s0, b3)": value j of the chain
/// is named s<j>, the op's inputs by their block tensor names.
std::string format_thread_chain(const BlockGraph& g, const BlockOp& op);

}  // namespace strata
