#include "strata/expr/expr_normal_form.h"

#include <algorithm>
#include <iterator>

#include "expr/monomial.h"

namespace strata {
namespace {

/// Memo value for "too large to normalize".
constexpr ExprId kTooLarge = kNoExpr - 1;

std::optional<ExprId> compute(ExprPool& pool, ExprId e);

std::optional<ExprId> nf(ExprPool& pool, ExprId e) {
  ExprId memo = pool.memo_normal_form(e);
  if (memo == kTooLarge) return std::nullopt;
  if (memo != kNoExpr) return memo;
  std::optional<ExprId> r = compute(pool, e);
  pool.set_memo_normal_form(e, r ? *r : kTooLarge);
  return r;
}

std::optional<ExprId> encode_checked(ExprPool& pool, const Polynomial& p) {
  if (p.size() > kMaxNormalFormTerms) return std::nullopt;
  return encode(pool, p);
}

std::optional<ExprId> compute(ExprPool& pool, ExprId e) {
  ExprKind kind = pool.kind(e);
  if (kind == ExprKind::Var || kind == ExprKind::Const || kind == ExprKind::Mono ||
      kind == ExprKind::Poly)
    return e;
  std::vector<ExprId> args;
  for (ExprId c : pool.children(e)) {
    std::optional<ExprId> a = nf(pool, c);
    if (!a) return std::nullopt;
    args.push_back(*a);
  }
  switch (kind) {
    case ExprKind::Var:
    case ExprKind::Const:
    case ExprKind::Mono:
    case ExprKind::Poly:
      return e;  // already normal
    case ExprKind::Exp:
      return pool.exp(args[0]);
    case ExprKind::Rms:  // the constant eps, if any, is already normal
      return pool.rms(pool.count(e), args[0], args.size() > 1 ? pool.constant_value(args[1]) : 0.0);
    case ExprKind::Fn:
      return pool.fn(pool.fn_kind(e), args);
    case ExprKind::Concat:
      return pool.concat(args[0], args[1]);
    case ExprKind::Max:
      return pool.max(pool.count(e), args[0]);
    case ExprKind::Perm:
      return pool.perm(args[0]);
    case ExprKind::Slice:
      return pool.slice(args[0], pool.slice_dim(e),
                        static_cast<int64_t>(pool.constant_value(args[1])),
                        static_cast<int64_t>(pool.constant_value(args[2])));
    case ExprKind::Add: {
      Polynomial p = decode(pool, args[0]);
      Polynomial q = decode(pool, args[1]);
      p.insert(p.end(), std::make_move_iterator(q.begin()), std::make_move_iterator(q.end()));
      return encode_checked(pool, p);
    }
    case ExprKind::Mul: {  // distribute; counts multiply, atoms and denominators unite
      Polynomial p = decode(pool, args[0]);
      Polynomial q = decode(pool, args[1]);
      if (p.size() * q.size() > kMaxNormalFormTerms) return std::nullopt;
      Polynomial r;
      for (const Monomial& a : p)
        for (const Monomial& b : q) r.push_back(product(pool, a, b));
      return encode(pool, r);
    }
    case ExprKind::Div: {  // every monomial of the numerator gets the denominator
      Polynomial p = decode(pool, args[0]);
      for (Monomial& m : p) insert_sorted(pool, m.den, args[1]);
      return encode(pool, p);
    }
    case ExprKind::Sum: {  // sum(n, ·) multiplies every count by n
      Polynomial p = decode(pool, args[0]);
      for (Monomial& m : p) m.count = mul_counts(m.count, pool.count(e));
      return encode(pool, p);
    }
  }
  return e;
}

}  // namespace

std::optional<ExprId> normal_form(ExprPool& pool, ExprId e) {
  return nf(pool, e);
}

}  // namespace strata
