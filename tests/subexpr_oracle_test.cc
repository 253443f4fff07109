// Tests of the subexpression oracle: a table of expected answers, Theorem 1 on the reference
// μGraphs of docs/mugraph-semantics.md §6, wrong graphs that must fail, random
// equivalence-preserving rewrites,
// and concurrent use.
#include "strata/expr/subexpr_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "expr_test_util.h"
#include "strata/expr/expr_normal_form.h"

namespace strata {
namespace {

using exprtest::Benchmark;
using exprtest::ExprReader;

std::map<std::string, Benchmark> benchmarks() {
  std::map<std::string, Benchmark> m;
  for (Benchmark b : {exprtest::gqa_benchmark(false), exprtest::gqa_benchmark(true),
                      exprtest::rmsnorm_benchmark(), exprtest::lora_benchmark(),
                      exprtest::gatedmlp_benchmark(), exprtest::ntrans_benchmark()})
    m.emplace(b.name, std::move(b));
  return m;
}

std::vector<ExprId> program_targets(ExprPool& pool, const KernelGraph& program) {
  std::vector<ExprId> ex = kernel_graph_exprs(pool, program);
  std::vector<ExprId> targets;
  for (int t : program.outputs()) targets.push_back(ex[t]);
  return targets;
}

struct Row {
  const char* target;  // a term, or "@name": the output of that benchmark program
  const char* query;
  bool expected;
  const char* why;
};

// Benchmark programs are at the reduced sizes of expr_test_util.h (rmsnorm, lora and
// gatedmlp reduce over 256; gqa over 4096 and a head dim of 64; ntrans over 256).
const Row kRows[] = {
    // the paper's matmul-then-div example
    {"div(sum(64, mul(x, y)), z)", "sum(64, mul(x, y))", true, "x ⊑ x/y"},
    {"div(sum(64, mul(x, y)), z)", "mul(sum(64, x), y)", true, "sum(a, x·y) = sum(a, x)·y"},
    {"div(sum(64, mul(x, y)), z)", "mul(x, sum(64, y))", true, "sum moves to either factor"},
    {"div(sum(64, mul(x, y)), z)", "sum(32, mul(x, y))", true, "smaller count"},
    {"div(sum(64, mul(x, y)), z)", "sum(128, mul(x, y))", false, "larger count"},
    {"div(sum(64, mul(x, y)), z)", "exp(x)", false, "no exp in the target"},
    {"div(sum(64, mul(x, y)), z)", "div(x, z)", true, "x·(y/z) = (x·y)/z"},
    {"div(sum(64, mul(x, y)), z)", "div(y, x)", false, "x is no divisor"},
    {"div(sum(64, mul(x, y)), z)", "mul(x, z)", false, "z only divides"},
    {"div(sum(64, mul(x, y)), z)", "div(sum(64, mul(x, y)), sum(2, z))", false, "other divisor"},
    {"div(sum(64, mul(x, y)), z)", "z", true, "y ⊑ x/y"},
    {"div(sum(64, mul(x, y)), z)", "concat(x, z)", true, "both parts are subexpressions"},
    {"div(sum(64, mul(x, y)), z)", "concat(x, w)", false, "w is not"},
    // no cancellation
    {"y", "div(mul(x, y), x)", false, "x·y/x is not y"},
    {"div(x, y)", "mul(x, y)", false, "x/y·y² is not derivable"},
    {"mul(x, y)", "div(mul(x, y), y)", false, "no cancellation"},
    {"div(mul(x, y), y)", "x", true, "x ⊑ x·y ⊑ x·y/y"},
    // moving a division across a matmul
    {"sum(64, mul(div(x, r), w))", "div(sum(64, mul(x, w)), r)", true, "(x/r)·W = (x·W)/r"},
    {"sum(64, mul(div(x, r), w))", "sum(64, mul(x, w))", true, "the matmul first"},
    {"sum(64, mul(div(x, r), w))", "div(x, r)", true, "the division first"},
    {"sum(64, mul(div(x, r), w))", "div(sum(64, mul(x, w)), sum(64, r))", false, "wrong divisor"},
    // distributivity
    {"add(mul(x, z), mul(y, z))", "add(x, y)", true, "factoring x·z + y·z = (x+y)·z"},
    {"mul(add(x, y), z)", "mul(x, z)", true, "distributing"},
    {"add(mul(x, z), mul(y, w))", "add(x, y)", false, "no common factor"},
    {"add(mul(x, z), mul(y, z))", "add(x, z)", false, "z is the factor, not a summand"},
    {"add(div(x, z), div(y, z))", "add(x, y)", true, "x/z + y/z = (x+y)/z"},
    {"add(x, y)", "add(x, x)", false, "summands are a multiset"},
    {"add(add(x, y), w)", "add(w, x)", true, "associativity and commutativity"},
    {"mul(add(x, y), add(u, v))", "add(mul(x, u), mul(y, v))", true, "part of the expansion"},
    {"mul(add(x, y), add(u, v))", "add(mul(x, u), mul(x, y))", false, "x·y is not a term"},
    {"add(sum(6, mul(x, y)), sum(2, mul(z, y)))", "add(sum(3, x), z)", true,
     "(sum(3, x) + z)·sum(2, y)"},
    {"add(sum(6, mul(x, y)), sum(2, mul(z, y)))", "add(sum(12, x), sum(4, z))", false,
     "counts too large"},
    // opaque functions keep their argument whole
    {"exp(sum(64, mul(x, y)))", "sum(64, mul(x, y))", true, "x ⊑ exp(x)"},
    {"exp(sum(64, mul(x, y)))", "exp(sum(32, mul(x, y)))", false, "no relaxing under exp"},
    {"sum(8, add(x, y))", "sum(8, x)", true, "sum over a sum"},
    {"div(x, rms(64, x))", "rms(64, x)", true, "the norm"},
    {"div(x, rms(64, x))", "rms(32, x)", false, "rms counts are exact"},
    {"silu(sum(64, mul(x, w)))", "sum(16, mul(x, w))", true, "partial matmul under silu"},
    {"silu(x)", "gelu(x)", false, "different functions"},
    {"pow(x, y)", "y", true, "x ⊑ f(x)"},
    // the six benchmarks
    {"@gqa", "sum(1024, mul(V, exp(sum(64, mul(Q, K)))))", true, "a quarter of the sequence"},
    {"@gqa", "sum(4096, exp(sum(64, mul(Q, K))))", true, "the softmax denominator"},
    {"@gqa", "div(exp(sum(64, mul(Q, K))), sum(4096, exp(sum(64, mul(Q, K)))))", true, "softmax"},
    {"@gqa", "sum(8192, mul(V, exp(sum(64, mul(Q, K)))))", false, "longer than the sequence"},
    {"@gqa", "exp(sum(32, mul(Q, K)))", false, "exp of half a dot product"},
    {"@gqa", "mul(exp(sum(64, mul(Q, K))), exp(sum(64, mul(Q, K))))", false, "exp squared"},
    {"@gqa", "sum(64, mul(Q, V))", false, "Q never meets V"},
    {"@qknorm", "div(Q, rms(64, Q))", true, "normalized Q"},
    {"@qknorm", "div(div(sum(64, mul(Q, K)), rms(64, Q)), rms(64, K))", true,
     "norms moved after Q·K"},
    {"@qknorm", "sum(64, mul(Q, K))", true, "Q·K before dividing"},
    {"@qknorm", "exp(sum(64, mul(Q, K)))", false, "exp of the unnormalized product"},
    {"@rmsnorm", "div(sum(256, mul(X, W)), rms(256, X))", true, "the reference output"},
    {"@rmsnorm", "sum(64, mul(X, W))", true, "one tile product"},
    {"@rmsnorm", "div(sum(256, mul(X, W)), sum(256, X))", false, "mean instead of rms"},
    {"@rmsnorm", "rms(64, X)", false, "rms of one tile"},
    {"@lora", "sum(256, mul(X, A))", true, "X·A"},
    {"@lora", "sum(16, mul(sum(256, mul(X, A)), B))", true, "(X·A)·B"},
    {"@lora", "sum(512, mul(X, W))", false, "count too large"},
    {"@lora", "mul(W, B)", false, "W never meets B"},
    {"@lora", "mul(X, B)", true, "the abstraction forgets which elements meet"},
    {"@gatedmlp", "sum(256, mul(X, W3))", true, "the up projection"},
    {"@gatedmlp", "silu(sum(256, mul(X, W1)))", true, "the gate"},
    {"@gatedmlp", "silu(sum(128, mul(X, W1)))", false, "silu of a partial sum"},
    {"@gatedmlp", "silu(sum(256, mul(X, W3)))", false, "silu of the wrong matmul"},
    {"@gatedmlp", "mul(X, W1)", true, "one product"},
    {"@ntrans", "mul(alpha, X)", true, "α·X"},
    {"@ntrans", "add(X, mul(alpha, X))", true, "a part of the residual sum"},
    {"@ntrans", "add(div(H, rms(256, H)), X)", true, "α·h + α·X = α·(h + X)"},
    {"@ntrans", "rms(256, add(X, mul(alpha, add(X, div(H, rms(256, H))))))", true, "the norm"},
    {"@ntrans", "add(X, H)", false, "H is only normalized"},
    {"@ntrans", "div(H, rms(128, H))", false, "norm over half the row"},
    {"@ntrans", "mul(X, div(H, rms(256, H)))", false, "X never meets H"},
};

TEST(SubexprOracle, TableOfExpectedAnswers) {
  auto bench = benchmarks();
  int rows = 0;
  for (const Row& row : kRows) {
    ExprPool pool;
    ExprReader read(pool);
    std::vector<ExprId> targets;
    if (row.target[0] == '@') {
      const KernelGraph& p = bench.at(row.target + 1).program;
      for (const std::string& n : exprtest::input_names(p)) read(n);  // input order
      targets = program_targets(pool, p);
    } else {
      targets = {read(row.target)};
    }
    ExprId q = read(row.query);
    SubexprOracle oracle(pool, targets);
    EXPECT_EQ(oracle.is_subexpr(q), row.expected)
        << row.query << " ⊑ " << row.target << " (" << row.why << ")";
    EXPECT_EQ(oracle.is_subexpr(q), row.expected);  // cached answer agrees
    EXPECT_EQ(oracle.stats().cache_hits, 1u);
    ++rows;
  }
  EXPECT_GE(rows, 30);
}

TEST(SubexprOracle, EquivalenceToTargets) {
  ExprPool pool;
  ExprReader read(pool);
  SubexprOracle oracle(pool, {read("sum(64, mul(div(x, r), w))"), read("mul(add(x, y), z)")});
  EXPECT_TRUE(oracle.is_equivalent(read("div(sum(64, mul(x, w)), r)"), 0));
  EXPECT_TRUE(oracle.is_equivalent(read("mul(sum(8, div(x, r)), sum(8, w))"), 0));
  EXPECT_FALSE(oracle.is_equivalent(read("sum(64, mul(x, w))"), 0));
  EXPECT_TRUE(oracle.is_equivalent(read("add(mul(z, y), mul(x, z))"), 1));
  EXPECT_FALSE(oracle.is_equivalent(read("add(mul(z, y), mul(x, z))"), 0));
  EXPECT_FALSE(oracle.is_equivalent(read("add(mul(z, y), mul(x, z))"), 2));
  // every target is a subexpression of itself; a prefix of one target suffices
  EXPECT_TRUE(oracle.is_subexpr(read("add(x, y)")));
  EXPECT_TRUE(oracle.is_subexpr(read("div(x, r)")));
}

/// Every kernel and block tensor of g with its expression, labelled for messages.
std::vector<std::pair<std::string, ExprId>> all_tensor_exprs(ExprPool& pool, const KernelGraph& g) {
  std::vector<std::pair<std::string, ExprId>> out;
  std::vector<ExprId> ex(g.tensors().size(), kNoExpr);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Customized) {
      std::vector<ExprId> kin;
      for (int t : op.inputs) kin.push_back(ex[t]);
      std::vector<ExprId> bx = block_graph_exprs(pool, *op.body, kin);
      for (size_t t = 0; t < bx.size(); ++t)
        out.push_back(
            {"kernel op #" + std::to_string(i) + " block tensor #" + std::to_string(t), bx[t]});
    }
    std::vector<ExprId> outs = kernel_op_exprs(pool, g, i, ex);
    for (size_t j = 0; j < outs.size(); ++j) {
      ex[op.outputs[j]] = outs[j];
      out.push_back({"kernel tensor " + g.tensor_name(op.outputs[j]), outs[j]});
    }
  }
  return out;
}

// Theorem 1: every prefix of a graph whose expression is equivalent to the program's passes
// the subexpression test. For each benchmark, each tensor of the reference μGraph (and of the
// program itself) is a subexpression of the program's target, and the outputs are equivalent.
TEST(SubexprOracle, Theorem1OnReferenceGraphs) {
  for (auto& [name, b] : benchmarks()) {
    ExprPool pool;
    SubexprOracle oracle(pool, program_targets(pool, b.program));
    auto names = exprtest::input_names(b.program);
    for (const KernelGraph* g : {&b.program, &b.reference}) {
      for (auto& [where, e] : all_tensor_exprs(pool, *g))
        EXPECT_TRUE(oracle.is_subexpr(e)) << name << ": " << where << " = " << pool.str(e, names);
      std::vector<ExprId> ex = kernel_graph_exprs(pool, *g);
      for (size_t i = 0; i < g->outputs().size(); ++i)
        EXPECT_TRUE(oracle.is_equivalent(ex[g->outputs()[i]], static_cast<int>(i)))
            << name << ": output " << i << " = " << pool.str(ex[g->outputs()[i]], names);
    }
  }
}

/// Whether a graph passes: all its tensors are subexpressions and its output is equivalent.
bool passes(ExprPool& pool, SubexprOracle& oracle, const KernelGraph& g) {
  bool ok = true;
  for (auto& [where, e] : all_tensor_exprs(pool, g)) ok = ok && oracle.is_subexpr(e);
  std::vector<ExprId> ex = kernel_graph_exprs(pool, g);
  return ok && oracle.is_equivalent(ex[g.outputs()[0]], 0);
}

TEST(SubexprOracle, WrongGraphsFail) {
  using exprtest::must;
  using exprtest::P;
  // rmsnorm with the mean of X instead of its rms: the output is not a subexpression
  {
    Benchmark b = exprtest::rmsnorm_benchmark();
    ExprPool pool;
    SubexprOracle oracle(pool, program_targets(pool, b.program));
    ASSERT_TRUE(passes(pool, oracle, b.reference));
    BlockGraph body = *b.reference.op(2).body;
    body.pop_op();  // output
    body.pop_op();  // div
    body.pop_op();  // accum_rms_ld
    int ax = must(body.add_op(OpKind::AccumMeanLd, {0}));
    EXPECT_TRUE(oracle.is_subexpr(block_graph_exprs(pool, body, {pool.var(0), pool.var(1)})[ax]));
    int o = must(body.add_op(OpKind::Div, {3, ax}));
    EXPECT_FALSE(oracle.is_subexpr(block_graph_exprs(pool, body, {pool.var(0), pool.var(1)})[o]));
  }
  // gatedmlp with silu on the wrong accumulator
  {
    Benchmark b = exprtest::gatedmlp_benchmark();
    ExprPool pool;
    SubexprOracle oracle(pool, program_targets(pool, b.program));
    BlockGraph body = *b.reference.op(3).body;
    body.pop_op();
    body.pop_op();
    int s = must(body.add_op(OpKind::Silu, {6}));  // silu(acc of X·W3)
    EXPECT_FALSE(oracle.is_subexpr(
        block_graph_exprs(pool, body, {pool.var(0), pool.var(1), pool.var(2)})[s]));
  }
  // gqa whose first kernel accumulates before exp: exp of a sum over the sequence
  {
    Benchmark b = exprtest::gqa_benchmark(false);
    ExprPool pool;
    SubexprOracle oracle(pool, program_targets(pool, b.program));
    auto body = must(BlockGraph::make({2, 4, 1}, 128, 4));
    int qt = must(body.add_input(Shape{2, 256, 64}, {0, P, P}, P));
    int kt = must(body.add_input(Shape{2, 64, 4096}, {0, 2, P}, 2));
    int s = must(body.add_op(OpKind::AccumSum, {must(body.add_op(OpKind::Matmul, {qt, kt}))}));
    int e = must(body.add_op(OpKind::Exp, {s}));
    auto bx = block_graph_exprs(pool, body, {pool.var(0), pool.var(1)});
    EXPECT_FALSE(oracle.is_subexpr(bx[s]));  // sum(256, Q·K): the target sums Q·K over 64
    EXPECT_FALSE(oracle.is_subexpr(bx[e]));
  }
}

// ---- random equivalence-preserving rewrites ----------------------------------------------

/// Rebuilds a raw node with new children.
ExprId rebuild(ExprPool& pool, ExprId e, const std::vector<ExprId>& c) {
  switch (pool.kind(e)) {
    case ExprKind::Add:
      return pool.add(c[0], c[1]);
    case ExprKind::Mul:
      return pool.mul(c[0], c[1]);
    case ExprKind::Div:
      return pool.div(c[0], c[1]);
    case ExprKind::Exp:
      return pool.exp(c[0]);
    case ExprKind::Sum:
      return pool.sum(pool.count(e), c[0]);
    case ExprKind::Rms:
      return pool.rms(pool.count(e), c[0]);
    case ExprKind::Fn:
      return pool.fn(pool.fn_kind(e), c[0], c.size() > 1 ? c[1] : kNoExpr);
    case ExprKind::Concat:
      return pool.concat(c[0], c[1]);
    default:
      return e;
  }
}

ExprId random_term(ExprPool& pool, std::mt19937& rng, int depth) {
  int pick = depth <= 0 ? 0 : static_cast<int>(rng() % 9);
  auto sub = [&] { return random_term(pool, rng, depth - 1); };
  switch (pick) {
    case 0:
      return pool.var(static_cast<int>(rng() % 4));
    case 1:
    case 2:
      return pool.add(sub(), sub());
    case 3:
    case 4:
      return pool.mul(sub(), sub());
    case 5:
      return pool.div(sub(), sub());
    case 6:
      return pool.sum(2 + rng() % 3, sub());
    case 7:
      return pool.exp(sub());
    default:
      return pool.rms(2 + rng() % 3, sub());
  }
}

/// The axioms of docs/abstract-expressions.md §3, each direction, at the root of e; empty if none
/// applies.
std::vector<ExprId> rewrites_at(ExprPool& pool, ExprId e) {
  std::vector<ExprId> out;
  auto kind = [&](ExprId x) { return pool.kind(x); };
  auto ch = [&](ExprId x, int i) { return pool.children(x)[i]; };
  ExprKind k = kind(e);
  if (k == ExprKind::Add || k == ExprKind::Mul) {
    auto op = [&](ExprId a, ExprId b) {
      return k == ExprKind::Add ? pool.add(a, b) : pool.mul(a, b);
    };
    for (int s = 0; s < 2; ++s) {
      ExprId a = ch(e, s), bc = ch(e, 1 - s);
      if (kind(bc) == k) {  // a ∘ (b ∘ c) = (a ∘ b) ∘ c
        out.push_back(op(op(a, ch(bc, 0)), ch(bc, 1)));
        out.push_back(op(op(a, ch(bc, 1)), ch(bc, 0)));
      }
      if (k == ExprKind::Mul && kind(bc) == ExprKind::Add)  // a(b+c) = ab + ac
        out.push_back(pool.add(pool.mul(a, ch(bc, 0)), pool.mul(a, ch(bc, 1))));
      if (k == ExprKind::Mul && kind(bc) == ExprKind::Div)  // a(b/c) = (ab)/c
        out.push_back(pool.div(pool.mul(a, ch(bc, 0)), ch(bc, 1)));
      if (k == ExprKind::Mul && kind(bc) == ExprKind::Sum)  // sum(n, b)·a = sum(n, b·a)
        out.push_back(pool.sum(pool.count(bc), pool.mul(ch(bc, 0), a)));
    }
    ExprId l = ch(e, 0), r = ch(e, 1);
    if (k == ExprKind::Add && kind(l) == ExprKind::Mul && kind(r) == ExprKind::Mul)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          if (ch(l, i) == ch(r, j))  // xz + yz = (x+y)z
            out.push_back(pool.mul(pool.add(ch(l, 1 - i), ch(r, 1 - j)), ch(l, i)));
    if (k == ExprKind::Add && kind(l) == ExprKind::Div && kind(r) == ExprKind::Div &&
        ch(l, 1) == ch(r, 1))  // x/z + y/z = (x+y)/z
      out.push_back(pool.div(pool.add(ch(l, 0), ch(r, 0)), ch(l, 1)));
  }
  if (k == ExprKind::Div) {
    ExprId n = ch(e, 0), d = ch(e, 1);
    if (kind(n) == ExprKind::Add)
      out.push_back(pool.add(pool.div(ch(n, 0), d), pool.div(ch(n, 1), d)));
    if (kind(n) == ExprKind::Mul)
      for (int i = 0; i < 2; ++i) out.push_back(pool.mul(ch(n, i), pool.div(ch(n, 1 - i), d)));
    if (kind(n) == ExprKind::Sum)  // sum(a, x)/y = sum(a, x/y)
      out.push_back(pool.sum(pool.count(n), pool.div(ch(n, 0), d)));
  }
  if (k == ExprKind::Sum) {
    ExprId x = ch(e, 0);
    if (kind(x) == ExprKind::Mul)
      for (int i = 0; i < 2; ++i)
        out.push_back(pool.mul(pool.sum(pool.count(e), ch(x, i)), ch(x, 1 - i)));
    if (kind(x) == ExprKind::Div)
      out.push_back(pool.div(pool.sum(pool.count(e), ch(x, 0)), ch(x, 1)));
  }
  return out;
}

/// One rewrite at a random position (possibly none).
ExprId rewrite(ExprPool& pool, ExprId e, std::mt19937& rng) {
  std::vector<ExprId> here = rewrites_at(pool, e);
  auto cs = pool.children(e);
  size_t options = here.size() + cs.size();
  if (options == 0) return e;
  size_t pick = rng() % options;
  if (pick < here.size()) return here[pick];
  std::vector<ExprId> c(cs.begin(), cs.end());
  c[pick - here.size()] = rewrite(pool, c[pick - here.size()], rng);
  return rebuild(pool, e, c);
}

void subterms(const ExprPool& pool, ExprId e, std::vector<ExprId>& out) {
  out.push_back(e);
  for (ExprId c : pool.children(e)) subterms(pool, c, out);
}

TEST(SubexprOracle, RandomRewritesKeepEquivalenceAndSubterms) {
  std::mt19937 rng(12345);
  ExprPool pool;
  int rewritten = 0, checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    ExprId t = random_term(pool, rng, 4);
    ExprId u = t;
    for (int step = 0; step < 30; ++step) {
      ExprId next = rewrite(pool, u, rng);
      rewritten += next != u;
      u = next;
    }
    auto nt = normal_form(pool, t), nu = normal_form(pool, u);
    ASSERT_TRUE(nt && nu);
    EXPECT_EQ(*nt, *nu) << pool.str(t) << " vs " << pool.str(u);
    SubexprOracle oracle(pool, {t});
    EXPECT_TRUE(oracle.is_equivalent(u, 0));
    std::vector<ExprId> subs;
    subterms(pool, u, subs);
    for (ExprId s : subs) {
      EXPECT_TRUE(oracle.is_subexpr(s)) << pool.str(s) << " ⋢ " << pool.str(t);
      if (pool.kind(s) == ExprKind::Sum)  // a smaller count is also a subexpression
        EXPECT_TRUE(oracle.is_subexpr(pool.sum(pool.count(s) - 1, pool.children(s)[0])));
      ++checked;
    }
    // nothing bigger than the target is below it
    EXPECT_FALSE(oracle.is_subexpr(pool.exp(t))) << pool.str(t);
    EXPECT_FALSE(oracle.is_subexpr(pool.sum(2, t))) << pool.str(t);
    EXPECT_FALSE(oracle.is_subexpr(pool.mul(t, pool.var(7)))) << pool.str(t);
  }
  EXPECT_GT(rewritten, 2000);  // the walk really moves (about 3300 with this seed)
  EXPECT_GT(checked, 3000);
}

// The oracle against the definition of ⊑: enumerate every term of up to 7 nodes over two
// variables, let each term's arguments be below it (and sums with smaller counts below
// sums), close under equivalence (same normal form) and transitivity, and compare with the
// oracle for targets and queries of up to 4 nodes. Everything the closure derives must be
// accepted (completeness, what Theorem 1 needs). The closure is bounded by the enumeration
// and could in principle miss a subexpression whose witness is larger; at these sizes it
// does not, so the oracle must accept nothing more either.
TEST(SubexprOracle, AgreesWithBruteForceClosureOnSmallTerms) {
  ExprPool pool;
  std::vector<std::vector<ExprId>> by_size(8);
  by_size[1] = {pool.var(0), pool.var(1)};
  for (int n = 2; n <= 7; ++n) {
    for (ExprId a : by_size[n - 1]) {
      by_size[n].push_back(pool.exp(a));
      by_size[n].push_back(pool.sum(2, a));
      by_size[n].push_back(pool.sum(3, a));
    }
    for (int i = 1; i + 1 < n; ++i)
      for (ExprId a : by_size[i])
        for (ExprId b : by_size[n - 1 - i]) {
          by_size[n].push_back(pool.add(a, b));
          by_size[n].push_back(pool.mul(a, b));
          by_size[n].push_back(pool.div(a, b));
        }
  }
  // below[c]: classes (normal forms) immediately below class c
  std::map<ExprId, std::set<ExprId>> below;
  auto cls = [&](ExprId e) { return *normal_form(pool, e); };
  size_t terms = 0;
  for (const auto& level : by_size)
    for (ExprId e : level) {
      ++terms;
      ExprId c = cls(e);
      for (ExprId a : pool.children(e)) below[c].insert(cls(a));
      if (pool.kind(e) == ExprKind::Sum)
        for (int64_t m = 1; m < pool.count(e); ++m)
          below[c].insert(cls(pool.sum(m, pool.children(e)[0])));
    }
  EXPECT_GT(terms, 40000u);
  size_t derived = 0, extra = 0;
  for (int n = 1; n <= 4; ++n)
    for (ExprId t : by_size[n]) {
      std::set<ExprId> seen{cls(t)};
      std::vector<ExprId> todo{cls(t)};
      while (!todo.empty()) {
        ExprId c = todo.back();
        todo.pop_back();
        for (ExprId d : below[c])
          if (seen.insert(d).second) todo.push_back(d);
      }
      SubexprOracle oracle(pool, {t});
      for (ExprId s : seen)
        EXPECT_TRUE(oracle.is_subexpr(s)) << pool.str(s) << " ⊑ " << pool.str(t);
      derived += seen.size();
      for (int m = 1; m <= 4; ++m)
        for (ExprId s : by_size[m]) extra += !seen.count(cls(s)) && oracle.is_subexpr(s);
    }
  EXPECT_GT(derived, 1000u);
  EXPECT_EQ(extra, 0u);
}

TEST(SubexprOracle, ConcurrentQueriesAgree) {
  Benchmark b = exprtest::gqa_benchmark(true);
  ExprPool pool;
  std::vector<ExprId> targets = program_targets(pool, b.program);
  // queries as text, so that every thread also interns them concurrently
  std::vector<std::string> queries;
  auto names = exprtest::input_names(b.program);
  for (auto& [where, e] : all_tensor_exprs(pool, b.reference))
    queries.push_back(pool.str(e, names));
  std::mt19937 rng(7);
  ExprPool scratch;
  for (int i = 0; i < 300; ++i) queries.push_back(scratch.str(random_term(scratch, rng, 3), names));
  for (const Row& row : kRows)
    if (std::string(row.target) == "@gqa" || std::string(row.target) == "@qknorm")
      queries.push_back(row.query);

  std::vector<bool> expected;
  {
    ExprPool solo;
    ExprReader read(solo);
    for (const std::string& n : names) read(n);
    SubexprOracle single(solo, program_targets(solo, b.program));
    for (const std::string& q : queries) expected.push_back(single.is_subexpr(read(q)));
  }
  EXPECT_GT(std::count(expected.begin(), expected.end(), true), 10);
  EXPECT_GT(std::count(expected.begin(), expected.end(), false), 10);

  SubexprOracle shared(pool, targets);
  constexpr int kThreads = 8;
  std::vector<std::vector<bool>> got(kThreads, std::vector<bool>(queries.size()));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ExprReader read(pool);
      for (const std::string& n : names) read(n);
      std::vector<size_t> order(queries.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(100 + t));
      for (int round = 0; round < 3; ++round)
        for (size_t i : order) got[t][i] = shared.is_subexpr(read(queries[i]));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], expected) << "thread " << t;
  SubexprOracle::Stats s = shared.stats();
  EXPECT_EQ(s.queries, uint64_t{kThreads} * 3 * queries.size());
  // at most one miss per distinct query and thread (threads may race on the first lookup)
  EXPECT_GE(s.cache_hits, s.queries - uint64_t{kThreads} * queries.size());
}

}  // namespace
}  // namespace strata
