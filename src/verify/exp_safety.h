// Numerical safety of exponentials (docs/verifier.md, "Safe exponentials").
//
// exp(x − m)·v / Σ exp(x − m) is the same function for every shift m, so the finite-field
// check proves a graph that computes softmax without its max — or with a max of something
// else — equivalent to one that computes it safely. Equivalent over the reals, the first
// overflows f16/f32 where the second cannot. This check closes that gap: when every
// exponential of the program is *shifted by its own max* — its argument is sub(a, m) with m a
// max (max, running_max, accum_max_ld, or a tensor carrying one) of a tensor with a's abstract
// expression — every exponential of the candidate must be too.
#pragma once

#include <string>

#include "strata/ir/kernel_graph.h"

namespace strata::verify {

/// Where an exponential of g is not shifted by its own max ("" if every one is): e.g.
/// "kernel op #3 (customized), block op #6 (exp)". `g` must be complete.
std::string unshifted_exp(const KernelGraph& g);

/// Whether g has at least one exponential.
bool has_exp(const KernelGraph& g);

/// "" if `candidate` computes its exponentials as safely as `program` requires; otherwise the
/// reason, naming the candidate's first unshifted exponential.
std::string exp_safety_violation(const KernelGraph& program, const KernelGraph& candidate);

}  // namespace strata::verify
