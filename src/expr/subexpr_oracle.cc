#include "strata/expr/subexpr_oracle.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "expr/monomial.h"
#include "strata/expr/expr_normal_form.h"

namespace strata {
namespace {

/// The answer cache: one byte per ExprId (0 unknown, 1 no, 2 yes) in chunks allocated on
/// first use. Ids are dense pool indices, so this is a concurrent map whose lookups are a
/// single atomic load; racing writers store the same value.
class AnswerTable {
 public:
  AnswerTable() : chunks_(new std::atomic<std::atomic<uint8_t>*>[kMaxChunks]) {
    for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  }
  ~AnswerTable() {
    for (uint32_t i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
  }
  std::optional<bool> get(ExprId e) const {
    if ((e >> kChunkBits) >= kMaxChunks) return std::nullopt;
    std::atomic<uint8_t>* chunk = chunks_[e >> kChunkBits].load(std::memory_order_acquire);
    if (chunk == nullptr) return std::nullopt;
    uint8_t v = chunk[e & (kChunkSize - 1)].load(std::memory_order_acquire);
    if (v == 0) return std::nullopt;
    return v == 2;
  }
  void set(ExprId e, bool answer) {
    if ((e >> kChunkBits) >= kMaxChunks) return;  // beyond any pool: not cached
    std::atomic<std::atomic<uint8_t>*>& slot = chunks_[e >> kChunkBits];
    std::atomic<uint8_t>* chunk = slot.load(std::memory_order_acquire);
    if (chunk == nullptr) {
      auto* fresh = new std::atomic<uint8_t>[kChunkSize]();
      if (slot.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel))
        chunk = fresh;
      else
        delete[] fresh;  // another thread installed one; `chunk` now holds it
    }
    chunk[e & (kChunkSize - 1)].store(answer ? 2 : 1, std::memory_order_release);
  }

 private:
  static constexpr int kChunkBits = 14;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 1u << 14;  // 2^28 ids, the capacity of a pool
  std::unique_ptr<std::atomic<std::atomic<uint8_t>*>[]> chunks_;
};

/// Query counters striped by thread so that concurrent queries do not share a cache line.
struct alignas(64) Counters {
  std::atomic<uint64_t> queries{0}, hits{0}, solver_ns{0};
};
constexpr int kStripes = 64;

Counters& my_counters(Counters* stripes) {
  static std::atomic<unsigned> next{0};
  thread_local unsigned stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripes[stripe];
}

/// True iff `inner` ⊆ `outer` as multisets; `rest` receives outer − inner.
bool sub_multiset(const ExprPool& pool, const std::vector<ExprId>& inner,
                  const std::vector<ExprId>& outer, std::vector<ExprId>& rest) {
  rest.clear();
  auto less = canonical_less(pool);
  size_t i = 0;
  for (ExprId o : outer) {
    if (i < inner.size() && inner[i] == o) {
      ++i;
    } else {
      if (i < inner.size() && less(inner[i], o)) return false;  // inner[i] is missing
      rest.push_back(o);
    }
  }
  return i == inner.size();
}

/// True iff some monomial ρ (count ≥ g) makes prim ⊗ ρ a sub-multiset of `root`: the test of
/// "e ∈ P(R)" for e = g · prim, see docs/abstract-expressions.md.
bool embeds(const ExprPool& pool, const Polynomial& prim, int64_t g, const Polynomial& root) {
  const Monomial& first = prim[0];
  Monomial rho;
  std::vector<bool> used(root.size());
  for (size_t i = 0; i < root.size(); ++i) {
    const Monomial& r = root[i];
    if (r.count < kCountCap && r.count % first.count != 0) continue;
    rho.count = r.count < kCountCap ? r.count / first.count : kCountCap;
    if (rho.count < g) continue;
    if (!sub_multiset(pool, first.num, r.num, rho.num)) continue;
    if (!sub_multiset(pool, first.den, r.den, rho.den)) continue;
    std::fill(used.begin(), used.end(), false);
    used[i] = true;
    bool all = true;
    for (size_t j = 1; all && j < prim.size(); ++j) {
      Monomial want = product(pool, prim[j], rho);
      all = false;
      for (size_t k = 0; k < root.size(); ++k)
        if (!used[k] && root[k] == want) {
          used[k] = all = true;
          break;
        }
    }
    if (all) return true;
  }
  return false;
}

}  // namespace

struct SubexprOracle::Impl {
  AnswerTable table;
  std::unique_ptr<Counters[]> counters{new Counters[kStripes]};
  std::vector<std::optional<ExprId>> target_nf;
  std::vector<Polynomial> roots;  // decoded polynomials R that e may embed into
  bool unbounded = false;         // some target could not be normalized

  void collect_roots(const ExprPool& pool, ExprId r, std::unordered_set<ExprId>& seen) {
    if (!seen.insert(r).second) return;
    Polynomial p = decode(pool, r);
    for (const Monomial& m : p) {
      for (ExprId a : m.num)
        if (pool.kind(a) != ExprKind::Var)
          for (ExprId c : pool.children(a)) collect_roots(pool, c, seen);
      for (ExprId d : m.den) collect_roots(pool, d, seen);
    }
    roots.push_back(std::move(p));
  }

  std::optional<bool> cached(ExprId e) const { return table.get(e); }

  bool store(ExprId e, bool answer) {
    table.set(e, answer);
    return answer;
  }

  /// The cached answer for e, deciding (and caching) it on a miss. Terms with the same
  /// normal form share the normal form's entry.
  bool answer(ExprPool& pool, ExprId e) {
    if (std::optional<bool> hit = cached(e)) return *hit;
    std::optional<ExprId> nf = normal_form(pool, e);
    if (unbounded || !nf) return store(e, true);  // cannot decide: keeping is safe
    if (*nf != e) return store(e, answer(pool, *nf));
    return store(e, decide(pool, e));
  }

  /// e ⊑ some target, for e in normal form.
  bool decide(ExprPool& pool, ExprId e) {
    if (pool.kind(e) == ExprKind::Concat) {  // concat(a, b) ⊑ T iff a ⊑ T and b ⊑ T
      ExprId a = pool.children(e)[0], b = pool.children(e)[1];
      if (answer(pool, a) && answer(pool, b)) return true;
    }
    Polynomial prim = decode(pool, e);
    int64_t g = 0;
    for (const Monomial& m : prim) g = std::gcd(g, m.count);
    for (Monomial& m : prim) m.count /= g;
    for (const Polynomial& root : roots)
      if (embeds(pool, prim, g, root)) return true;
    return false;
  }
};

SubexprOracle::SubexprOracle(ExprPool& pool, std::vector<ExprId> targets)
    : pool_(pool), targets_(std::move(targets)), impl_(new Impl) {
  std::unordered_set<ExprId> seen;
  for (ExprId t : targets_) {
    std::optional<ExprId> nf = normal_form(pool_, t);
    impl_->target_nf.push_back(nf);
    if (nf)
      impl_->collect_roots(pool_, *nf, seen);
    else
      impl_->unbounded = true;
  }
}

SubexprOracle::~SubexprOracle() = default;

bool SubexprOracle::is_subexpr(ExprId e) {
  Counters& c = my_counters(impl_->counters.get());
  c.queries.fetch_add(1, std::memory_order_relaxed);
  if (std::optional<bool> hit = impl_->cached(e)) {
    c.hits.fetch_add(1, std::memory_order_relaxed);
    return *hit;
  }
  auto start = std::chrono::steady_clock::now();
  bool answer = impl_->answer(pool_, e);
  auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  c.solver_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  return answer;
}

bool SubexprOracle::is_equivalent(ExprId e, int i) {
  if (i < 0 || i >= static_cast<int>(targets_.size())) return false;
  std::optional<ExprId> nf = normal_form(pool_, e);
  const std::optional<ExprId>& t = impl_->target_nf[i];
  if (!nf || !t) return e == targets_[i];
  return *nf == *t;
}

SubexprOracle::Stats SubexprOracle::stats() const {
  Stats s;
  uint64_t ns = 0;
  for (int i = 0; i < kStripes; ++i) {
    const Counters& c = impl_->counters[i];
    s.queries += c.queries.load(std::memory_order_relaxed);
    s.cache_hits += c.hits.load(std::memory_order_relaxed);
    ns += c.solver_ns.load(std::memory_order_relaxed);
  }
  s.solver_seconds = static_cast<double>(ns) * 1e-9;
  return s;
}

}  // namespace strata
