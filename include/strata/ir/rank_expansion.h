// Tensor parallelism: a graph over R ranks and its unsharded form (docs/tensor-parallel.md).
//
// A kernel graph with ranks() = R describes what each of R ranks computes on its part of the
// inputs (KernelGraph: input and output shard dims); all_reduce(x) is the sum of x over the
// ranks. Its meaning is a function of the full inputs, and expand_ranks writes that function
// down as one ordinary kernel graph: every rank's copy of the computation on slices of the
// full inputs, all_reduce as the sum of the copies, sharded outputs as the concatenation of
// the copies. The interpreters and the verifier evaluate a graph over several ranks through
// this form, so "equivalent" means the same function of the full inputs, whether one graph,
// both or neither are sharded.
#pragma once

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// The full shape of input `index` of `g`: its shape with the shard dim's extent times
/// ranks() (the shape itself for a replicated input).
Shape full_input_shape(const KernelGraph& g, int index);
/// The full shape of output `index` of `g`, likewise.
Shape full_output_shape(const KernelGraph& g, int index);

/// For every tensor of `g`: true when its value may differ between ranks (it depends on a
/// sharded input other than through an all_reduce).
std::vector<bool> rank_varying_tensors(const KernelGraph& g);

/// Checks that every output declared replicated is the same on every rank: it depends on
/// sharded inputs only through all_reduce. The error names the output and what to do.
Status check_replicated_outputs(const KernelGraph& g);

/// The unsharded form of `g` (ranks() = 1, no all_reduce): inputs are the full tensors in the
/// same order and with the same names (a sharded input's extent times R along its dim),
/// outputs the full outputs in the same order. Ops that read only replicated values are
/// computed once, not once per rank. Errors: a replicated output that differs between ranks
/// (check_replicated_outputs).
Result<KernelGraph> expand_ranks(const KernelGraph& g);

}  // namespace strata
