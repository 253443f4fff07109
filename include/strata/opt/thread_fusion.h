// Rule-based thread-level fusion (docs/mugraph-semantics.md §4, Mirage §4.2).
//
// After search, chains of elementwise block ops are turned into thread graphs: one
// `thread_graph` block op whose steps are evaluated per element in registers, so that the
// chain's intermediate tiles never reach shared memory. The rule is purely structural and
// never changes what a block graph computes.
#pragma once

#include "strata/ir/kernel_graph.h"

namespace strata {

/// Returns `g` with, inside every block graph, each maximal chain of at least two elementwise
/// block ops (categories Unary and Binary) replaced by one thread graph computing the chain's
/// result. A chain is a tree of elementwise ops of one stage in which every op except the
/// last has exactly one consumer — the chain op that uses it — and is not saved by an output
/// saver; its leaves' other operands become the thread graph's inputs. The thread graph takes
/// the place of the chain's last op and keeps its tensor name; the other ops, tensors and
/// names of the block graph, and the whole kernel level, are unchanged (block tensor ids are
/// renumbered; default-style names "b<id>" are dropped so that they cannot collide).
KernelGraph fuse_thread_graphs(const KernelGraph& g);

/// Number of thread-graph ops over all block graphs of `g`.
int count_thread_graphs(const KernelGraph& g);

}  // namespace strata
