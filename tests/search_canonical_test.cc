// Tests of the search's canonicalization phase (docs/search.md, "Canonicalization"): the
// enumeration searches the program's canonical form, every candidate is verified against the
// program as given (so a wrong rewrite is caught), and the phase is part of the cache key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "strata/frontend/program_parser.h"
#include "strata/opt/canonicalize.h"
#include "strata/search/search.h"
#include "strata/search/search_cache.h"
#include "strata/verify/verifier.h"
#include "support/parse.h"
#include "support/search_config.h"

namespace strata {
namespace {

using testing::parse;

SearchConfig config(const std::string& name) {
  return testing::search_config("strata-search-canonical-test", name);
}

SearchResult search(const KernelGraph& p, const SearchConfig& c) {
  auto r = superoptimize(p, c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : SearchResult{};
}

/// The op kinds of every kernel and block graph of g, in order (extents ignored).
std::string structure(const KernelGraph& g) {
  std::string s;
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    s += op_name(op.kind);
    if (op.body) {
      s += "[";
      for (const BlockOp& b : op.body->ops()) s += std::string(op_name(b.kind)) + ",";
      s += "]";
    }
    s += ";";
  }
  return s;
}

bool proved(const Candidate& c) {
  return !c.is_program && c.verification.equivalent && c.verification.log2_bound <= -60;
}

const std::string kWrittenOutRmsNorm =
    "input X: f16[8, 4096]\ninput G: f16[4096]\ninput W: f16[4096, 1024]\n"
    "N = div(X, sqrt(add_scalar(mean(square(X), dim=1), 1e-5)))\n"
    "O = matmul(mul(N, G), W)\noutput O\n";

TEST(SearchCanonical, WrittenOutRmsNormFindsTheStructureOfRmsNorm) {
  const KernelGraph written = parse(kWrittenOutRmsNorm);
  const KernelGraph reference = parse(
      "input X: f16[8, 4096]\ninput G: f16[4096]\ninput W: f16[4096, 1024]\n"
      "O = matmul(mul(rms_norm(X, eps=1e-5), G), W)\noutput O\n");
  const SearchResult a = search(written, config("written").with_top_k(2));
  const SearchResult b = search(reference, config("reference").with_top_k(2));
  ASSERT_FALSE(a.ranked.empty());
  ASSERT_FALSE(b.ranked.empty());
  EXPECT_EQ(a.stats.rewrites_by_rule, (std::map<std::string, int64_t>{{"rms_norm_div", 1}}));
  EXPECT_TRUE(b.stats.rewrites_by_rule.empty());
  // The same tree, the same winner's structure (one customized kernel), proved against the
  // program as written; the program entry is the written-out program itself.
  EXPECT_EQ(a.stats.states, b.stats.states);
  EXPECT_EQ(a.stats.candidates_found, b.stats.candidates_found);
  EXPECT_TRUE(proved(a.ranked[0]));
  EXPECT_EQ(structure(a.ranked[0].graph), structure(b.ranked[0].graph));
  EXPECT_EQ(a.ranked[0].graph.num_customized(), 1);
  EXPECT_TRUE(a.ranked[a.program_index()].graph.structurally_equal(written));
  auto v = verify_equivalent(written, a.ranked[0].graph);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->equivalent);
  // Without the phase the written-out program is searched as it is (a much larger tree: the
  // state limit stops it).
  const SearchResult off =
      search(written, config("off").with_top_k(1).with_canonicalize(false).with_max_states(2000));
  EXPECT_TRUE(off.stats.rewrites_by_rule.empty());
  EXPECT_EQ(off.stats.stop, StopReason::StateLimit);
}

TEST(SearchCanonical, CapturedRsqrtFormFusesIntoOneKernel) {
  // The capture's form: x · (c / sqrt(mean(x²) + eps)) with c an input (bound to 1), gain first.
  const KernelGraph p = parse(
      "input X: f16[8, 1024]\ninput G: f16[1024]\ninput W: f16[1024, 512]\ninput C: f16[1]\n"
      "N = mul(X, div(C, sqrt(add_scalar(mean(square(X), dim=-1), 1e-5))))\n"
      "O = matmul(mul(G, N), W)\noutput O\n");
  const SearchResult r = search(p, config("capture").with_top_k(1));
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.stats.rewrites_by_rule, (std::map<std::string, int64_t>{{"rms_norm_mul", 1}}));
  EXPECT_TRUE(proved(r.ranked[0]));
  EXPECT_EQ(r.ranked[0].graph.num_customized(), 1);
  EXPECT_EQ(r.ranked[0].graph.ops().size(), 5u);  // four inputs and one kernel
}

TEST(SearchCanonical, FusedQkvProjectionGetsFusedGraphsProvedAgainstTheProgram) {
  const KernelGraph p = parse(
      "input X: f16[8, 2048]\ninput W: f16[2048, 3072]\nQKV = matmul(X, W)\n"
      "Q = slice(QKV, 1, 0, 2048)\nK = slice(QKV, 1, 2048, 2560)\nV = slice(QKV, 1, 2560, 3072)\n"
      "output Q, K, V\n");
  const SearchResult r = search(p, config("qkv").with_top_k(2));
  EXPECT_EQ(r.stats.rewrites_by_rule, (std::map<std::string, int64_t>{{"slice_of_matmul", 3}}));
  const Candidate& program = r.ranked[r.program_index()];
  ASSERT_TRUE(program.graph.structurally_equal(p));
  int fused = 0;
  for (const Candidate& c : r.ranked) {
    if (c.is_program) continue;
    EXPECT_TRUE(proved(c));
    if (c.graph.num_customized() >= 1) ++fused;
    auto v = verify_equivalent(p, c.graph);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
  EXPECT_GE(fused, 1);
}

TEST(SearchCanonical, AWrongRewriteIsCaughtByVerification) {
  const KernelGraph p = parse(
      "input X: f16[8, 256]\ninput W: f16[256, 128]\n"
      "O = matmul(div(X, sqrt(add_scalar(mean(square(X), dim=1), 1e-5))), W)\noutput O\n");
  // A canonicalization with the wrong eps: every graph found from it differs from the program.
  const SearchResult wrong =
      search(p, config("wrong").with_top_k(2).with_canonicalizer([](const KernelGraph&) {
        return parse_program(
            "input X: f16[8, 256]\ninput W: f16[256, 128]\n"
            "O = matmul(rms_norm(X, eps=1e-3), W)\noutput O\n",
            "wrong.strata");
      }));
  EXPECT_EQ(wrong.stats.rewrites_by_rule, (std::map<std::string, int64_t>{{"custom", 1}}));
  EXPECT_GT(wrong.stats.candidates_found, 0);
  EXPECT_GT(wrong.stats.candidates_screened, 0);
  // Only the program itself, and its library forms (docs/search.md, "Library forms"): those
  // are built from the program as given, region by region (the hook's program does not have a
  // region's interface, so the region is taken as written), and proved against it.
  int programs = 0;
  for (const Candidate& c : wrong.ranked) {
    if (c.is_program) {
      ++programs;
      EXPECT_TRUE(c.graph.structurally_equal(p));
      continue;
    }
    EXPECT_EQ(c.derived, "library_form");
    auto v = verify_equivalent(p, c.graph);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->equivalent) << v->detail;
  }
  EXPECT_EQ(programs, 1);
  // The same hook with the right rewrite finds verified graphs.
  const SearchResult right =
      search(p, config("right").with_top_k(2).with_canonicalizer([](const KernelGraph& g) {
        auto c = canonicalize_program(g);
        return c.ok() ? Result<KernelGraph>(std::move(c->program)) : Result<KernelGraph>(c.error());
      }));
  EXPECT_TRUE(proved(right.ranked[0]));
  // A canonical form with another interface is refused: the program is searched as given.
  const SearchResult other =
      search(p, config("other").with_top_k(1).with_canonicalizer([](const KernelGraph&) {
        return parse_program("input X: f16[8, 256]\nO = rms_norm(X)\noutput O\n", "o.strata");
      }));
  EXPECT_TRUE(other.stats.rewrites_by_rule.empty());
  ASSERT_FALSE(other.notes.empty());
  EXPECT_NE(other.notes[0].find("searched as given"), std::string::npos) << other.notes[0];
}

TEST(SearchCanonical, UnreadInputsAreSearched) {
  // No rule leaves an input unread, but the search takes such programs anyway: the unread
  // input is part of every candidate's interface (inputs are matched by position).
  const KernelGraph p = parse(
      "input X: f16[8, 256]\ninput U: f16[1]\ninput W: f16[256, 128]\n"
      "O = matmul(rms_norm(X), W)\noutput O\n");
  const SearchResult r = search(p, config("unread").with_top_k(1));
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_TRUE(proved(r.ranked[0]));
  EXPECT_EQ(r.ranked[0].graph.inputs().size(), 3u);
}

TEST(SearchCanonical, CacheKeyDependsOnTheCanonicalization) {
  const KernelGraph p = parse(kWrittenOutRmsNorm);
  SearchConfig c;
  c.max_block_ops = 11;
  const std::string on = search_cache_key(p, c, "sources");
  c.canonicalize = false;
  EXPECT_NE(search_cache_key(p, c, "sources"), on);
  // The rules' sources are in the source hash (src/opt is among the hashed directories).
  c.canonicalize = true;
  EXPECT_NE(search_cache_key(p, c, "other sources"), on);
}

}  // namespace
}  // namespace strata
