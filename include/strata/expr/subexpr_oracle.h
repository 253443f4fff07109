// The abstract-subexpression oracle that prunes the search (docs/abstract-expressions.md, Mirage
// paper §4.3).
//
// A graph prefix is kept only if the expression of each new tensor is an abstract
// subexpression of the program's output expression: e ⊑ T' for some T' equivalent to a
// target. The relation is the smallest preorder with x ⊑ x+y, x ⊑ x·y, x ⊑ x/y, y ⊑ x/y,
// x ⊑ f(x) (exp, rms, fn, sum, concat) and sum(a, x) ⊑ sum(b, x) for a ≤ b, closed under
// equivalence; a concat(a, b) query holds when a and b both hold. No cancellation.
//
// Decision procedure (docs/abstract-expressions.md): both sides are brought to the canonical
// normal form of expr_normal_form.h; then e ⊑ T iff, for some polynomial R that is T itself,
// an argument of an atom of T or a denominator of T (recursively), the primitive part of e
// times a single monomial ρ is a sub-multiset of R's monomials, where ρ's count is at least
// the gcd of e's counts. This is exact for the axioms of expr_normal_form.h, which include
// docs/abstract-expressions.md §3's (so it never rejects a prefix that Theorem 1 must keep) and add
// two more.
//
// Thread safety: all members may be called concurrently. Answers are cached per ExprId in a
// lock-free table shared by all threads; a repeated query is one atomic load.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/expr/abstract_expr.h"

namespace strata {

class SubexprOracle {
 public:
  /// `targets` are the expressions of the program's outputs (kernel_graph_exprs).
  SubexprOracle(ExprPool& pool, std::vector<ExprId> targets);
  ~SubexprOracle();
  SubexprOracle(const SubexprOracle&) = delete;
  SubexprOracle& operator=(const SubexprOracle&) = delete;

  /// True iff e ⊑ T' for some T' equivalent to some target. Also true when e or a target is
  /// too large to normalize (kMaxNormalFormTerms): keeping a prefix is always safe.
  bool is_subexpr(ExprId e);
  /// True iff e is equivalent to targets[i] (same normal form; identical terms when either
  /// is too large to normalize). False for i out of range.
  bool is_equivalent(ExprId e, int i);

  struct Stats {
    uint64_t queries = 0;       ///< is_subexpr calls
    uint64_t cache_hits = 0;    ///< of which answered from the cache
    double solver_seconds = 0;  ///< time spent deciding cache misses
  };
  /// Totals over all threads since construction.
  Stats stats() const;

  const std::vector<ExprId>& targets() const { return targets_; }

 private:
  struct Impl;
  ExprPool& pool_;
  std::vector<ExprId> targets_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
