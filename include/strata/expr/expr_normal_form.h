// Canonical normal forms of abstract expressions (docs/abstract-expressions.md).
//
// Two terms are equivalent under the equivalence axioms iff their normal forms are the same
// ExprId. The axioms are those of docs/abstract-expressions.md §3 (add and mul associative and
// commutative,
// x·z + y·z = (x+y)·z, x/z + y/z = (x+y)/z, x·(y/z) = (x·y)/z, sum(1, x) = x,
// sum(a, sum(b, x)) = sum(a·b, x), sum(a, x·y) = sum(a, x)·y, sum(a, x/y) = sum(a, x)/y) plus
// two that those already imply in all but degenerate cases and that make the form canonical:
// sum(a, x + y) = sum(a, x) + sum(a, y) and (x/y)/z = (x/z)/y.
//
// A normal form is a polynomial: a multiset of monomials (ExprKind::Poly, or the monomial
// itself when there is one). A monomial is count · Π atoms / Π denominators (ExprKind::Mono,
// or the atom itself for count 1, one atom, no denominator); the count collects every sum.
// Atoms are var, exp, rms, fn and concat of normal forms; denominators are normal forms.
#pragma once

#include <cstddef>
#include <optional>

#include "strata/expr/abstract_expr.h"

namespace strata {

/// The most monomials a normal form (at any nesting level) may have; expanding products of
/// sums beyond it gives up.
inline constexpr size_t kMaxNormalFormTerms = 4096;

/// The normal form of e, interned in the same pool; memoized per term, thread-safe.
/// nullopt if expanding it exceeds kMaxNormalFormTerms monomials.
std::optional<ExprId> normal_form(ExprPool& pool, ExprId e);

}  // namespace strata
