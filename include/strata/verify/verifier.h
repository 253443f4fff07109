// The equivalence verifier (docs/verifier.md: its definition, derivation and assumptions).
//
// Two kernel graphs are evaluated on the same random inputs over the finite fields Z_p × Z_q
// (p = 2^62 − 10565, q = (p − 1)/2) and all outputs are compared. Equivalent graphs always pass
// (up to the documented limits of the Lax fragment); for non-equivalent graphs a static degree
// analysis of both gives a bound on the probability that one trial passes, and independent
// trials multiply it. The bound also requires the integer coefficients the graphs build to
// stay below p and q (checked by the analysis); when no bound below 1 holds, agreement on
// every trial is reported as "unknown", never as equivalent. Inputs are matched by position,
// as are outputs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

struct VerifyOptions {
  /// Trials to run, 0 to 64; 0 = the fewest trials whose combined bound is ≤
  /// 2^target_log2_bound (at least 1, at most 64; 8 when no bound below 1 holds for one trial).
  int trials = 0;
  /// A finite negative number of bits. A target that 64 trials cannot reach runs 64 trials and
  /// reports the bound they reach.
  double target_log2_bound = -60;
  uint64_t seed = 1;  ///< all randomness (inputs, ω, opaque functions) derives from it
  int threads = 0;    ///< 0 = all hardware threads; the verdict does not depend on it
  /// When set and true, a running check gives up at its next check point (between kernel
  /// ops, blocks, and row chunks of a matmul) with an error saying it was stopped; a search
  /// sets it at its time limit or on an interrupt, so one check of a large program cannot
  /// outlast the limit. Not part of the verdict: a stopped check has none.
  const std::atomic<bool>* stop = nullptr;
  /// Check each candidate on a reduced instance where one exists: the program's independent
  /// dims (heads, rows: never contracted, reduced, sliced or concatenated) shrunk to a few of
  /// the candidate's tiles (docs/verifier.md §7). The verdict is the same as on the program's
  /// own instance; false evaluates the program's instance.
  bool reduce_instances = true;
};

/// The verdict is one of three: `equivalent` (every trial agreed, and log2_bound < 0 bounds
/// the probability that non-equivalent graphs would have), not equivalent (`equivalent` and
/// `unknown` false: a trial found a difference, the interfaces differ, or every draw met a
/// zero divisor), or `unknown` (every trial agreed, but the analysis bounds the error of a
/// trial only by 1, so agreement proves nothing; `detail` says which quantity gave no bound).
struct VerifyResult {
  bool equivalent = false;
  bool unknown = false;
  int trials = 0;         ///< trials run
  double log2_bound = 0;  ///< log2 P[non-equivalent graphs pass all trials]; 0 if no yes
  int output = -1;        ///< first differing output (index) when not equivalent
  int64_t element = -1;   ///< its first differing flat element (-1 for an interface mismatch)
  std::string detail;     ///< e.g. "output 0 (O) differs at [3, 17]"
  /// The reduced instance the check ran on ("Q.1 16384 → 256"), empty for the program's own.
  /// A differing element is reported at the original output's index it stands for.
  std::string instance;
};

/// Whether `message` is the error of a check given up for VerifyOptions::stop.
bool is_stopped_error(const std::string& message);

/// Decides whether `a` and `b` compute the same outputs. Inputs are matched by position, as are
/// outputs; different numbers of them, or a matched pair of different shape or dtype, are a
/// "not equivalent" verdict whose detail names the pair. Errors: incomplete graphs, options
/// out of range (VerifyOptions).
Result<VerifyResult> verify_equivalent(const KernelGraph& a, const KernelGraph& b,
                                       const VerifyOptions& options = {});

/// Caches the program's outputs on fixed field inputs; screens and verifies candidates against
/// it. Copies share the cache. Thread-safe const methods.
class EquivalenceChecker {
 public:
  /// Analyzes `program` (which must be complete) and checks `opts`. Field evaluations happen
  /// lazily.
  static Result<EquivalenceChecker> make(const KernelGraph& program, const VerifyOptions& opts);

  /// Cheap screen: one trial on the cached inputs and program outputs, evaluated on demand: a
  /// few pseudo-randomly chosen blocks (≤ 4) of each customized op that writes a graph output
  /// (or ≤ 4 elements of an output made by a predefined op), and backwards only the blocks and
  /// elements of earlier ops those read (docs/verifier.md). Returns false on any difference
  /// among the compared elements, and for a candidate whose interface differs. The program's
  /// full trial-0 outputs are computed on first use and kept for later screens.
  Result<bool> screen(const KernelGraph& candidate) const;

  /// The same screen, but the program too is evaluated on demand (only what the compared
  /// elements need) and nothing is kept: cheaper than screen() for a single candidate (the
  /// check of a cached search result), dearer for many.
  Result<bool> screen_once(const KernelGraph& candidate) const;

  /// Full verification (all trials for the bound target), reusing the cached program outputs.
  Result<VerifyResult> verify(const KernelGraph& candidate) const;

 private:
  struct State;
  explicit EquivalenceChecker(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

}  // namespace strata
