// The equivalence verifier (docs/verifier.md: its definition, derivation and assumptions).
//
// Two kernel graphs are evaluated on the same random inputs over the finite fields Z_p × Z_q
// (p = 2^62 − 10565, q = (p − 1)/2) and all outputs are compared. Equivalent graphs always pass
// (up to the documented limits of the Lax fragment); for non-equivalent graphs a static degree
// analysis of both gives a bound on the probability that one trial passes, and independent
// trials multiply it. Inputs are matched by position, as are outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "strata/kernel_graph.h"
#include "strata/status.h"

namespace strata {

struct VerifyOptions {
  /// Trials to run; 0 = the fewest trials whose combined bound is ≤ 2^target_log2_bound (≥ 1,
  /// at most 64; 8 when the analysis bounds one trial only by 1, and log2_bound stays 0).
  int trials = 0;
  double target_log2_bound = -60;
  uint64_t seed = 1;  ///< all randomness (inputs, ω, opaque functions) derives from it
  int threads = 0;    ///< 0 = all hardware threads; the verdict does not depend on it
};

struct VerifyResult {
  bool equivalent = false;
  int trials = 0;         ///< trials run
  double log2_bound = 0;  ///< log2 P[non-equivalent graphs pass all trials run]; 0 if rejected
  int output = -1;        ///< first differing output (index) when not equivalent
  int64_t element = -1;   ///< its first differing flat element
  std::string detail;     ///< e.g. "output 0 (O) differs at [3, 17]"
};

/// Decides whether `a` and `b` compute the same outputs. Errors: incomplete graphs, different
/// numbers of inputs or outputs, or differing shapes of a matched pair (the message names both).
Result<VerifyResult> verify_equivalent(const KernelGraph& a, const KernelGraph& b,
                                       const VerifyOptions& options = {});

/// Caches the program's outputs on fixed field inputs; screens and verifies candidates against
/// it. Copies share the cache. Thread-safe const methods.
class EquivalenceChecker {
 public:
  /// Analyzes `program` (which must be complete). Field evaluations happen lazily.
  static Result<EquivalenceChecker> make(const KernelGraph& program, const VerifyOptions& opts);

  /// Cheap screen: one trial on the cached inputs and program outputs, evaluated on demand: a
  /// few pseudo-randomly chosen blocks (≤ 4) of each customized op that writes a graph output
  /// (or ≤ 4 elements of an output made by a predefined op), and backwards only the blocks and
  /// elements of earlier ops those read (docs/verifier.md). Returns false on any difference
  /// among the compared elements.
  Result<bool> screen(const KernelGraph& candidate) const;

  /// Full verification (all trials for the bound target), reusing the cached program outputs.
  Result<VerifyResult> verify(const KernelGraph& candidate) const;

 private:
  struct State;
  explicit EquivalenceChecker(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

}  // namespace strata
