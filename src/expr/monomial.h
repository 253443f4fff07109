// Decoded normal forms: the working representation shared by the normal-form pass and the
// subexpression oracle (private to src/expr).
//
// Invariant: `num` and `den` are sorted in the pool's canonical order (ExprPool::less), so
// multiset union, inclusion and difference are merges.
#pragma once

#include <algorithm>
#include <iterator>
#include <vector>

#include "strata/expr/abstract_expr.h"

namespace strata {

/// count · Π num / Π den.
struct Monomial {
  int64_t count = 1;
  std::vector<ExprId> num;
  std::vector<ExprId> den;
  bool operator==(const Monomial&) const = default;
};

/// A multiset of monomials (a sum).
using Polynomial = std::vector<Monomial>;

/// A monomial or atom id as a Monomial.
inline Monomial decode_monomial(const ExprPool& pool, ExprId m) {
  if (pool.kind(m) != ExprKind::Mono) return {1, {m}, {}};
  auto n = pool.numerators(m), d = pool.denominators(m);
  return {pool.count(m), {n.begin(), n.end()}, {d.begin(), d.end()}};
}

/// A normal form as its monomials.
inline Polynomial decode(const ExprPool& pool, ExprId nf) {
  Polynomial p;
  if (pool.kind(nf) == ExprKind::Poly) {
    for (ExprId m : pool.children(nf)) p.push_back(decode_monomial(pool, m));
  } else {
    p.push_back(decode_monomial(pool, nf));
  }
  return p;
}

/// Interns a polynomial as a normal form.
inline ExprId encode(ExprPool& pool, const Polynomial& p) {
  std::vector<ExprId> ms;
  ms.reserve(p.size());
  for (const Monomial& m : p) ms.push_back(pool.mono(m.count, m.num, m.den));
  return pool.poly(std::move(ms));
}

inline auto canonical_less(const ExprPool& pool) {
  return [&pool](ExprId a, ExprId b) { return pool.less(a, b); };
}

/// Multiset union of two sorted lists.
inline std::vector<ExprId> merged(const ExprPool& pool, const std::vector<ExprId>& a,
                                  const std::vector<ExprId>& b) {
  std::vector<ExprId> r;
  r.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r), canonical_less(pool));
  return r;
}

inline void insert_sorted(const ExprPool& pool, std::vector<ExprId>& v, ExprId x) {
  v.insert(std::upper_bound(v.begin(), v.end(), x, canonical_less(pool)), x);
}

/// a · b: counts multiply (saturating), atoms and denominators unite.
inline Monomial product(const ExprPool& pool, const Monomial& a, const Monomial& b) {
  return {mul_counts(a.count, b.count), merged(pool, a.num, b.num), merged(pool, a.den, b.den)};
}

}  // namespace strata
