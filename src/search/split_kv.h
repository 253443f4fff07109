// Split-KV forms (docs/search.md, "Split-KV"): a kernel that runs the online softmax over its
// for-loop (FlashAttention's running max and rescaling accumulators) streams all of its keys
// in one block; at decode a few such blocks cannot keep the GPU busy. Its split-KV form (the
// FlashDecoding schedule) runs the same body on a part of the keys per block, a further grid
// axis splitting the looped dim, and saves per part the rescaled accumulators and the part's
// max; a second kernel combines the parts: M = max_b m_b, w_b = e^(m_b − M), each
// accumulator Σ_b w_b·acc_b, then the original post-loop ops and savers.
//
// The search derives these forms from the graphs its enumeration found (the enumeration
// itself never proposes them: per-part maxima combined by rescaling lie outside the abstract
// expressions' axioms, docs/abstract-expressions.md). They are costed and verified like any
// other candidate; the verifier proves them by the shift invariance of softmax
// (docs/verifier.md, "Max").
#pragma once

#include <cstdint>
#include <vector>

#include "strata/ir/kernel_graph.h"

namespace strata::search {

/// The split-KV forms of g, one per (kernel, split count): for every customized kernel of g
/// whose body is an online softmax (one running max, every accumulator a rescaling one
/// against it, post-loop ops of the accumulators only) on a grid with a free axis, and every
/// split count s in 2, 4, 8, 16, 32 that leaves each part at least one loop tile and the grid
/// within `max_blocks` and, when `min_blocks` > 0, at least `min_blocks` blocks. Kernels of
/// other shapes are left as they are; the result may be empty.
std::vector<KernelGraph> split_kv_forms(const KernelGraph& g, int64_t max_blocks,
                                        int64_t min_blocks = 0);

}  // namespace strata::search
