// The reference interpreter: μGraph semantics (docs/mugraph-semantics.md) in doubles.
//
// Predefined ops run on whole tensors; customized ops run block by block and iteration by
// iteration exactly as docs/mugraph-semantics.md §3 defines (input-iterator tiles, loop body,
// accumulators,
// post-loop ops, output savers), never by substituting a kernel-level op. Opaque functions:
// sqrt; silu(x) = x/(1 + e^−x); gelu by the tanh approximation
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); relu(x) = max(x, 0); pow = std::pow.
// rms_norm(x) = x / sqrt(mean(x², dim)) with no epsilon.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"
#include "strata/interp/tensor_data.h"

namespace strata {

using HostTensor = TensorData<double>;

struct ExecOptions {
  int threads = 0;  ///< 0 = all hardware threads; results are identical for every value
};

/// Runs `g` on `inputs` (one per graph input, in order) and returns the graph's outputs in
/// order. A wrong number of inputs, a shape mismatch or an incomplete graph is an Error. A graph
/// over several ranks takes the full inputs and returns the full outputs: every rank runs on
/// its shard and all_reduce sums over the ranks (expand_ranks, docs/tensor-parallel.md).
Result<std::vector<HostTensor>> run_reference(const KernelGraph& g,
                                              const std::vector<HostTensor>& inputs,
                                              const ExecOptions& options = {});

/// Checks that the CPU evaluators (the reference interpreter, the finite-field verifier) can
/// hold `g`'s kernel-level tensors in memory: all of them at once (an upper bound on what is
/// alive), at `bytes_per_element` each, must fit in the machine's physical memory. Shapes
/// alone allow up to 2^48 elements per tensor (shape.h), far more than a host can evaluate;
/// callers check before allocating, so such a graph is an Error saying how much it needs
/// rather than an allocation failure.
Status check_host_size(const KernelGraph& g, int64_t bytes_per_element = sizeof(double));

/// One tensor per graph input (the full input of a graph over several ranks) with elements
/// uniform in [−1, 1), determined by `seed`.
std::vector<HostTensor> random_inputs(const KernelGraph& g, uint64_t seed);

}  // namespace strata
