// The hash-consing pool of abstract expressions.
//
// Storage invariants: nodes live in fixed-size chunks that never move, so a reader holding an
// id reads its node without locking; child arrays live in append-only blocks. A node is
// completely written before its id is published in a shard map, and every id a thread can
// hold was obtained through a shard lock (or derived from a node read after one), so readers
// see complete nodes.
#include "strata/expr/abstract_expr.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <shared_mutex>
#include <stdexcept>
#include <unordered_map>

namespace strata {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

}  // namespace

struct ExprPool::Shard {
  std::shared_mutex mu;
  std::unordered_multimap<uint64_t, ExprId> map;
};

ExprPool::ExprPool()
    : chunks_(new std::atomic<Node*>[kMaxChunks]), shards_(new Shard[size_t{1} << kShardBits]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

ExprPool::~ExprPool() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

ExprId ExprPool::intern(ExprKind kind, uint8_t op, int64_t n, uint32_t split,
                        std::span<const ExprId> children) {
  uint64_t h = mix(mix(mix(static_cast<uint64_t>(kind) + 1, op), static_cast<uint64_t>(n)), split);
  for (ExprId c : children) h = mix(h, node(c).hash);
  auto matches = [&](ExprId id) {
    const Node& x = node(id);
    return x.kind == kind && x.op == op && x.n == n && x.split == split &&
           x.num_children == children.size() &&
           std::equal(children.begin(), children.end(), x.children);
  };
  Shard& shard = shards_[h >> (64 - kShardBits)];
  {
    std::shared_lock lock(shard.mu);
    auto [lo, hi] = shard.map.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (matches(it->second)) return it->second;
  }
  std::unique_lock lock(shard.mu);
  auto [lo, hi] = shard.map.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (matches(it->second)) return it->second;

  ExprId id;
  {
    std::lock_guard alloc(alloc_mu_);
    id = next_id_.load(std::memory_order_relaxed);
    uint32_t chunk = id >> kChunkBits;
    if (chunk >= kMaxChunks) throw std::length_error("abstract expression pool is full");
    Node* nodes = chunks_[chunk].load(std::memory_order_relaxed);
    if (nodes == nullptr) {
      nodes = new Node[kChunkSize];
      chunks_[chunk].store(nodes, std::memory_order_release);
    }
    Node& x = nodes[id & (kChunkSize - 1)];
    x.kind = kind;
    x.op = op;
    x.n = n;
    x.split = split;
    x.hash = h;
    x.num_children = static_cast<uint32_t>(children.size());
    if (!children.empty()) {
      if (child_left_ < children.size()) {
        size_t block = std::max<size_t>(4096, children.size());
        child_blocks_.emplace_back(new ExprId[block]);
        child_cursor_ = child_blocks_.back().get();
        child_left_ = block;
      }
      std::copy(children.begin(), children.end(), child_cursor_);
      x.children = child_cursor_;
      child_cursor_ += children.size();
      child_left_ -= children.size();
    }
    next_id_.store(id + 1, std::memory_order_release);
  }
  shard.map.emplace(h, id);
  return id;
}

int ExprPool::compare(ExprId a, ExprId b) const {
  if (a == b) return 0;
  const Node &x = node(a), &y = node(b);
  if (x.kind != y.kind) return x.kind < y.kind ? -1 : 1;
  if (x.n != y.n) return x.n < y.n ? -1 : 1;
  if (x.op != y.op) return x.op < y.op ? -1 : 1;
  if (x.hash != y.hash) return x.hash < y.hash ? -1 : 1;
  if (x.split != y.split) return x.split < y.split ? -1 : 1;
  if (x.num_children != y.num_children) return x.num_children < y.num_children ? -1 : 1;
  for (uint32_t i = 0; i < x.num_children; ++i)
    if (int c = compare(x.children[i], y.children[i]); c != 0) return c;
  return 0;  // unreachable for distinct interned nodes
}

void ExprPool::sort_canonical(std::vector<ExprId>& v) const {
  std::sort(v.begin(), v.end(), [this](ExprId a, ExprId b) { return compare(a, b) < 0; });
}

ExprId ExprPool::var(int input) {
  return intern(ExprKind::Var, 0, std::max(input, 0), 0, {});
}

ExprId ExprPool::add(ExprId a, ExprId b) {
  if (less(b, a)) std::swap(a, b);
  ExprId c[2] = {a, b};
  return intern(ExprKind::Add, 0, 0, 0, c);
}

ExprId ExprPool::mul(ExprId a, ExprId b) {
  if (less(b, a)) std::swap(a, b);
  ExprId c[2] = {a, b};
  return intern(ExprKind::Mul, 0, 0, 0, c);
}

ExprId ExprPool::div(ExprId a, ExprId b) {
  ExprId c[2] = {a, b};
  return intern(ExprKind::Div, 0, 0, 0, c);
}

ExprId ExprPool::exp(ExprId a) {
  return intern(ExprKind::Exp, 0, 0, 0, {&a, 1});
}

ExprId ExprPool::sum(int64_t n, ExprId a) {
  n = std::clamp<int64_t>(n, 1, kCountCap);
  if (kind(a) == ExprKind::Sum) {
    n = mul_counts(n, count(a));
    a = children(a)[0];
  }
  if (n == 1) return a;
  return intern(ExprKind::Sum, 0, n, 0, {&a, 1});
}

ExprId ExprPool::rms(int64_t n, ExprId a, double eps) {
  ExprId c[2] = {a, eps != 0.0 ? constant(eps) : kNoExpr};
  return intern(ExprKind::Rms, 0, std::clamp<int64_t>(n, 1, kCountCap), 0,
                std::span<const ExprId>(c, eps != 0.0 ? 2 : 1));
}

ExprId ExprPool::fn(OpKind kind, ExprId a, ExprId b) {
  ExprId c[2] = {a, b};
  return fn(kind, std::span<const ExprId>(c, b == kNoExpr ? 1 : 2));
}

ExprId ExprPool::fn(OpKind kind, std::span<const ExprId> args) {
  return intern(ExprKind::Fn, static_cast<uint8_t>(kind), 0, 0, args);
}

ExprId ExprPool::constant(double v) {
  if (v == 0.0) v = 0.0;  // one zero
  return intern(ExprKind::Const, 0, std::bit_cast<int64_t>(v), 0, {});
}

double ExprPool::constant_value(ExprId e) const {
  return std::bit_cast<double>(node(e).n);
}

ExprId ExprPool::max(int64_t n, ExprId a) {
  return intern(ExprKind::Max, 0, std::clamp<int64_t>(n, 1, kCountCap), 0, {&a, 1});
}

ExprId ExprPool::perm(ExprId a) {
  if (kind(a) == ExprKind::Perm) return children(a)[0];
  return intern(ExprKind::Perm, 0, 0, 0, {&a, 1});
}

ExprId ExprPool::slice(ExprId a, int dim, int64_t start, int64_t end) {
  ExprId c[3] = {a, constant(static_cast<double>(start)), constant(static_cast<double>(end))};
  return intern(ExprKind::Slice, static_cast<uint8_t>(dim), 0, 0, c);
}

ExprId ExprPool::concat(ExprId a, ExprId b) {
  ExprId c[2] = {a, b};
  return intern(ExprKind::Concat, 0, 0, 0, c);
}

ExprId ExprPool::mono(int64_t count, std::vector<ExprId> numerators,
                      std::vector<ExprId> denominators) {
  count = std::clamp<int64_t>(count, 1, kCountCap);
  if (count == 1 && numerators.size() == 1 && denominators.empty()) return numerators[0];
  sort_canonical(numerators);
  sort_canonical(denominators);
  uint32_t split = static_cast<uint32_t>(numerators.size());
  numerators.insert(numerators.end(), denominators.begin(), denominators.end());
  return intern(ExprKind::Mono, 0, count, split, numerators);
}

ExprId ExprPool::poly(std::vector<ExprId> monomials) {
  if (monomials.size() == 1) return monomials[0];
  sort_canonical(monomials);
  return intern(ExprKind::Poly, 0, 0, 0, monomials);
}

std::span<const ExprId> ExprPool::children(ExprId e) const {
  const Node& x = node(e);
  return {x.children, x.num_children};
}

std::span<const ExprId> ExprPool::numerators(ExprId e) const {
  const Node& x = node(e);
  return {x.children, x.kind == ExprKind::Mono ? x.split : 0};
}

std::span<const ExprId> ExprPool::denominators(ExprId e) const {
  const Node& x = node(e);
  if (x.kind != ExprKind::Mono) return {};
  return {x.children + x.split, x.num_children - x.split};
}

void ExprPool::print(ExprId e, const std::vector<std::string>* names, std::string& out) const {
  if (e == kNoExpr) {
    out += "<none>";
    return;
  }
  const Node& x = node(e);
  auto args = [&](std::string_view head, std::span<const ExprId> cs, int64_t lead = 0) {
    out += head;
    out += '(';
    if (lead > 0) out += std::to_string(lead) + ", ";
    for (size_t i = 0; i < cs.size(); ++i) {
      if (i) out += ", ";
      print(cs[i], names, out);
    }
    out += ')';
  };
  switch (x.kind) {
    case ExprKind::Var:
      if (names && x.n < static_cast<int64_t>(names->size()) && !(*names)[x.n].empty())
        out += (*names)[x.n];
      else
        out += "x" + std::to_string(x.n);
      return;
    case ExprKind::Add:
      return args("add", children(e));
    case ExprKind::Mul:
      return args("mul", children(e));
    case ExprKind::Div:
      return args("div", children(e));
    case ExprKind::Exp:
      return args("exp", children(e));
    case ExprKind::Sum:
      return args("sum", children(e), x.n);
    case ExprKind::Rms:
      return args("rms", children(e), x.n);
    case ExprKind::Fn:
      return args(op_name(fn_kind(e)), children(e));
    case ExprKind::Concat:
      return args("concat", children(e));
    case ExprKind::Const: {
      char buf[40];
      auto [p, ec] = std::to_chars(buf, buf + sizeof buf, constant_value(e));
      out += "c(" + std::string(buf, ec == std::errc() ? p : buf) + ")";
      return;
    }
    case ExprKind::Max:
      return args("max", children(e), x.n);
    case ExprKind::Perm:
      return args("perm", children(e));
    case ExprKind::Slice:
      out += "slice(";
      print(children(e)[0], names, out);
      out += ", " + std::to_string(x.op) + ", ";
      print(children(e)[1], names, out);
      out += ", ";
      print(children(e)[2], names, out);
      out += ")";
      return;
    case ExprKind::Poly:
      return args("add", children(e));
    case ExprKind::Mono: {
      auto dens = denominators(e);
      for (size_t i = 0; i < dens.size(); ++i) out += "div(";
      if (x.n > 1) out += "sum(" + std::to_string(x.n) + ", ";
      auto nums = numerators(e);
      if (nums.size() == 1)
        print(nums[0], names, out);
      else
        args("mul", nums);
      if (x.n > 1) out += ')';
      for (ExprId d : dens) {
        out += ", ";
        print(d, names, out);
        out += ')';
      }
      return;
    }
  }
}

std::string ExprPool::str(ExprId e) const {
  std::string out;
  print(e, nullptr, out);
  return out;
}

std::string ExprPool::str(ExprId e, const std::vector<std::string>& var_names) const {
  std::string out;
  print(e, &var_names, out);
  return out;
}

}  // namespace strata
