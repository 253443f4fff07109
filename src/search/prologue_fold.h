// Prologue folding (docs/search.md, "Prologue folding"): a small kernel whose only reader is a
// customized kernel that reads its result as a loop-invariant tile (an input with no for-loop
// map) can run inside that kernel instead: its ops are evaluated on the tile the kernel reads,
// before the loop, and its launch, its store and the reader's load disappear. QK-norm
// attention is the case that asks for it: the queries' RMSNorm and gains before the attention
// kernel are two launches of a few microseconds each at decode, but folded into the attention
// kernel's body they exceed the enumeration's block-op limit (which bounds the search, not the
// code generator), so the enumeration never builds them.
//
// A prologue is, with T its result (read once, by one input op with no fmap of the consumer, no
// graph output):
//  - a predefined elementwise or norm op (one with a block-level form): its inputs are read
//    by the consumer with T's grid maps, aligned from the right (a broadcast dim maps to φ); a
//    norm needs its dim whole in the consumer's tile (no grid axis splits it);
//  - a customized kernel with one output and a for-loop of 1 (its accumulator is its value)
//    whose grid tiles T as the consumer reads it: every axis that splits T in the prologue
//    matched by a consumer axis splitting the same dim into as many parts -- or, where the
//    prologue's body computes each index of that dim alone (elementwise ops, norms and
//    reductions over other dims), into other parts or none (the consumer holds it whole).
//    Its block ops move into the consumer, their input maps carried over to the matched axes.
// The result is a candidate like any other: costed, screened and verified against the program.
#pragma once

#include <optional>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// g with every prologue folded into its consumer, repeatedly (a fold may expose the next:
/// a norm kernel before a gain kernel before the attention kernel), or nullopt when g has
/// none.
std::optional<KernelGraph> fold_prologues(const KernelGraph& g);

}  // namespace strata::search
