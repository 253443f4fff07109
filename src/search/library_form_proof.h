// The composed proof of a library form (library_form.h, docs/search.md "Library forms"): the
// form is the program with each fused region replaced by kernels, its matmuls and views the
// program's own, and slices of matmul results pushed into an operand (slice(A·B, cols a..b) =
// A·slice(B, cols a..b) by the definition of the product). So the form computes the program's
// function when each region's kernels compute the region's: each part is verified against its
// region as a program of its own (its inputs free), which involves no matmul and costs a few
// elementwise passes, where verifying the form against the whole program would evaluate every
// product in the finite fields (about 1.1 ns per multiply-add per core: 113 s per evaluation of
// a 4096 × 4096 × 6144 projection). The probability that some part is wrong although proved is
// at most the sum of the parts' bounds (a union bound), as for the joins of docs/search.md
// "Layers".
#pragma once

#include <memory>
#include <vector>

#include "search/library_form.h"
#include "strata/verify/verifier.h"

namespace strata::search {

/// Proves the forms of one LibraryForms: one checker per region, so the region's field
/// evaluations are shared by the forms that fuse it.
class LibraryFormProver {
 public:
  /// `forms` must outlive the prover. `options` are the checkers' (the search's stop flag),
  /// with the target bound lowered by ⌈log2 n⌉ bits for n regions, so that the sum of the parts'
  /// bounds meets `options.target_log2_bound`.
  LibraryFormProver(const LibraryForms& forms, const VerifyOptions& options);

  /// The composed verification of `form` (one of the forms): equivalent, with the fewest trials
  /// of its parts and the log2 of the sum of their bounds, when every part is proved equivalent
  /// to its region; otherwise the first part's verdict that is not (not equivalent or unknown),
  /// its detail naming the region. A form that fuses no region (only pushed slices) is exact:
  /// 0 trials, bound −∞. Errors: a checker's (is_stopped_error for a stopped evaluation).
  Result<VerifyResult> prove(const LibraryForm& form);

 private:
  const LibraryForms& forms_;
  VerifyOptions options_;
  std::vector<std::unique_ptr<EquivalenceChecker>> checkers_;  ///< per region, made on first use
};

}  // namespace strata::search
