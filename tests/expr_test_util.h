// Test helpers for abstract expressions: a reader for the printed notation and the six
// benchmark programs of bench/README.md (at reduced sizes) with their reference μGraphs
// (docs/mugraph-semantics.md §6).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "strata/expr/abstract_expr.h"
#include "strata/ir/kernel_graph.h"

namespace strata::exprtest {

/// Reads a term in the notation ExprPool::str prints: names are variables (numbered in
/// order of first use, across calls, through `names`), add/mul take two or more arguments,
/// sub is add, square(x) is mul(x, x), sum/rms take a count first. Fails the test on bad
/// syntax.
class ExprReader {
 public:
  explicit ExprReader(ExprPool& pool) : pool_(pool) {}

  ExprId operator()(std::string_view text) {
    s_ = text;
    i_ = 0;
    ExprId e = term();
    skip();
    EXPECT_EQ(i_, s_.size()) << "trailing text in `" << text << "`";
    return e;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip();
    EXPECT_TRUE(i_ < s_.size() && s_[i_] == c)
        << "expected `" << c << "` at " << i_ << " in `" << s_ << "`";
    ++i_;
  }
  std::string word() {
    skip();
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  bool peek(char c) {
    skip();
    return i_ < s_.size() && s_[i_] == c;
  }
  ExprId term() {
    std::string w = word();
    EXPECT_FALSE(w.empty()) << "expected a term at " << i_ << " in `" << s_ << "`";
    if (!peek('(')) {
      for (size_t k = 0; k < names_.size(); ++k)
        if (names_[k] == w) return pool_.var(static_cast<int>(k));
      names_.push_back(w);
      return pool_.var(static_cast<int>(names_.size() - 1));
    }
    expect('(');
    ExprId r = kNoExpr;
    if (w == "sum" || w == "rms") {
      int64_t n = std::stoll(word());
      expect(',');
      ExprId a = term();
      r = w == "sum" ? pool_.sum(n, a) : pool_.rms(n, a);
    } else {
      std::vector<ExprId> a{term()};
      while (peek(',')) {
        expect(',');
        a.push_back(term());
      }
      if (w == "add" || w == "sub" || w == "mul") {
        r = a[0];
        for (size_t k = 1; k < a.size(); ++k)
          r = w == "mul" ? pool_.mul(r, a[k]) : pool_.add(r, a[k]);
      } else if (w == "div") {
        r = pool_.div(a[0], a[1]);
      } else if (w == "exp") {
        r = pool_.exp(a[0]);
      } else if (w == "square") {
        r = pool_.mul(a[0], a[0]);
      } else if (w == "concat") {
        r = pool_.concat(a[0], a[1]);
      } else {
        auto k = parse_op_kind(w);
        EXPECT_TRUE(k.has_value()) << "unknown function " << w;
        r = pool_.fn(*k, a[0], a.size() > 1 ? a[1] : kNoExpr);
      }
    }
    expect(')');
    return r;
  }

  ExprPool& pool_;
  std::string_view s_;
  size_t i_ = 0;
  std::vector<std::string> names_;
};

/// Unwraps a Result in a test helper, failing loudly on error.
template <class T>
T must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

inline BlockGraph must_block(Dim3 grid, int forloop) {
  return must(BlockGraph::make(grid, 128, forloop));
}

inline OpAttrs dim_attr(int d) {
  OpAttrs a;
  a.dim = d;
  return a;
}
inline OpAttrs fmap_attr(int d) {
  OpAttrs a;
  a.fmap = d;
  return a;
}
inline constexpr int P = kReplicate;

/// A program and a reference μGraph computing it from the same inputs.
struct Benchmark {
  std::string name;
  KernelGraph program;
  KernelGraph reference;
};

/// rms_norm(X)·W at X[4,256], W[256,512]; reference: docs/mugraph-semantics.md §6 with grid
/// (8,1,1), F = 4.
inline Benchmark rmsnorm_benchmark() {
  Benchmark b{"rmsnorm", {}, {}};
  KernelGraph& p = b.program;
  int x = must(p.add_input("X", Shape{4, 256}, DType::f16));
  int w = must(p.add_input("W", Shape{256, 512}, DType::f16));
  int y = must(p.add_op(OpKind::RmsNorm, {x}, dim_attr(-1)));
  EXPECT_TRUE(p.mark_output(must(p.add_op(OpKind::Matmul, {y, w}))).ok());

  BlockGraph body = must_block({8, 1, 1}, 4);
  int xt = must(body.add_input(Shape{4, 256}, {P, P, P}, 1));
  int wt = must(body.add_input(Shape{256, 512}, {1, P, P}, 0));
  int mm = must(body.add_op(OpKind::Matmul, {xt, wt}));
  int am = must(body.add_op(OpKind::AccumSum, {mm}));
  int ax = must(body.add_op(OpKind::AccumRmsLd, {xt}));
  int o = must(body.add_op(OpKind::Div, {am, ax}));
  EXPECT_TRUE(body.add_output(o, {1, P, P}).ok());
  KernelGraph& r = b.reference;
  int rx = must(r.add_input("X", Shape{4, 256}, DType::f16));
  int rw = must(r.add_input("W", Shape{256, 512}, DType::f16));
  EXPECT_TRUE(r.mark_output(must(r.add_customized({rx, rw}, std::move(body)))[0]).ok());
  return b;
}

/// silu(X·W1) ⊙ (X·W3) at X[8,256], W1,W3[256,512]; reference: one kernel, grid (8,1,1),
/// F = 4, both matmuls in the loop, silu and mul after it as a thread graph.
inline Benchmark gatedmlp_benchmark() {
  Benchmark b{"gatedmlp", {}, {}};
  KernelGraph& p = b.program;
  int x = must(p.add_input("X", Shape{8, 256}, DType::f16));
  int w1 = must(p.add_input("W1", Shape{256, 512}, DType::f16));
  int w3 = must(p.add_input("W3", Shape{256, 512}, DType::f16));
  int g = must(p.add_op(OpKind::Silu, {must(p.add_op(OpKind::Matmul, {x, w1}))}));
  int u = must(p.add_op(OpKind::Matmul, {x, w3}));
  EXPECT_TRUE(p.mark_output(must(p.add_op(OpKind::Mul, {g, u}))).ok());

  BlockGraph body = must_block({8, 1, 1}, 4);
  int xt = must(body.add_input(Shape{8, 256}, {P, P, P}, 1));
  int w1t = must(body.add_input(Shape{256, 512}, {1, P, P}, 0));
  int w3t = must(body.add_input(Shape{256, 512}, {1, P, P}, 0));
  int m1 = must(body.add_op(OpKind::Matmul, {xt, w1t}));
  int m3 = must(body.add_op(OpKind::Matmul, {xt, w3t}));
  int a1 = must(body.add_op(OpKind::AccumSum, {m1}));
  int a3 = must(body.add_op(OpKind::AccumSum, {m3}));
  int o = must(body.add_thread_graph(
      {a1, a3}, {ThreadStep{OpKind::Silu, {0, 0}}, ThreadStep{OpKind::Mul, {2, 1}}}));
  EXPECT_TRUE(body.add_output(o, {1, P, P}).ok());
  KernelGraph& r = b.reference;
  int rx = must(r.add_input("X", Shape{8, 256}, DType::f16));
  int r1 = must(r.add_input("W1", Shape{256, 512}, DType::f16));
  int r3 = must(r.add_input("W3", Shape{256, 512}, DType::f16));
  EXPECT_TRUE(r.mark_output(must(r.add_customized({rx, r1, r3}, std::move(body)))[0]).ok());
  return b;
}

/// softmax(Q·K)·V without max-subtraction at Q[2,256,64], K[2,64,4096], V[2,4096,64], with
/// rms_norm of Q and K (over the head dim) when `qknorm`. Reference: FlashDecoding in two
/// kernels. Kernel 1: grid (batch 2, kv-split 4), F = 4 over the KV sequence; body
/// matmul(Q, K_i) → exp → matmul(·, V_i); accumulators accum of the EV product and
/// accum_sum_ld of exp; outputs saved with the split on the last dim. Kernel 2: F = 4 over
/// the splits, accum (φ) of both, then div.
inline Benchmark gqa_benchmark(bool qknorm) {
  Benchmark b{qknorm ? "qknorm" : "gqa", {}, {}};
  const Shape qs{2, 256, 64}, ks{2, 64, 4096}, vs{2, 4096, 64};
  KernelGraph& p = b.program;
  int q = must(p.add_input("Q", qs, DType::f16));
  int k = must(p.add_input("K", ks, DType::f16));
  int v = must(p.add_input("V", vs, DType::f16));
  if (qknorm) {
    q = must(p.add_op(OpKind::RmsNorm, {q}, dim_attr(-1)));
    k = must(p.add_op(OpKind::RmsNorm, {k}, dim_attr(1)));
  }
  int e = must(p.add_op(OpKind::Exp, {must(p.add_op(OpKind::Matmul, {q, k}))}));
  int s = must(p.add_op(OpKind::Sum, {e}, dim_attr(2)));
  int a = must(p.add_op(OpKind::Div, {e, s}));
  EXPECT_TRUE(p.mark_output(must(p.add_op(OpKind::Matmul, {a, v}))).ok());

  BlockGraph k1 = must_block({2, 4, 1}, 4);
  int qt = must(k1.add_input(qs, {0, P, P}, P));  // [1, 256, 64]
  int kt = must(k1.add_input(ks, {0, 2, P}, 2));  // [1, 64, 256]
  int vt = must(k1.add_input(vs, {0, 1, P}, 1));  // [1, 256, 64]
  if (qknorm) {
    qt = must(k1.add_op(OpKind::RmsNorm, {qt}, dim_attr(2)));
    kt = must(k1.add_op(OpKind::RmsNorm, {kt}, dim_attr(1)));
  }
  int et = must(k1.add_op(OpKind::Exp, {must(k1.add_op(OpKind::Matmul, {qt, kt}))}));
  int ev = must(k1.add_op(OpKind::Matmul, {et, vt}));
  int acc_o = must(k1.add_op(OpKind::AccumSum, {ev}));    // [1, 256, 64]
  int acc_l = must(k1.add_op(OpKind::AccumSumLd, {et}));  // [1, 256, 1]
  EXPECT_TRUE(k1.add_output(acc_o, {0, 2, P}).ok());      // [2, 256, 256]
  EXPECT_TRUE(k1.add_output(acc_l, {0, 2, P}).ok());      // [2, 256, 4]

  BlockGraph k2 = must_block({2, 1, 1}, 4);
  int ot = must(k2.add_input(Shape{2, 256, 256}, {0, P, P}, 2));  // [1, 256, 64]
  int lt = must(k2.add_input(Shape{2, 256, 4}, {0, P, P}, 2));    // [1, 256, 1]
  int so = must(k2.add_op(OpKind::AccumSum, {ot}));
  int sl = must(k2.add_op(OpKind::AccumSum, {lt}));
  EXPECT_TRUE(k2.add_output(must(k2.add_op(OpKind::Div, {so, sl})), {0, P, P}).ok());

  KernelGraph& r = b.reference;
  int rq = must(r.add_input("Q", qs, DType::f16));
  int rk = must(r.add_input("K", ks, DType::f16));
  int rv = must(r.add_input("V", vs, DType::f16));
  std::vector<int> part = must(r.add_customized({rq, rk, rv}, std::move(k1)));
  EXPECT_TRUE(r.mark_output(must(r.add_customized({part[0], part[1]}, std::move(k2)))[0]).ok());
  return b;
}

/// X·W + (X·A)·B at X[16,256], W[256,512], A[256,16], B[16,512]. Reference: one kernel,
/// grid (8,1,1), F = 4; the loop computes X·A and gathers X, W and B whole by concatenating
/// accumulators; after the loop, [X | X·A] · [W ; B].
inline Benchmark lora_benchmark() {
  Benchmark b{"lora", {}, {}};
  const Shape xs{16, 256}, ws{256, 512}, as{256, 16}, bs{16, 512};
  KernelGraph& p = b.program;
  int x = must(p.add_input("X", xs, DType::f16));
  int w = must(p.add_input("W", ws, DType::f16));
  int a = must(p.add_input("A", as, DType::f16));
  int bb = must(p.add_input("B", bs, DType::f16));
  int xw = must(p.add_op(OpKind::Matmul, {x, w}));
  int xab = must(p.add_op(OpKind::Matmul, {must(p.add_op(OpKind::Matmul, {x, a})), bb}));
  EXPECT_TRUE(p.mark_output(must(p.add_op(OpKind::Add, {xw, xab}))).ok());

  BlockGraph body = must_block({8, 1, 1}, 4);
  int xt = must(body.add_input(xs, {P, P, P}, 1));  // [16, 64]
  int wt = must(body.add_input(ws, {1, P, P}, 0));  // [64, 64]
  int at = must(body.add_input(as, {P, P, P}, 0));  // [64, 16]
  int bt = must(body.add_input(bs, {1, P, P}, 0));  // [4, 64]
  int xa = must(body.add_op(OpKind::AccumSum, {must(body.add_op(OpKind::Matmul, {xt, at}))}));
  int xc = must(body.add_op(OpKind::AccumSum, {xt}, fmap_attr(1)));   // [16, 256]
  int wc = must(body.add_op(OpKind::AccumSum, {wt}, fmap_attr(0)));   // [256, 64]
  int bc = must(body.add_op(OpKind::AccumSum, {bt}, fmap_attr(0)));   // [16, 64]
  int c1 = must(body.add_op(OpKind::Concat, {xc, xa}, dim_attr(1)));  // [16, 272]
  int c2 = must(body.add_op(OpKind::Concat, {wc, bc}, dim_attr(0)));  // [272, 64]
  EXPECT_TRUE(body.add_output(must(body.add_op(OpKind::Matmul, {c1, c2})), {1, P, P}).ok());
  KernelGraph& r = b.reference;
  std::vector<int> ins;
  for (auto& [n, s] :
       std::vector<std::pair<std::string, Shape>>{{"X", xs}, {"W", ws}, {"A", as}, {"B", bs}})
    ins.push_back(must(r.add_input(n, s, DType::f16)));
  EXPECT_TRUE(r.mark_output(must(r.add_customized(ins, std::move(body)))[0]).ok());
  return b;
}

/// rms_norm(X + α ⊙ (rms_norm(H) − X)) at H, X, α [2, 256]. Reference: one kernel, grid
/// (2,1,1), F = 4 over the hidden dim; accum_rms_ld of H and concatenating accumulators of
/// H, X, α; everything else after the loop.
inline Benchmark ntrans_benchmark() {
  Benchmark b{"ntrans", {}, {}};
  const Shape s{2, 256};
  KernelGraph& p = b.program;
  int h = must(p.add_input("H", s, DType::f16));
  int x = must(p.add_input("X", s, DType::f16));
  int al = must(p.add_input("alpha", s, DType::f16));
  int hn = must(p.add_op(OpKind::RmsNorm, {h}, dim_attr(-1)));
  int d = must(p.add_op(OpKind::Sub, {hn, x}));
  int y = must(p.add_op(OpKind::Add, {x, must(p.add_op(OpKind::Mul, {al, d}))}));
  EXPECT_TRUE(p.mark_output(must(p.add_op(OpKind::RmsNorm, {y}, dim_attr(-1)))).ok());

  BlockGraph body = must_block({2, 1, 1}, 4);
  int ht = must(body.add_input(s, {0, P, P}, 1));  // [1, 64]
  int xt = must(body.add_input(s, {0, P, P}, 1));
  int at = must(body.add_input(s, {0, P, P}, 1));
  int rh = must(body.add_op(OpKind::AccumRmsLd, {ht}));  // [1, 1]
  int hc = must(body.add_op(OpKind::AccumSum, {ht}, fmap_attr(1)));
  int xc = must(body.add_op(OpKind::AccumSum, {xt}, fmap_attr(1)));
  int ac = must(body.add_op(OpKind::AccumSum, {at}, fmap_attr(1)));
  int hn2 = must(body.add_op(OpKind::Div, {hc, rh}));
  int d2 = must(body.add_op(OpKind::Sub, {hn2, xc}));
  int y2 = must(body.add_op(OpKind::Add, {xc, must(body.add_op(OpKind::Mul, {ac, d2}))}));
  int o = must(body.add_op(OpKind::RmsNorm, {y2}, dim_attr(1)));
  EXPECT_TRUE(body.add_output(o, {0, P, P}).ok());
  KernelGraph& r = b.reference;
  int rh2 = must(r.add_input("H", s, DType::f16));
  int rx = must(r.add_input("X", s, DType::f16));
  int ra = must(r.add_input("alpha", s, DType::f16));
  EXPECT_TRUE(r.mark_output(must(r.add_customized({rh2, rx, ra}, std::move(body)))[0]).ok());
  return b;
}

/// Names of a graph's inputs, in order, for printing expressions.
inline std::vector<std::string> input_names(const KernelGraph& g) {
  std::vector<std::string> names;
  for (int t : g.inputs()) names.push_back(g.tensor_name(t));
  return names;
}

}  // namespace strata::exprtest
