// Tests of the equivalence verifier: identities the search relies on are accepted with a bound
// ≤ 2^-60, structural mistakes are rejected with the first differing element, bad interfaces are
// errors, and the EquivalenceChecker agrees with verify_equivalent.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>

#include <sys/wait.h>

#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/graph_json.h"
#include "strata/verify/verifier.h"
#include "verify/analysis.h"
#include "verify/demand.h"
#include "verify/instance_reduction.h"

namespace strata {
namespace {

constexpr int kPhi = kReplicate;

/// A kernel graph built by `fn` from named inputs of the given shapes; fn returns the outputs.
KernelGraph graph(
    std::vector<Shape> inputs,
    const std::function<std::vector<int>(KernelGraph&, const std::vector<int>&)>& fn) {
  KernelGraph g;
  std::vector<int> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(*g.add_input("I" + std::to_string(i), inputs[i], DType::f16));
  for (int t : fn(g, ins)) EXPECT_TRUE(g.mark_output(t).ok());
  return g;
}

int op(KernelGraph& g, OpKind k, std::vector<int> in, OpAttrs a = {}) {
  auto r = g.add_op(k, std::move(in), a);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : 0;
}

OpAttrs dim(int d, int64_t to = 1) {
  OpAttrs a;
  a.dim = d;
  a.to = to;
  return a;
}

int must(Result<int> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : 0;
}

std::vector<int> custom(KernelGraph& g, std::vector<int> in, Dim3 grid, int forloop,
                        const std::function<void(BlockGraph&)>& build) {
  auto made = BlockGraph::make(grid, 128, forloop);
  EXPECT_TRUE(made.ok());
  BlockGraph b = std::move(made).value();
  build(b);
  auto outs = g.add_customized(std::move(in), std::move(b));
  EXPECT_TRUE(outs.ok()) << (outs.ok() ? "" : outs.error().message);
  return outs.ok() ? *outs : std::vector<int>{};
}

OpAttrs fmap(int d) {
  OpAttrs a;
  a.fmap = d;
  return a;
}

VerifyResult verify(const KernelGraph& a, const KernelGraph& b, VerifyOptions o = {}) {
  auto r = verify_equivalent(a, b, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  // The checker's screen and verify agree with verify_equivalent.
  auto checker = EquivalenceChecker::make(a, o);
  EXPECT_TRUE(checker.ok());
  auto v = checker->verify(b);
  EXPECT_TRUE(v.ok());
  auto s = checker->screen(b);
  EXPECT_TRUE(s.ok());
  // The verdict on the program's own instance is the same (docs/verifier.md §7).
  VerifyOptions full = o;
  full.reduce_instances = false;
  auto f = verify_equivalent(a, b, full);
  EXPECT_TRUE(f.ok());
  if (r.ok() && f.ok()) {
    EXPECT_EQ(f->equivalent, r->equivalent) << r->detail << " / " << f->detail;
    EXPECT_EQ(f->unknown, r->unknown);
    EXPECT_EQ(f->output, r->output);
    EXPECT_TRUE(f->instance.empty());
  }
  if (r.ok() && v.ok() && s.ok()) {
    EXPECT_EQ(v->equivalent, r->equivalent);
    EXPECT_EQ(v->element, r->element);
    EXPECT_EQ(v->log2_bound, r->log2_bound);
    if (r->equivalent) EXPECT_TRUE(*s) << "an equivalent candidate failed the screen";
  }
  return r.ok() ? *r : VerifyResult{};
}

void expect_equivalent(const KernelGraph& a, const KernelGraph& b) {
  VerifyResult r = verify(a, b);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_GE(r.trials, 1);
  EXPECT_LE(r.log2_bound, -60.0);
  // Symmetric.
  EXPECT_TRUE(verify(b, a).equivalent);
}

/// Rejected, with the first difference in output `out` at flat element `element` (−1: any).
void expect_rejected(const KernelGraph& a, const KernelGraph& b, int out = 0,
                     int64_t element = -1) {
  VerifyResult r = verify(a, b);
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.output, out);
  if (element >= 0)
    EXPECT_EQ(r.element, element) << r.detail;
  else
    EXPECT_GE(r.element, 0);
  EXPECT_NE(r.detail.find("differs at ["), std::string::npos) << r.detail;
  // The screen compares a few blocks or elements; in these cases the mistake shows in them.
  auto checker = EquivalenceChecker::make(a, {});
  EXPECT_FALSE(*checker->screen(b));
  EXPECT_FALSE(checker->verify(b)->equivalent);
}

// ---- stopping ------------------------------------------------------------------------------

// A check whose stop flag is set gives up with the stopped error (no verdict) in every entry
// point; with the flag clear the same check runs to its verdict. (The search sets the flag at
// its time limit: docs/verifier.md, "Stopping".)
TEST(Stop, AStoppedCheckGivesUpWithoutAVerdict) {
  auto prog = graph({Shape{64, 128}, Shape{128, 96}}, [](KernelGraph& g, const std::vector<int>& in) {
    return std::vector<int>{op(g, OpKind::Matmul, {in[0], in[1]})};
  });
  std::atomic<bool> stop{true};
  VerifyOptions o;
  o.stop = &stop;
  auto r = verify_equivalent(prog, prog, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(is_stopped_error(r.error().message)) << r.error().message;
  auto checker = EquivalenceChecker::make(prog, o);
  ASSERT_TRUE(checker.ok());
  auto s = checker->screen_once(prog);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(is_stopped_error(s.error().message));
  EXPECT_FALSE(is_stopped_error("output 0 (O) differs at [3, 17]"));
  stop = false;
  auto fresh = EquivalenceChecker::make(prog, o);
  ASSERT_TRUE(fresh.ok());
  auto v = fresh->verify(prog);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->equivalent);
}

// ---- identities ---------------------------------------------------------------------------

TEST(Identities, CommutativityAndAssociativity) {
  std::vector<Shape> s{{4, 8}, {4, 8}, {8}};
  for (OpKind k : {OpKind::Add, OpKind::Mul}) {
    auto ab = graph(s, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, k, {op(g, k, {in[0], in[1]}), in[2]})};
    });
    auto ba = graph(s, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, k, {in[0], op(g, k, {in[2], in[1]})})};
    });
    expect_equivalent(ab, ba);
  }
}

TEST(Identities, Distributivity) {
  std::vector<Shape> s{{4, 8}, {8, 6}, {8, 6}};
  auto lhs = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Matmul, {in[0], op(g, OpKind::Add, {in[1], in[2]})})};
  });
  auto rhs = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{
        op(g, OpKind::Add,
           {op(g, OpKind::Matmul, {in[0], in[1]}), op(g, OpKind::Matmul, {in[0], in[2]})})};
  });
  expect_equivalent(lhs, rhs);
  // x·z + y·z = (x + y)·z elementwise, and x/z + y/z = (x + y)/z.
  std::vector<Shape> e{{4, 8}, {4, 8}, {4, 1}};
  for (OpKind k : {OpKind::Mul, OpKind::Div}) {
    auto sep = graph(e, [&](KernelGraph& g, auto in) {
      return std::vector<int>{
          op(g, OpKind::Add, {op(g, k, {in[0], in[2]}), op(g, k, {in[1], in[2]})})};
    });
    auto fac = graph(e, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, k, {op(g, OpKind::Add, {in[0], in[1]}), in[2]})};
    });
    expect_equivalent(sep, fac);
  }
}

TEST(Identities, DivisionByAPerRowScalarMovesAcrossAMatmul) {
  std::vector<Shape> s{{4, 16}, {16, 8}};
  auto rowsum = [](KernelGraph& g, int x) {
    return op(g, OpKind::Sum, {op(g, OpKind::Square, {x})}, dim(1));
  };
  auto before = graph(s, [&](KernelGraph& g, auto in) {
    int r = rowsum(g, in[0]);
    return std::vector<int>{op(g, OpKind::Matmul, {op(g, OpKind::Div, {in[0], r}), in[1]})};
  });
  auto after = graph(s, [&](KernelGraph& g, auto in) {
    int r = rowsum(g, in[0]);
    return std::vector<int>{op(g, OpKind::Div, {op(g, OpKind::Matmul, {in[0], in[1]}), r})};
  });
  expect_equivalent(before, after);
}

TEST(Identities, SplittingAndReorderingSums) {
  std::vector<Shape> s{{6, 8}};
  auto once = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Sum, {in[0]}, dim(1))};
  });
  auto split = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Sum, {op(g, OpKind::Sum, {in[0]}, dim(1, 4))}, dim(1))};
  });
  expect_equivalent(once, split);
  auto rows_first = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Sum, {op(g, OpKind::Sum, {in[0]}, dim(0))}, dim(1))};
  });
  auto cols_first = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Sum, {op(g, OpKind::Sum, {in[0]}, dim(1))}, dim(0))};
  });
  expect_equivalent(rows_first, cols_first);
  // mean over 8 = (sum to 2, then sum) / 8
  auto mean = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Mean, {in[0]}, dim(1))};
  });
  OpAttrs eighth;
  eighth.scalar = 0.125;
  auto scaled = graph(s, [&](KernelGraph& g, auto in) {
    int t = op(g, OpKind::Sum, {op(g, OpKind::Sum, {in[0]}, dim(1, 2))}, dim(1));
    return std::vector<int>{op(g, OpKind::MulScalar, {t}, eighth)};
  });
  expect_equivalent(mean, scaled);
}

TEST(Identities, ExpOfSumIsProductOfExps) {
  std::vector<Shape> s{{4, 8}, {4, 8}};
  auto lhs = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {op(g, OpKind::Add, {in[0], in[1]})})};
  });
  auto rhs = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{
        op(g, OpKind::Mul, {op(g, OpKind::Exp, {in[0]}), op(g, OpKind::Exp, {in[1]})})};
  });
  expect_equivalent(lhs, rhs);
  // exp(x)·exp(x) = exp(2x) (a scalar inside the exponent)
  OpAttrs two;
  two.scalar = 2;
  auto sq = graph({{4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Square, {op(g, OpKind::Exp, {in[0]})})};
  });
  auto dbl = graph({{4, 8}}, [&](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {op(g, OpKind::MulScalar, {in[0]}, two)})};
  });
  expect_equivalent(sq, dbl);
}

TEST(Identities, ConcatThenMatmul) {
  // [X | Y] · [W ; B] = X·W + Y·B, the second graph given as μGraph JSON.
  std::vector<Shape> s{{4, 8}, {4, 2}, {8, 6}, {2, 6}};
  auto split = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{
        op(g, OpKind::Add,
           {op(g, OpKind::Matmul, {in[0], in[2]}), op(g, OpKind::Matmul, {in[1], in[3]})})};
  });
  auto doc = parse_json_text(R"({"inputs": [
      {"name": "X", "shape": [4, 8]}, {"name": "Y", "shape": [4, 2]},
      {"name": "W", "shape": [8, 6]}, {"name": "B", "shape": [2, 6]}],
    "ops": [{"op": "concat", "inputs": ["X", "Y"], "output": "XY", "dim": 1},
            {"op": "concat", "inputs": ["W", "B"], "output": "WB", "dim": 0},
            {"op": "matmul", "inputs": ["XY", "WB"], "output": "O"}],
    "outputs": ["O"]})",
                             "concat.json");
  ASSERT_TRUE(doc.ok());
  auto fused = kernel_graph_from_json(*doc, "concat.json");
  ASSERT_TRUE(fused.ok()) << fused.error().message;
  expect_equivalent(split, *fused);
}

KernelGraph rmsnorm_program(int64_t m, int64_t k, int64_t n) {
  return graph({{m, k}, {k, n}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{
        op(g, OpKind::Matmul, {op(g, OpKind::RmsNorm, {in[0]}, dim(-1)), in[1]})};
  });
}

/// The reference RMSNorm μGraph (docs/mugraph-semantics.md §6); `accx` is the accumulator of X.
KernelGraph rmsnorm_graph(int64_t m, int64_t k, int64_t n, int grid, int forloop,
                          OpKind accx = OpKind::AccumRmsLd, int w_fmap = 0) {
  return graph({{m, k}, {k, n}}, [&](KernelGraph& g, auto in) {
    return custom(g, {in[0], in[1]}, {grid, 1, 1}, forloop, [&](BlockGraph& b) {
      int x = must(b.add_input(Shape{m, k}, kAllReplicated, 1));
      int w = must(b.add_input(Shape{k, n}, {1, kPhi, kPhi}, w_fmap));
      int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w}))}));
      int ax = must(b.add_op(accx, {x}));
      EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {am, ax})), {1, kPhi, kPhi}).ok());
    });
  });
}

TEST(Identities, RmsNormReferenceBlockGraph) {
  KernelGraph prog = rmsnorm_program(4, 256, 512), ref = rmsnorm_graph(4, 256, 512, 8, 4);
  expect_equivalent(prog, ref);
  VerifyResult r = verify(prog, ref);
  EXPECT_EQ(r.trials, 2);  // one trial bounds at ≈ 5/p > 2^-60
  EXPECT_LT(r.log2_bound, -110);
}

/// softmax(Q·K)·V without max-subtraction: the program and a FlashDecoding-style pair of
/// customized kernels (kernel 1 splits the KV sequence over grid y and loops over it).
KernelGraph attention_program() {
  return graph({{2, 4, 8}, {2, 8, 16}, {2, 16, 8}}, [](KernelGraph& g, auto in) {
    int e = op(g, OpKind::Exp, {op(g, OpKind::Matmul, {in[0], in[1]})});
    int p = op(g, OpKind::Div, {e, op(g, OpKind::Sum, {e}, dim(2))});
    return std::vector<int>{op(g, OpKind::Matmul, {p, in[2]})};
  });
}

KernelGraph attention_flash(bool exp_in_denominator = true) {
  return graph({{2, 4, 8}, {2, 8, 16}, {2, 16, 8}}, [&](KernelGraph& g, auto in) {
    auto parts = custom(g, {in[0], in[1], in[2]}, {2, 2, 1}, 2, [&](BlockGraph& b) {
      int q = must(b.add_input(Shape{2, 4, 8}, {0, kPhi, kPhi}, kPhi));  // [1, 4, 8]
      int k = must(b.add_input(Shape{2, 8, 16}, {0, 2, kPhi}, 2));       // [1, 8, 4]
      int v = must(b.add_input(Shape{2, 16, 8}, {0, 1, kPhi}, 1));       // [1, 4, 8]
      int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Matmul, {q, k}))}));
      int n = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {e, v}))}));
      int s = must(b.add_op(OpKind::Matmul, {q, k}));
      int d = must(b.add_op(OpKind::AccumSumLd, {exp_in_denominator ? e : s}));
      EXPECT_TRUE(b.add_output(n, {0, 1, kPhi}).ok());  // [2, 8, 8]: rows split·4 + i
      EXPECT_TRUE(b.add_output(d, {0, 1, kPhi}).ok());  // [2, 8, 1]
    });
    return custom(g, {parts[0], parts[1]}, {2, 1, 1}, 2, [&](BlockGraph& b) {
      int n = must(b.add_input(Shape{2, 8, 8}, {0, kPhi, kPhi}, 1));  // split i of block x
      int d = must(b.add_input(Shape{2, 8, 1}, {0, kPhi, kPhi}, 1));
      int an = must(b.add_op(OpKind::AccumSum, {n}));
      int ad = must(b.add_op(OpKind::AccumSum, {d}));
      EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {an, ad})), {0, kPhi, kPhi}).ok());
    });
  });
}

TEST(Identities, FlashDecodingAttention) {
  expect_equivalent(attention_program(), attention_flash());
}

TEST(Identities, OpaqueFunctionsOfEqualArguments) {
  // silu(x + y) computed in two orders; exp outside the Lax fragment (exp of an exp) too.
  std::vector<Shape> s{{4, 8}, {4, 8}};
  for (OpKind k : {OpKind::Silu, OpKind::Gelu, OpKind::Relu, OpKind::Sqrt}) {
    auto a = graph(s, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, k, {op(g, OpKind::Add, {in[0], in[1]})})};
    });
    auto b = graph(s, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, k, {op(g, OpKind::Add, {in[1], in[0]})})};
    });
    expect_equivalent(a, b);
  }
  auto ee = graph(s, [](KernelGraph& g, auto in) {
    int e = op(g, OpKind::Exp, {op(g, OpKind::Add, {in[0], in[1]})});
    return std::vector<int>{op(g, OpKind::Exp, {e})};
  });
  auto ee2 = graph(s, [](KernelGraph& g, auto in) {
    int e = op(g, OpKind::Mul, {op(g, OpKind::Exp, {in[1]}), op(g, OpKind::Exp, {in[0]})});
    return std::vector<int>{op(g, OpKind::Exp, {e})};
  });
  expect_equivalent(ee, ee2);
}

// ---- non-equivalences ---------------------------------------------------------------------

/// mul_scalar(X, 3) per [2, 2] tile on a (2, 2) grid with the given imap and omap.
KernelGraph tiled_scale(GridMap imap, GridMap omap) {
  return graph({{4, 4}}, [&](KernelGraph& g, auto in) {
    return custom(g, {in[0]}, {2, 2, 1}, 1, [&](BlockGraph& b) {
      int x = must(b.add_input(Shape{4, 4}, imap, kPhi));
      OpAttrs three;
      three.scalar = 3;
      int y = must(b.add_op(OpKind::MulScalar, {must(b.add_op(OpKind::AccumSum, {x}))}, three));
      EXPECT_TRUE(b.add_output(y, omap).ok());
    });
  });
}

TEST(NonEquivalences, WrongImapOrOmap) {
  OpAttrs three;
  three.scalar = 3;
  auto prog = graph({{4, 4}}, [&](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::MulScalar, {in[0]}, three)};
  });
  expect_equivalent(prog, tiled_scale({0, 1, kPhi}, {0, 1, kPhi}));
  // Block (bx, by) = (1, 0) is the first to differ: it writes [0:2, 2:4] from the wrong rows.
  expect_rejected(prog, tiled_scale({1, 0, kPhi}, {0, 1, kPhi}), 0, 2);  // wrong imap
  expect_rejected(prog, tiled_scale({0, 1, kPhi}, {1, 0, kPhi}), 0, 2);  // wrong omap
}

TEST(NonEquivalences, WrongFmap) {
  // X·W with the reduction dim split over the loop, versus no split (each iteration adds the
  // whole product: 2·X·W).
  std::vector<Shape> s{{8, 8}, {8, 8}};
  auto prog = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Matmul, {in[0], in[1]})};
  });
  auto tiled = [&](int xf, int wf) {
    return graph(s, [&](KernelGraph& g, auto in) {
      return custom(g, {in[0], in[1]}, {2, 1, 1}, 2, [&](BlockGraph& b) {
        int x = must(b.add_input(Shape{8, 8}, {0, kPhi, kPhi}, xf));
        int w = must(b.add_input(Shape{8, 8}, kAllReplicated, wf));
        int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w}))}));
        EXPECT_TRUE(b.add_output(acc, {0, kPhi, kPhi}).ok());
      });
    });
  };
  expect_equivalent(prog, tiled(1, 0));
  expect_rejected(prog, tiled(kPhi, kPhi), 0, 0);
}

TEST(NonEquivalences, WrongAccumulatorKind) {
  KernelGraph prog = rmsnorm_program(4, 256, 512);
  expect_rejected(prog, rmsnorm_graph(4, 256, 512, 8, 4, OpKind::AccumMeanLd), 0, 0);
  expect_rejected(prog, rmsnorm_graph(4, 256, 512, 8, 4, OpKind::AccumSumLd), 0, 0);
}

TEST(NonEquivalences, WrongReductionDim) {
  std::vector<Shape> s{{4, 4}};
  auto by = [&](OpKind k, int d) {
    return graph(
        s, [&](KernelGraph& g, auto in) { return std::vector<int>{op(g, k, {in[0]}, dim(d))}; });
  };
  expect_rejected(by(OpKind::RmsNorm, 1), by(OpKind::RmsNorm, 0), 0, 0);
  auto mean_then_mul = [&](int d) {
    return graph(s, [&](KernelGraph& g, auto in) {
      return std::vector<int>{op(g, OpKind::Mul, {in[0], op(g, OpKind::Mean, {in[0]}, dim(d))})};
    });
  };
  expect_rejected(mean_then_mul(0), mean_then_mul(1), 0, 0);
}

TEST(NonEquivalences, SwappedMatmulOperands) {
  std::vector<Shape> s{{6, 6}, {6, 6}};
  auto xy = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Matmul, {in[0], in[1]})};
  });
  auto yx = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Matmul, {in[1], in[0]})};
  });
  expect_rejected(xy, yx, 0, 0);
}

TEST(NonEquivalences, SqrtVersusSilu) {
  auto un = [](OpKind k) {
    return graph({{3, 5}},
                 [k](KernelGraph& g, auto in) { return std::vector<int>{op(g, k, {in[0]})}; });
  };
  expect_rejected(un(OpKind::Sqrt), un(OpKind::Silu), 0, 0);
}

TEST(NonEquivalences, SecondOutputDiffers) {
  std::vector<Shape> s{{2, 3}, {2, 3}};
  auto a = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Add, {in[0], in[1]}), op(g, OpKind::Sub, {in[0], in[1]})};
  });
  auto b = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Add, {in[1], in[0]}), op(g, OpKind::Sub, {in[1], in[0]})};
  });
  VerifyResult r = verify(a, b);
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.output, 1);
  EXPECT_EQ(r.element, 0);
  EXPECT_EQ(r.detail, "output 1 (t3) differs at [0, 0] (on the reduced instance I0.1 3 → 2)");
}

TEST(NonEquivalences, IdenticallyZeroDenominatorIsInconclusive) {
  std::vector<Shape> s{{2, 2}, {2, 2}};
  auto a = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Div, {in[0], op(g, OpKind::Sub, {in[1], in[1]})})};
  });
  VerifyResult r = verify(a, a);
  EXPECT_FALSE(r.equivalent);
  EXPECT_NE(r.detail.find("inconclusive"), std::string::npos) << r.detail;
}

// ---- bounds, options and errors -------------------------------------------------------------

TEST(Verifier, TrialsAndBound) {
  KernelGraph prog = rmsnorm_program(4, 256, 512), ref = rmsnorm_graph(4, 256, 512, 8, 4);
  VerifyOptions o;
  o.trials = 3;
  VerifyResult r = verify(prog, ref, o);
  EXPECT_TRUE(r.equivalent);
  EXPECT_EQ(r.trials, 3);
  EXPECT_NEAR(r.log2_bound, 3 * (std::log2(5.0) - 62), 0.01);  // per trial ≈ 5/p
  o.trials = 0;
  o.target_log2_bound = -150;
  EXPECT_EQ(verify(prog, ref, o).trials, 3);
  // The verdict does not depend on the seed or the thread count.
  o.seed = 99;
  o.threads = 1;
  EXPECT_TRUE(verify(prog, ref, o).equivalent);
  // Σ_k y_k / (e^x_k + e^z_k): 64 different two-term denominators multiply out to 2^64 terms;
  // the analysis gives no bound below 1, so a few trials run and agreement is "unknown".
  auto fractions = graph({{2, 64}, {2, 64}, {2, 64}}, [](KernelGraph& g, auto in) {
    int den = op(g, OpKind::Add, {op(g, OpKind::Exp, {in[0]}), op(g, OpKind::Exp, {in[2]})});
    return std::vector<int>{op(g, OpKind::Sum, {op(g, OpKind::Div, {in[1], den})}, dim(1))};
  });
  VerifyResult weak = verify(fractions, fractions);
  EXPECT_FALSE(weak.equivalent);
  EXPECT_TRUE(weak.unknown);
  EXPECT_EQ(weak.trials, 8);
  EXPECT_EQ(weak.log2_bound, 0);
  EXPECT_NE(weak.detail.find("no error bound below 1"), std::string::npos) << weak.detail;
  // Attention: sums of 16 exponentials per element still need only a few trials.
  VerifyResult att = verify(attention_program(), attention_flash());
  EXPECT_LE(att.trials, 3);
  EXPECT_LE(att.log2_bound, -60);
}

TEST(Screening, ScreensMultiKernelCandidatesOnDemand) {
  // A mistake in the first kernel shows through the second one's sampled blocks.
  expect_rejected(attention_program(), attention_flash(false), 0, 0);
  KernelGraph ref = rmsnorm_graph(4, 256, 512, 8, 4);
  verify::DemandPlan dp = verify::plan_demand(ref, 1);
  ASSERT_TRUE(dp.plan.blocks[2].has_value());
  const std::vector<int64_t>& ids = *dp.plan.blocks[2];
  ASSERT_EQ(ids.size(), 4u);  // 4 of the 8 blocks
  ASSERT_EQ(dp.compare[0].size(), 4u);
  for (size_t i = 0; i < ids.size(); ++i) {  // block x writes columns [64x, 64x + 64) of O
    EXPECT_EQ(dp.compare[0][i].lo[3], 64 * ids[i]);
    EXPECT_EQ(dp.compare[0][i].hi[3], 64 * ids[i] + 64);
    EXPECT_EQ(dp.compare[0][i].hi[2] - dp.compare[0][i].lo[2], 4);
  }
  // X is read whole (imap φ); W only in the sampled blocks' columns.
  ASSERT_EQ(dp.inputs[0].size(), 1u);
  EXPECT_EQ(dp.inputs[0][0].numel(), 4 * 256);
  ASSERT_EQ(dp.inputs[1].size(), 4u);
  for (const Box& b : dp.inputs[1]) EXPECT_EQ(b.numel(), 256 * 64);

  // A predefined op after the kernel: 4 sampled elements, and only the blocks writing them run.
  OpAttrs half;
  half.scalar = 0.5;
  KernelGraph chained = graph({{4, 256}, {256, 512}}, [&](KernelGraph& g, auto in) {
    int o = custom(g, {in[0], in[1]}, {8, 1, 1}, 4, [&](BlockGraph& b) {
      int x = must(b.add_input(Shape{4, 256}, kAllReplicated, 1));
      int w = must(b.add_input(Shape{256, 512}, {1, kPhi, kPhi}, 0));
      int am = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w}))}));
      int ax = must(b.add_op(OpKind::AccumRmsLd, {x}));
      EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {am, ax})), {1, kPhi, kPhi}).ok());
    })[0];
    return std::vector<int>{op(g, OpKind::MulScalar, {o}, half)};
  });
  dp = verify::plan_demand(chained, 3);
  ASSERT_TRUE(dp.plan.regions[3].has_value());
  const Region& elems = *dp.plan.regions[3];
  EXPECT_EQ(elems.size(), 4u);
  std::set<int64_t> want;
  for (const Box& b : elems) {
    EXPECT_EQ(b.numel(), 1);
    want.insert(b.lo[3] / 64);
  }
  const std::vector<int64_t>& run = *dp.plan.blocks[2];
  EXPECT_EQ(std::set<int64_t>(run.begin(), run.end()), want);
  // Every candidate of this shape screens and verifies like the program it equals.
  OpAttrs halfp = half;
  KernelGraph prog = graph({{4, 256}, {256, 512}}, [&](KernelGraph& g, auto in) {
    int y = op(g, OpKind::Matmul, {op(g, OpKind::RmsNorm, {in[0]}, dim(-1)), in[1]});
    return std::vector<int>{op(g, OpKind::MulScalar, {y}, halfp)};
  });
  expect_equivalent(prog, chained);
}

TEST(Verifier, InterfaceMismatchesAreNotEquivalent) {
  auto a = graph({{4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {in[0]})};
  });
  auto b = graph({{8, 4}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {in[0]})};
  });
  auto not_equivalent = [](const KernelGraph& x, const KernelGraph& y, const std::string& part) {
    auto r = verify_equivalent(x, y);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->equivalent);
    EXPECT_FALSE(r->unknown);
    EXPECT_EQ(r->trials, 0);
    EXPECT_NE(r->detail.find(part), std::string::npos) << r->detail;
    auto checker = EquivalenceChecker::make(x, {});
    ASSERT_TRUE(checker.ok());
    auto s = checker->screen(y);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_FALSE(*s);
    auto once = checker->screen_once(y);
    ASSERT_TRUE(once.ok()) << once.error().message;
    EXPECT_FALSE(*once);
    auto v = checker->verify(y);
    ASSERT_TRUE(v.ok());
    EXPECT_FALSE(v->equivalent);
    EXPECT_EQ(v->detail, r->detail);
  };
  not_equivalent(a, b,
                 "input 0 differs in shape: `I0` is [4, 8] in the first graph but `I0` is [8, 4]");
  auto c = graph({{4, 8}, {4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Add, {in[0], in[1]})};
  });
  not_equivalent(a, c, "different numbers of inputs: 1 in the first graph, 2 in the second");
  auto two = graph({{4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {in[0]}), op(g, OpKind::Square, {in[0]})};
  });
  not_equivalent(a, two, "different numbers of outputs");
  auto sum = graph({{4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Sum, {in[0]}, dim(1))};
  });
  not_equivalent(a, sum, "output 0 differs in shape: `t1` is [4, 8] in the first graph but");
  EXPECT_EQ(verify_equivalent(a, sum)->output, 0);
  // Same computation on inputs (or to outputs) of another dtype: a different function.
  KernelGraph f32;
  int x = *f32.add_input("X", Shape{4, 8}, DType::f32);
  ASSERT_TRUE(f32.mark_output(op(f32, OpKind::Exp, {x})).ok());
  not_equivalent(a, f32, "input 0 differs in dtype: `I0` is f16 in the first graph but `X` is f32");
  KernelGraph incomplete;
  EXPECT_FALSE(EquivalenceChecker::make(incomplete, {}).ok());
  EXPECT_FALSE(verify_equivalent(a, incomplete).ok());
}

TEST(Verifier, OptionsAreChecked) {
  auto a = graph({{4, 8}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {in[0]})};
  });
  for (double target :
       {0.0, 5.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN()}) {
    VerifyOptions o;
    o.target_log2_bound = target;
    auto c = EquivalenceChecker::make(a, o);
    ASSERT_FALSE(c.ok()) << target;
    EXPECT_NE(c.error().message.find("finite negative"), std::string::npos) << c.error().message;
  }
  VerifyOptions o;
  o.trials = 65;
  EXPECT_FALSE(EquivalenceChecker::make(a, o).ok());
  o.trials = -1;
  EXPECT_FALSE(EquivalenceChecker::make(a, o).ok());
  // A target beyond reach runs the most trials, 64, and reports the bound they reach (the
  // trial count was once converted from a huge double and came out as 1).
  o.trials = 0;
  for (double target : {-1e12, -1e300, -5000.0}) {
    o.target_log2_bound = target;
    VerifyResult r = verify(a, a, o);
    EXPECT_TRUE(r.equivalent);
    EXPECT_EQ(r.trials, 64) << target;
    EXPECT_LE(r.log2_bound, -60 * 64);
  }
}

// ---- coefficients divisible by p or q --------------------------------------------------------
//
// The fields see integer coefficients only modulo p and q. Programs that build coefficients of
// p's size without any constant (repeated doubling) agree modulo p with programs that are not
// equivalent; the verifier must not call them equivalent.

/// X multiplied by n through doublings and additions of the running value (no constant):
/// `combine(a, b)` adds (add) or multiplies (mul: then the result is X^n).
int by_doubling(KernelGraph& g, int x, uint64_t n, OpKind combine) {
  int top = 63;
  while (!((n >> top) & 1)) --top;
  int cur = x;
  for (int b = top - 1; b >= 0; --b) {
    cur = op(g, combine, {cur, cur});
    if ((n >> b) & 1) cur = op(g, combine, {cur, x});
  }
  return cur;
}

constexpr uint64_t kP = (uint64_t{1} << 62) - 10565;

TEST(Coefficients, MultiplesOfPAreNotEquivalent) {
  // 2^62·X against 10565·X: 2^62 ≡ 10565 (mod p), so every trial agrees.
  auto big = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, in[0], uint64_t{1} << 62, OpKind::Add)};
  });
  auto small = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, in[0], 10565, OpKind::Add)};
  });
  for (auto [x, y] : {std::pair{&big, &small}, std::pair{&small, &big}}) {
    VerifyResult r = verify(*x, *y);
    EXPECT_FALSE(r.equivalent);
    EXPECT_TRUE(r.unknown);
    EXPECT_EQ(r.log2_bound, 0);
    EXPECT_NE(r.detail.find("p ≈ 2^62 could divide them"), std::string::npos) << r.detail;
  }
  // The same with constants: mul_scalar by 2^62 and by 10565.
  auto scaled = [](double c) {
    return graph({{2, 3}}, [c](KernelGraph& g, auto in) {
      OpAttrs a;
      a.scalar = c;
      return std::vector<int>{op(g, OpKind::MulScalar, {in[0]}, a)};
    });
  };
  VerifyResult r = verify(scaled(std::ldexp(1.0, 62)), scaled(10565));
  EXPECT_FALSE(r.equivalent);
  EXPECT_TRUE(r.unknown);
  // 2^61 is not safe either: 2^61 − (10565 − 2^61) = p. Doubling 60 times keeps every
  // difference below p: a real bound, and 2^60·X is told apart from 10565·X.
  auto b61 = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, in[0], uint64_t{1} << 61, OpKind::Add)};
  });
  auto b61_other = graph({{2, 3}}, [](KernelGraph& g, auto in) {  // (10565 − 2^61)·X
    return std::vector<int>{op(g, OpKind::Sub,
                               {by_doubling(g, in[0], 10565, OpKind::Add),
                                by_doubling(g, in[0], uint64_t{1} << 61, OpKind::Add)})};
  });
  EXPECT_TRUE(verify(b61, b61_other).unknown);
  auto b60 = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, in[0], uint64_t{1} << 60, OpKind::Add)};
  });
  expect_rejected(b60, small, 0, 0);
  expect_equivalent(b60, scaled(std::ldexp(1.0, 60)));
}

TEST(Coefficients, ExponentMultiplesOfQAreNotEquivalent) {
  // exp(X) squared 62 times is exp(2^62·X); 2^62 ≡ 10566 (mod q) and ω has order q, so it
  // agrees on every trial with exp(X)^10566 (square-and-multiply) and with exp(10566·X).
  auto squared = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    int e = op(g, OpKind::Exp, {in[0]});
    for (int i = 0; i < 62; ++i) e = op(g, OpKind::Square, {e});
    return std::vector<int>{e};
  });
  auto power = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, op(g, OpKind::Exp, {in[0]}), 10566, OpKind::Mul)};
  });
  OpAttrs c;
  c.scalar = 10566;
  auto scaled = graph({{2, 3}}, [&](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Exp, {op(g, OpKind::MulScalar, {in[0]}, c)})};
  });
  for (const KernelGraph* other : {&power, &scaled}) {
    VerifyResult r = verify(squared, *other);
    EXPECT_FALSE(r.equivalent);
    EXPECT_TRUE(r.unknown);
    EXPECT_NE(r.detail.find("q ≈ 2^61 could divide them"), std::string::npos) << r.detail;
  }
  // The smaller power is a real identity: exp(X)^10566 = exp(10566·X).
  expect_equivalent(power, scaled);
}

TEST(Coefficients, VacuousDegreeBoundIsNotAYes) {
  // X^p = X on Z_p (Fermat), but not as polynomials: the degree bound p gives nothing.
  auto xp = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{by_doubling(g, in[0], kP, OpKind::Mul)};
  });
  auto x = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    OpAttrs one;
    one.scalar = 1;
    return std::vector<int>{op(g, OpKind::MulScalar, {in[0]}, one)};
  });
  VerifyResult r = verify(xp, x);
  EXPECT_FALSE(r.equivalent);
  EXPECT_TRUE(r.unknown);
  EXPECT_EQ(r.trials, 8);
  EXPECT_NE(r.detail.find("degree up to 4.61e+18"), std::string::npos) << r.detail;
}

TEST(Coefficients, ConcatOfDifferentConstantsSumsOverAllTheirDenominators) {
  // mean over 3 of X next to mean over 5 of Y, then summed across the seam: the sum's integer
  // denominator is 3·5, not max(3, 5) (the parts' constants differ, so their denominators do).
  auto g = graph({{2, 3}, {2, 5}}, [](KernelGraph& g, auto in) {
    int c =
        op(g, OpKind::Concat,
           {op(g, OpKind::Mean, {in[0]}, dim(1)), op(g, OpKind::Mean, {in[1]}, dim(1))}, dim(1));
    return std::vector<int>{op(g, OpKind::Sum, {c}, dim(1))};
  });
  auto an = verify::analyze_graph(g);
  ASSERT_TRUE(an.ok()) << an.error().message;
  const verify::Coef& c = an->kernel[g.outputs()[0]].v.coef;
  EXPECT_GE(c.hd + c.c.log2_v(), std::log2(15.0) - 1e-9) << c.hd;
  // Within one tensor a shared constant stays exact: mean over 3 keeps 1/3 as its constant.
  auto m = graph({{2, 3}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Mean, {in[0]}, dim(1))};
  });
  auto am = verify::analyze_graph(m);
  ASSERT_TRUE(am.ok());
  const verify::Coef& cm = am->kernel[m.outputs()[0]].v.coef;
  EXPECT_EQ(cm.c, (verify::Content{0, 1, 3}));
  EXPECT_EQ(cm.hd, 0);
  EXPECT_NEAR(cm.hn, std::log2(3.0), 1e-12);
}

TEST(Coefficients, ScalarsWithLongMantissasKeepTheirBound) {
  // Constants are tracked exactly (2^e·u/v), so graphs that apply the same scalars in other
  // places keep a real bound even when the scalars' numerators and denominators are large.
  const double scale = 1 / std::sqrt(128.0), tenth = 0.1, third = 1.0 / 3;
  auto scalar = [](double c) {
    OpAttrs a;
    a.scalar = c;
    return a;
  };
  std::vector<Shape> att{{2, 4, 8}, {2, 8, 16}, {2, 16, 8}};
  auto scaled_scores = graph(att, [&](KernelGraph& g, auto in) {
    int s = op(g, OpKind::MulScalar, {op(g, OpKind::Matmul, {in[0], in[1]})}, scalar(scale));
    int e = op(g, OpKind::Exp, {s});
    int p = op(g, OpKind::Div, {e, op(g, OpKind::Sum, {e}, dim(2))});
    return std::vector<int>{op(g, OpKind::Matmul, {p, in[2]})};
  });
  auto scaled_query = graph(att, [&](KernelGraph& g, auto in) {
    int q = op(g, OpKind::MulScalar, {in[0]}, scalar(scale));
    int e = op(g, OpKind::Exp, {op(g, OpKind::Matmul, {q, in[1]})});
    int n = op(g, OpKind::Matmul, {e, in[2]});
    return std::vector<int>{op(g, OpKind::Div, {n, op(g, OpKind::Sum, {e}, dim(2))})};
  });
  expect_equivalent(scaled_scores, scaled_query);
  // Two different scalars, summed in either order; and a mean over 3 (an odd denominator).
  std::vector<Shape> s{{6, 3}, {6, 3}};
  auto mix = [&](bool swapped) {
    return graph(s, [&](KernelGraph& g, auto in) {
      int a = op(g, OpKind::MulScalar, {in[0]}, scalar(tenth));
      int b = op(g, OpKind::MulScalar, {in[1]}, scalar(third));
      return std::vector<int>{
          op(g, OpKind::Add, swapped ? std::vector<int>{b, a} : std::vector<int>{a, b})};
    });
  };
  expect_equivalent(mix(false), mix(true));
  auto mean = graph(s, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::Mean, {in[0]}, dim(1))};
  });
  auto thirds = graph(s, [&](KernelGraph& g, auto in) {
    return std::vector<int>{
        op(g, OpKind::Sum, {op(g, OpKind::MulScalar, {in[0]}, scalar(third))}, dim(1))};
  });
  // 1/3 as a double is not exactly 1/3: these differ, and the difference is found.
  expect_rejected(mean, thirds, 0, -1);
}

// ---- safe softmax: max, the online softmax and exp safety ---------------------------------

// Attention O = softmax(0.125·Q·K)·V over Q[2, 4, 8], K[2, 8, 32], V[2, 32, 8]; `safe`
// subtracts the row max first (docs/verifier.md, "Max" and "Safe exponentials").
KernelGraph softmax_attention(bool safe, bool wrong_max_dim = false, bool max_of_other = false) {
  std::vector<Shape> att{{2, 4, 8}, {2, 8, 32}, {2, 32, 8}};
  return graph(att, [&](KernelGraph& g, auto in) {
    OpAttrs sc;
    sc.scalar = 0.125;
    int qk = op(g, OpKind::Matmul, {in[0], in[1]});
    int s = op(g, OpKind::MulScalar, {qk}, sc);
    int x = s;
    if (safe) {
      int m = op(g, OpKind::Max, {max_of_other ? qk : s}, dim(wrong_max_dim ? 1 : 2));
      x = op(g, OpKind::Sub, {s, m});
    }
    int e = op(g, OpKind::Exp, {x});
    int p = op(g, OpKind::Div, {e, op(g, OpKind::Sum, {e}, dim(2))});
    return std::vector<int>{op(g, OpKind::Matmul, {p, in[2]})};
  });
}

/// Mistakes an online softmax can make (each one alone).
struct OnlineMutation {
  bool plain_accum = false;   ///< accum / accum_sum_ld instead of the rescaling accumulators
  bool unshifted = false;     ///< exp(s) without the running max
  bool wrong_sign = false;    ///< exp(m − s)
  bool max_of_other = false;  ///< the running max of the unscaled scores Q·K
  int iterations = 4;         ///< F
};

/// One kernel, F iterations over the 32 keys: running_max, exp(s − m), and the rescaling
/// accumulators of exp(s − m)·V and of the exp-sum. `unshifted`: no running max at all,
/// exp(s) and plain accumulators (the unsafe program fused).
KernelGraph online_softmax(OnlineMutation mu = {}) {
  std::vector<Shape> att{{2, 4, 8}, {2, 8, 32}, {2, 32, 8}};
  return graph(att, [&](KernelGraph& g, auto in) {
    return custom(g, in, {2, 1, 1}, mu.iterations, [&](BlockGraph& b) {
      int q = must(b.add_input(att[0], {0, kPhi, kPhi}, kPhi));
      int k = must(b.add_input(att[1], {0, kPhi, kPhi}, 2));
      int v = must(b.add_input(att[2], {0, kPhi, kPhi}, 1));
      OpAttrs sc;
      sc.scalar = 0.125;
      int qk = must(b.add_op(OpKind::Matmul, {q, k}));
      int s = must(b.add_op(OpKind::MulScalar, {qk}, sc));
      int m = mu.unshifted ? -1 : must(b.add_op(OpKind::RunningMax, {mu.max_of_other ? qk : s}));
      int x = mu.unshifted    ? s
              : mu.wrong_sign ? must(b.add_op(OpKind::Sub, {m, s}))
                              : must(b.add_op(OpKind::Sub, {s, m}));
      int e = must(b.add_op(OpKind::Exp, {x}));
      int pv = must(b.add_op(OpKind::Matmul, {e, v}));
      bool plain = mu.plain_accum || mu.unshifted;
      int o = plain ? must(b.add_op(OpKind::AccumSum, {pv}))
                    : must(b.add_op(OpKind::AccumRescale, {pv, m}));
      int l = plain ? must(b.add_op(OpKind::AccumSumLd, {e}))
                    : must(b.add_op(OpKind::AccumRescaleLd, {e, m}));
      EXPECT_TRUE(b.add_output(must(b.add_op(OpKind::Div, {o, l})), {0, kPhi, kPhi}).ok());
    });
  });
}

/// Rejected by the exp-safety check (equal over the reals, so no element differs).
void expect_unsafe(const KernelGraph& program, const KernelGraph& candidate) {
  VerifyResult r = verify(program, candidate);
  EXPECT_FALSE(r.equivalent);
  EXPECT_NE(r.detail.find("without that shift"), std::string::npos) << r.detail;
  auto checker = EquivalenceChecker::make(program, {});
  ASSERT_TRUE(checker.ok());
  EXPECT_FALSE(*checker->screen(candidate));
}

TEST(SafeSoftmax, OnlineSoftmaxIsAcceptedWithABound) {
  KernelGraph safe = softmax_attention(true);
  expect_equivalent(safe, online_softmax());
  // With more iterations the running max changes more often; the result is the same.
  EXPECT_TRUE(verify(safe, online_softmax({.iterations = 8})).equivalent);
}

TEST(SafeSoftmax, AccumulatingWithoutTheRescaleIsRejected) {
  // Σ_i e^(s_i − m_i)·v_i mixes shifts of different iterations: a different value.
  expect_rejected(softmax_attention(true), online_softmax({.plain_accum = true}));
}

TEST(SafeSoftmax, WrongSignIsRejected) {
  // exp(m − s) is no shift by a max (the safety check names it), and a different function
  // (the field check finds an element, even against the unsafe program).
  expect_unsafe(softmax_attention(true), online_softmax({.wrong_sign = true}));
  expect_rejected(softmax_attention(false), online_softmax({.wrong_sign = true}));
}

TEST(SafeSoftmax, UnshiftedExpIsRejectedForASafeProgram) {
  // exp(s)·V / Σ exp(s), fused or not, is the unsafe program's function: the field check
  // proves it equal to the safe one too (the shift cancels), so only the safety check can
  // refuse it, and must.
  KernelGraph fused = online_softmax({.unshifted = true});
  expect_equivalent(softmax_attention(false), fused);
  expect_unsafe(softmax_attention(true), fused);
  expect_unsafe(softmax_attention(true), softmax_attention(false));
}

TEST(SafeSoftmax, MaxOverTheWrongDimIsRejected) {
  // A max over the query rows is not constant along a softmax row: the shift does not cancel.
  expect_rejected(softmax_attention(true), softmax_attention(true, /*wrong_max_dim=*/true));
}

TEST(SafeSoftmax, MaxOfAnotherTensorIsRejected) {
  // A max of the unscaled scores is constant along each row, so the field check alone would
  // accept it (the shift cancels); but exp(s − max(Q·K)) can still overflow: unsafe.
  expect_unsafe(softmax_attention(true), softmax_attention(true, false, /*max_of_other=*/true));
  expect_unsafe(softmax_attention(true), online_softmax({.max_of_other = true}));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(Cli, EquivExitCodes) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN must point at the strata tool";
  std::string dir = ::testing::TempDir();
  auto save = [&](const std::string& name, const KernelGraph& g) {
    std::string path = dir + "/" + name;
    EXPECT_TRUE(save_graph_json(g, path).ok());
    return path;
  };
  std::vector<Shape> s{{6, 6}, {6, 6}};
  std::string xy = save("xy.json", graph(s, [](KernelGraph& g, auto in) {
                          return std::vector<int>{op(g, OpKind::Matmul, {in[0], in[1]})};
                        }));
  std::string xy2 = save("xy2.json", graph(s, [](KernelGraph& g, auto in) {
                           int x2 = op(g, OpKind::MulScalar, {in[0]}, [] {
                             OpAttrs a;
                             a.scalar = 2;
                             return a;
                           }());
                           OpAttrs half;
                           half.scalar = 0.5;
                           return std::vector<int>{op(g, OpKind::MulScalar,
                                                      {op(g, OpKind::Matmul, {x2, in[1]})}, half)};
                         }));
  std::string yx = save("yx.json", graph(s, [](KernelGraph& g, auto in) {
                          return std::vector<int>{op(g, OpKind::Matmul, {in[1], in[0]})};
                        }));
  std::string other = save("other.json", graph({{6, 6}}, [](KernelGraph& g, auto in) {
                             return std::vector<int>{op(g, OpKind::Exp, {in[0]})};
                           }));
  auto code = [&](const std::string& args) {
    int status = std::system((std::string(bin) + " equiv " + args + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(code(xy + " " + xy2), 0);
  EXPECT_EQ(code(xy + " " + yx), 1);
  EXPECT_EQ(code(xy + " " + yx + " --screen"), 1);
  EXPECT_EQ(code(xy + " " + xy2 + " --screen --trials 1"), 0);
  EXPECT_EQ(code(xy + " " + other), 1);  // different interfaces: not equivalent
  EXPECT_EQ(code(xy + " " + dir + "/missing.json"), 2);
}

// ---- reduced instances (docs/verifier.md §7) --------------------------------------------------

/// softmax(Q·K)·V over `rows` query rows (4 heads, head dim 16, 64 keys; K stored [h, d, n]).
KernelGraph attention_rows(int64_t rows) {
  return graph({{4, rows, 16}, {4, 16, 64}, {4, 64, 16}}, [](KernelGraph& g, auto in) {
    int e = op(g, OpKind::Exp, {op(g, OpKind::Matmul, {in[0], in[1]})});
    int p = op(g, OpKind::Div, {e, op(g, OpKind::Sum, {e}, dim(2))});
    return std::vector<int>{op(g, OpKind::Matmul, {p, in[2]})};
  });
}

/// One kernel: grid (heads, row tiles), a loop of two key tiles of 32. `k_imap_y` maps K's
/// dim on grid y (kPhi: correct); `mix_rows` divides by the tile's summed denominators (wrong);
/// `cancel_rows` adds the tile's summed denominators minus themselves (zero: still right, but
/// the block no longer computes its rows one by one).
KernelGraph attention_rows_fused(int64_t rows, int row_blocks, int k_imap_y = kPhi,
                                 bool mix_rows = false, bool cancel_rows = false) {
  return graph({{4, rows, 16}, {4, 16, 64}, {4, 64, 16}}, [&](KernelGraph& g, auto in) {
    return custom(g, {in[0], in[1], in[2]}, {4, row_blocks, 1}, 2, [&](BlockGraph& b) {
      int q = must(b.add_input(Shape{4, rows, 16}, {0, 1, kPhi}, kPhi));
      int k = must(b.add_input(Shape{4, 16, 64}, {0, k_imap_y, kPhi}, k_imap_y == 2 ? kPhi : 2));
      int v = must(b.add_input(Shape{4, 64, 16}, {0, kPhi, kPhi}, 1));
      int e = must(b.add_op(OpKind::Exp, {must(b.add_op(OpKind::Matmul, {q, k}))}));
      int n = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {e, v}))}));
      int d = must(b.add_op(OpKind::AccumSumLd, {e}));
      if (mix_rows) d = must(b.add_op(OpKind::Sum, {d}, dim(1)));
      int o = must(b.add_op(OpKind::Div, {n, d}));
      if (cancel_rows) {
        int s = must(b.add_op(OpKind::Sum, {d}, dim(1)));
        o = must(b.add_op(OpKind::Add, {o, must(b.add_op(OpKind::Sub, {s, s}))}));
      }
      EXPECT_TRUE(b.add_output(o, {0, 1, kPhi}).ok());
    });
  });
}

TEST(ReducedInstances, IndependentClassesOfAttention) {
  KernelGraph prog = attention_rows(256);
  verify::ProgramClasses pc = verify::independent_classes(prog);
  // Heads (Q.0 = K.0 = V.0) and query rows (Q.1) and V's columns; never Q's head dim
  // (contracted) or the keys (summed).
  ASSERT_EQ(pc.extent, (std::vector<int64_t>{4, 256, 16}));
  EXPECT_EQ(pc.names, (std::vector<std::string>{"I0.0", "I0.1", "I2.2"}));
  const auto& in = prog.inputs();
  EXPECT_EQ(pc.labels[in[0]], (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(pc.labels[in[1]], (std::vector<int>{0, -1, -1}));
  EXPECT_EQ(pc.labels[in[2]], (std::vector<int>{0, -1, 2}));
  EXPECT_EQ(pc.labels[prog.outputs()[0]], (std::vector<int>{0, 1, 2}));
  // A program that normalizes over its rows has no independent rows.
  auto norm = graph({{8, 32}}, [](KernelGraph& g, auto in) {
    return std::vector<int>{op(g, OpKind::RmsNorm, {op(g, OpKind::Transpose, {in[0]})}, dim(1))};
  });
  EXPECT_EQ(verify::independent_classes(norm).extent, (std::vector<int64_t>{32}));
}

TEST(ReducedInstances, FusedAttentionIsCheckedOnTwoRowsPerClass) {
  // The block computes its query rows one by one (and V's columns, which it holds whole): both
  // shrink to two, whatever the tiles. The heads, one per block, shrink to two blocks.
  KernelGraph prog = attention_rows(256), cand = attention_rows_fused(256, 8);
  auto reduced = verify::reduce_instance(prog, verify::independent_classes(prog), cand);
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->description, "I0.0 4 → 2, I0.1 256 → 2, I2.2 16 → 2");
  EXPECT_EQ(reduced->candidate.op(3).body->grid(), (Dim3{2, 2, 1}));
  EXPECT_EQ(reduced->candidate.op(3).body->forloop(), 2);  // the loop runs over the keys
  EXPECT_EQ(reduced->program.tensor(reduced->program.outputs()[0]).shape, (Shape{2, 2, 2}));
  VerifyResult r = verify(prog, cand);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_EQ(r.instance, "I0.0 4 → 2, I0.1 256 → 2, I2.2 16 → 2");
  EXPECT_LE(r.log2_bound, -60);
}

TEST(ReducedInstances, RowsABlockMixesKeepTheirTiles) {
  // The same kernel adding its tile's summed denominators minus themselves: still equivalent,
  // but the rows of a tile meet, so the rows keep their tiles of 32 (two of them); the heads
  // and V's columns are still computed one by one.
  KernelGraph prog = attention_rows(256), cand = attention_rows_fused(256, 8, kPhi, false, true);
  auto reduced = verify::reduce_instance(prog, verify::independent_classes(prog), cand);
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->description, "I0.0 4 → 2, I0.1 256 → 64, I2.2 16 → 2");
  EXPECT_EQ(reduced->candidate.op(3).body->grid(), (Dim3{2, 2, 1}));
  EXPECT_EQ(reduced->program.tensor(reduced->program.outputs()[0]).shape, (Shape{2, 64, 2}));
  VerifyResult r = verify(prog, cand);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_EQ(r.instance, "I0.0 4 → 2, I0.1 256 → 64, I2.2 16 → 2");
}

TEST(ReducedInstances, ClassesACandidateDoesNotRespectKeepTheirExtent) {
  KernelGraph prog = attention_rows(256);
  // K's keys split by the rows' grid axis: each block sees a quarter of the keys (wrong). The
  // rows are no longer a class the candidate respects; the heads and V's columns still are.
  VerifyResult r = verify(prog, attention_rows_fused(256, 2, 2));
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.instance, "I0.0 4 → 2, I2.2 16 → 2");
  EXPECT_NE(r.detail.find("on the reduced instance I0.0 4 → 2, I2.2 16 → 2"), std::string::npos)
      << r.detail;
}

TEST(ReducedInstances, AMistakeWithinATileShowsOnTheReducedInstance) {
  // The tile's rows summed into each row's denominator: the rows keep their tiles, and the
  // mistake shows on two of them.
  KernelGraph prog = attention_rows(256);
  VerifyResult r = verify(prog, attention_rows_fused(256, 8, kPhi, /*mix_rows=*/true));
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.instance, "I0.0 4 → 2, I0.1 256 → 64, I2.2 16 → 2");
  EXPECT_GE(r.element, 0);
  EXPECT_LT(r.element, 4 * 256 * 16);
}

// ---- classes a block loops over or keeps whole ----

/// silu(X·W) + B for X [rows, 64], W [64, 48], B [48]: the rows (I0.0) and the columns
/// (I1.1 = I2.0) are independent.
KernelGraph linear_rows(int64_t rows) {
  return graph({{rows, 64}, {64, 48}, {48}}, [](KernelGraph& g, auto in) {
    int y = op(g, OpKind::Silu, {op(g, OpKind::Matmul, {in[0], in[1]})});
    return std::vector<int>{op(g, OpKind::Add, {y, in[2]})};
  });
}

/// How linear_looped goes wrong (kNone: it does not).
enum class LoopMistake { kNone, kMixRows, kRunningMax, kAccumBias, kCancelBias, kCancelRows };

/// linear_rows(rows) in one kernel whose for-loop runs over the rows in steps of `step`:
/// grid (3 column tiles of 16, `row_blocks` row parts), X cut along its rows (fmap 0), W and B
/// loop-invariant, and the iterations' tiles concatenated along the rows (accum fmap 0).
KernelGraph linear_looped(int64_t rows, int row_blocks, int64_t step,
                          LoopMistake mistake = LoopMistake::kNone) {
  const int forloop = static_cast<int>(rows / row_blocks / step);
  return graph({{rows, 64}, {64, 48}, {48}}, [&](KernelGraph& g, auto in) {
    return custom(g, {in[0], in[1], in[2]}, {3, row_blocks, 1}, forloop, [&](BlockGraph& b) {
      int x = must(b.add_input(Shape{rows, 64}, {kPhi, row_blocks > 1 ? 0 : kPhi, kPhi}, 0));
      int w = must(b.add_input(Shape{64, 48}, {1, kPhi, kPhi}, kPhi));
      int bias = must(b.add_input(Shape{48}, {0, kPhi, kPhi}, kPhi));
      int y = must(b.add_op(OpKind::Silu, {must(b.add_op(OpKind::Matmul, {x, w}))}));
      y = must(b.add_op(OpKind::Add, {y, bias}));
      int s = -1;
      switch (mistake) {
        case LoopMistake::kMixRows:  // every row gets the iteration's column sums (wrong)
          y = must(b.add_op(OpKind::Add, {y, must(b.add_op(OpKind::Sum, {y}, dim(0)))}));
          break;
        case LoopMistake::kCancelRows:  // the column sums minus themselves (right)
          s = must(b.add_op(OpKind::Sum, {y}, dim(0)));
          y = must(b.add_op(OpKind::Add, {y, must(b.add_op(OpKind::Sub, {s, s}))}));
          break;
        case LoopMistake::kRunningMax:  // each row's max over X's rows so far (wrong)
          y = must(b.add_op(OpKind::Add, {y, must(b.add_op(OpKind::RunningMax, {x}))}));
          break;
        default:
          break;
      }
      int acc = must(b.add_op(OpKind::AccumSum, {y}, fmap(0)));
      if (mistake == LoopMistake::kAccumBias || mistake == LoopMistake::kCancelBias) {
        // The bias summed over the iterations: F·B, which depends on the trip count.
        int fb = must(b.add_op(OpKind::AccumSum, {bias}));
        if (mistake == LoopMistake::kCancelBias) fb = must(b.add_op(OpKind::Sub, {fb, fb}));
        acc = must(b.add_op(OpKind::Add, {acc, fb}));
      }
      EXPECT_TRUE(b.add_output(acc, {1, row_blocks > 1 ? 0 : kPhi, kPhi}).ok());
    });
  });
}

/// linear_rows(rows) in one kernel that holds the rows whole: grid (3 column tiles of 16), a
/// loop over four steps of 16 of the contracted dim, silu and the bias after the loop.
KernelGraph linear_whole_rows(int64_t rows, bool mix_rows = false) {
  return graph({{rows, 64}, {64, 48}, {48}}, [&](KernelGraph& g, auto in) {
    return custom(g, {in[0], in[1], in[2]}, {3, 1, 1}, 4, [&](BlockGraph& b) {
      int x = must(b.add_input(Shape{rows, 64}, {kPhi, kPhi, kPhi}, 1));
      int w = must(b.add_input(Shape{64, 48}, {1, kPhi, kPhi}, 0));
      int bias = must(b.add_input(Shape{48}, {0, kPhi, kPhi}, kPhi));
      int acc = must(b.add_op(OpKind::AccumSum, {must(b.add_op(OpKind::Matmul, {x, w}))}));
      int y = must(b.add_op(OpKind::Add, {must(b.add_op(OpKind::Silu, {acc})), bias}));
      if (mix_rows) {  // every row gets the last row's value too (wrong)
        OpAttrs last = dim(0);
        last.start = rows - 1;
        last.end = rows;
        y = must(b.add_op(OpKind::Add, {y, must(b.add_op(OpKind::Slice, {y}, last))}));
      }
      EXPECT_TRUE(b.add_output(y, {1, kPhi, kPhi}).ok());
    });
  });
}

TEST(ReducedInstances, ALoopOverRowsIsCheckedOnTwoRows) {
  // 256 rows in 16 iterations of 16: every iteration computes its own rows, one by one.
  KernelGraph prog = linear_rows(256), cand = linear_looped(256, 1, 16);
  auto reduced = verify::reduce_instance(prog, verify::independent_classes(prog), cand);
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->description, "I0.0 256 → 2, I1.1 48 → 2");
  const BlockGraph& b = *reduced->candidate.op(3).body;
  // Two column blocks of one column; two iterations of one row.
  EXPECT_EQ(b.grid(), (Dim3{2, 1, 1}));
  EXPECT_EQ(b.forloop(), 2);
  EXPECT_EQ(b.tensor(0).shape, (Shape{1, 64}));
  VerifyResult r = verify(prog, cand);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_EQ(r.instance, "I0.0 256 → 2, I1.1 48 → 2");
  EXPECT_LE(r.log2_bound, -60);
  // A grid that splits the rows too (4 parts of 64, 8 iterations of 8 each).
  VerifyResult split = verify(prog, linear_looped(256, 4, 8));
  EXPECT_TRUE(split.equivalent) << split.detail;
  EXPECT_EQ(split.instance, "I0.0 256 → 2, I1.1 48 → 2");
}

TEST(ReducedInstances, RowsABlockHoldsWholeAreCheckedOnTwoRows) {
  // Every block holds all 512 rows of X and loops over the contracted dim.
  KernelGraph prog = linear_rows(512), cand = linear_whole_rows(512);
  auto reduced = verify::reduce_instance(prog, verify::independent_classes(prog), cand);
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->description, "I0.0 512 → 2, I1.1 48 → 2");
  EXPECT_EQ(reduced->candidate.op(3).body->forloop(), 4);
  VerifyResult r = verify(prog, cand);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_EQ(r.instance, "I0.0 512 → 2, I1.1 48 → 2");
  // Reading another row of the block (a slice along the rows) mixes them: the rows keep their
  // extent, and the mistake is found.
  VerifyResult wrong = verify(prog, linear_whole_rows(512, true));
  EXPECT_FALSE(wrong.equivalent);
  EXPECT_EQ(wrong.instance, "I1.1 48 → 2");
}

TEST(ReducedInstances, AMistakeWithinOneIterationIsStillRejected) {
  KernelGraph prog = linear_rows(256);
  // The loop alone runs over the rows: a block that mixes an iteration's rows is checked on
  // all of them.
  VerifyResult r = verify(prog, linear_looped(256, 1, 16, LoopMistake::kMixRows));
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.instance, "I1.1 48 → 2");
  // With the grid splitting the rows too, they keep the grid's tiles of 64 (two of them).
  VerifyResult split = verify(prog, linear_looped(256, 4, 8, LoopMistake::kMixRows));
  EXPECT_FALSE(split.equivalent);
  EXPECT_EQ(split.instance, "I0.0 256 → 128, I1.1 48 → 2");
  EXPECT_NE(split.detail.find("on the reduced instance"), std::string::npos) << split.detail;
}

TEST(ReducedInstances, LoopsThatCombineIterationsFallBack) {
  KernelGraph prog = linear_rows(256);
  verify::ProgramClasses pc = verify::independent_classes(prog);
  // A running op carries values across the iterations, i.e. across rows; an accumulator that
  // sums the iterations (of the bias: F·B) depends on the trip count. Either way the rows keep
  // their extent, right or wrong, and the verdicts are those of the full instance (verify()
  // compares them).
  for (LoopMistake m : {LoopMistake::kRunningMax, LoopMistake::kAccumBias,
                        LoopMistake::kCancelBias, LoopMistake::kCancelRows}) {
    KernelGraph cand = linear_looped(256, 1, 16, m);
    auto reduced = verify::reduce_instance(prog, pc, cand);
    ASSERT_TRUE(reduced.has_value());
    EXPECT_EQ(reduced->description, "I1.1 48 → 2");
    VerifyResult r = verify(prog, cand);
    // Adding zero (F·B − F·B, or the iteration's column sums minus themselves) is right.
    const bool right = m == LoopMistake::kCancelBias || m == LoopMistake::kCancelRows;
    EXPECT_EQ(r.equivalent, right) << r.detail;
    EXPECT_EQ(r.instance, "I1.1 48 → 2");
  }
}

/// Every graph one edit away from `doc` that loads: each imap, fmap and omap entry of a block
/// input iterator, accumulator or saver moved to every other dim or to φ, each elementwise op
/// and accumulator replaced by another of its family, each scalar doubled, and each grid
/// extent and for-loop range doubled or halved.
std::vector<KernelGraph> mutants(const Json& doc) {
  std::vector<KernelGraph> out;
  auto keep = [&](const Json& m) {
    if (auto g = kernel_graph_from_json(m, "mutant"); g.ok()) out.push_back(std::move(*g));
  };
  for (size_t k = 0; k < doc["ops"].size(); ++k) {
    const Json& kop = doc["ops"][k];
    if (!kop.contains("block_graph")) continue;
    for (int64_t factor : {2, -2}) {
      auto scaled = [&](const Json& v) {
        int64_t n = v.get<int64_t>();
        return factor > 0 ? n * factor : n / -factor;
      };
      for (size_t a = 0; a < 3; ++a) {
        Json m = doc;
        Json& grid = m["ops"][k]["block_graph"]["grid"][a];
        if (scaled(grid) < 1 || scaled(grid) == grid.get<int64_t>()) continue;
        grid = scaled(grid);
        keep(m);
      }
      Json m = doc;
      Json& forloop = m["ops"][k]["block_graph"]["forloop"];
      if (scaled(forloop) < 1 || scaled(forloop) == forloop.get<int64_t>()) continue;
      forloop = scaled(forloop);
      keep(m);
    }
    const Json& ops = kop["block_graph"]["ops"];
    for (size_t b = 0; b < ops.size(); ++b) {
      for (const char* key : {"imap", "omap"}) {
        if (!ops[b].contains(key)) continue;
        for (size_t a = 0; a < 3; ++a)
          for (int d = -1; d < 4; ++d) {
            Json m = doc;
            Json& e = m["ops"][k]["block_graph"]["ops"][b][key][a];
            Json v = d < 0 ? Json(nullptr) : Json(d);
            if (e == v) continue;
            e = v;
            keep(m);
          }
      }
      if (ops[b].contains("fmap"))
        for (int d = -1; d < 4; ++d) {
          Json m = doc;
          Json v = d < 0 ? Json(nullptr) : Json(d);
          if (m["ops"][k]["block_graph"]["ops"][b]["fmap"] == v) continue;
          m["ops"][k]["block_graph"]["ops"][b]["fmap"] = v;
          keep(m);
        }
      // Another op of the same family (same operand and result shapes).
      for (const std::vector<std::string>& family :
           {std::vector<std::string>{"add", "sub", "mul", "div"},
            std::vector<std::string>{"exp", "silu", "sqrt", "square"},
            std::vector<std::string>{"accum_sum_ld", "accum_mean_ld", "accum_max_ld"}})
        if (std::find(family.begin(), family.end(), ops[b]["op"].get<std::string>()) !=
            family.end())
          for (const std::string& other : family) {
            if (other == ops[b]["op"].get<std::string>()) continue;
            Json m = doc;
            m["ops"][k]["block_graph"]["ops"][b]["op"] = other;
            keep(m);
          }
      if (ops[b].contains("scalar")) {
        Json m = doc;
        m["ops"][k]["block_graph"]["ops"][b]["scalar"] = 2 * ops[b]["scalar"].get<double>();
        keep(m);
      }
    }
  }
  return out;
}

// Mutants of μGraphs that the reduction shrinks get the verdict they get on the program's own
// instance (the verify() helper compares the two), and the reduction takes part in many of
// them: a sound reduction must not turn a wrong graph into a right one. Among them, blocks
// that loop over their rows or hold them whole, whose mutants (other loop ranges and grids,
// accumulators concatenating along other dims or summing, …) are checked on two rows.
TEST(ReducedInstances, MutantsGetTheSameVerdictOnBothInstances) {
  std::vector<std::pair<KernelGraph, Json>> cases;
  for (const char* name : {"rmsnorm_small", "gatedmlp_small", "lora_small"}) {
    auto prog = load_graph(std::string("examples/programs/") + name + ".strata");
    auto text = read_text_file(std::string("examples/reference/") + name + ".json");
    ASSERT_TRUE(prog.ok() && text.ok()) << name;
    cases.push_back({*prog, Json::parse(*text)});
  }
  cases.push_back({attention_rows(256), kernel_graph_to_json(attention_rows_fused(256, 8))});
  // Blocks that loop over the rows (with and without a grid split of them) or hold them whole.
  cases.push_back({linear_rows(256), kernel_graph_to_json(linear_looped(256, 1, 16))});
  cases.push_back({linear_rows(256), kernel_graph_to_json(linear_looped(256, 4, 8))});
  cases.push_back({linear_rows(512), kernel_graph_to_json(linear_whole_rows(512))});
  int reduced = 0, rejected_reduced = 0, total = 0;
  // Mutants whose rows a block loops over or holds whole, checked on two of them.
  int rows_by_block = 0, rejected_rows_by_block = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [prog, doc] = cases[k];
    for (const KernelGraph& m : mutants(doc)) {
      if (m.outputs().size() != prog.outputs().size()) continue;
      bool same_interface = true;
      for (size_t o = 0; o < m.outputs().size(); ++o)
        same_interface &= m.tensor(m.outputs()[o]).shape == prog.tensor(prog.outputs()[o]).shape;
      if (!same_interface) continue;
      ++total;
      VerifyResult r = verify(prog, m);
      if (!r.instance.empty()) {
        ++reduced;
        if (!r.equivalent) ++rejected_reduced;
      }
      if (k >= 4 && (r.instance.starts_with("I0.0 256 → 2,") ||
                     r.instance.starts_with("I0.0 512 → 2,"))) {
        ++rows_by_block;
        if (!r.equivalent) ++rejected_rows_by_block;
      }
    }
  }
  EXPECT_GE(total, 60);
  EXPECT_GE(reduced, 50) << total << " mutants, " << rejected_reduced << " rejected";
  EXPECT_GE(rejected_reduced, 25) << total << " mutants, " << reduced << " reduced";
  EXPECT_GE(rows_by_block, 20) << rejected_rows_by_block << " rejected";
  EXPECT_GE(rejected_rows_by_block, 12) << rows_by_block << " mutants";
}

TEST(ReducedInstances, RaggedSplitsKeepTheirTileAndLastPart) {
  // 1000 rows in 16 blocks that mix their rows (harmlessly): tiles of 63, the last of 55.
  // Shrinking keeps both, which needs at least 9 blocks (⌈E′/g′⌉ = 63 only while
  // 63 − 55 < g′).
  KernelGraph prog = attention_rows(1000), cand = attention_rows_fused(1000, 16, kPhi, false, true);
  verify::ProgramClasses pc = verify::independent_classes(prog);
  auto reduced = verify::reduce_instance(prog, pc, cand);
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->description, "I0.0 4 → 2, I0.1 1000 → 559, I2.2 16 → 2");
  EXPECT_EQ(reduced->candidate.op(3).body->grid(), (Dim3{2, 9, 1}));
  // A reduced element of the last tile stands for the original's last tile; one before it
  // for itself. Output [h, row, col] with 16 columns, 2 on the reduced instance.
  auto flat = [](int64_t h, int64_t row, int64_t col, int64_t rows, int64_t cols) {
    return (h * rows + row) * cols + col;
  };
  EXPECT_EQ(verify::original_element(prog, pc, *reduced, 0, flat(1, 558, 1, 559, 2)),
            flat(1, 999, 1, 1000, 16));
  EXPECT_EQ(verify::original_element(prog, pc, *reduced, 0, flat(1, 5, 1, 559, 2)),
            flat(1, 5, 1, 1000, 16));
  VerifyResult r = verify(prog, cand);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_EQ(r.instance, "I0.0 4 → 2, I0.1 1000 → 559, I2.2 16 → 2");
  // A block that computes its rows one by one checks two of them, ragged split or not.
  EXPECT_EQ(verify(prog, attention_rows_fused(1000, 16)).instance,
            "I0.0 4 → 2, I0.1 1000 → 2, I2.2 16 → 2");
}

TEST(ReducedInstances, ProgramsTooLargeForMemoryAreCheckedOnTheirReducedInstance) {
  // 2^31 query rows: the program's own instance needs terabytes; the fused candidate's
  // reduced instance a few kilobytes. A candidate that cannot be reduced is an error.
  const int64_t rows = int64_t{1} << 31;
  KernelGraph prog = attention_rows(rows);
  auto checker = EquivalenceChecker::make(prog, {});
  ASSERT_TRUE(checker.ok()) << checker.error().message;
  auto r = checker->verify(attention_rows_fused(rows, 1 << 24));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->equivalent) << r->detail;
  VerifyOptions full;
  full.reduce_instances = false;
  auto no = EquivalenceChecker::make(prog, full);
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.error().message.find("GB of host memory"), std::string::npos);
}

}  // namespace
}  // namespace strata
