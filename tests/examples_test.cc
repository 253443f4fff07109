// The bundled examples (examples/README.md) against the verifier and the reference interpreter:
// every reference μGraph equals its program; every mutation of a reference μGraph that still
// builds is rejected; the identity program pairs of tests/data/identities are accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"
#include "strata/interp/interpreter.h"
#include "strata/verify/verifier.h"

namespace strata {
namespace {

const std::vector<std::string> kBenchmarks = {"rmsnorm", "gatedmlp", "lora",
                                              "ntrans",  "gqa",      "qknorm"};

KernelGraph load_or_die(const std::string& path) {
  auto g = load_graph(path);
  EXPECT_TRUE(g.ok()) << g.error().message;
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

/// Largest |a − b| relative to the largest |b| over all outputs.
double max_rel_diff(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].data.size(); ++j) {
      diff = std::max(diff, std::fabs(a[i].data[j] - b[i].data[j]));
      scale = std::max(scale, std::fabs(b[i].data[j]));
    }
  return diff / scale;
}

TEST(Examples, ReferenceGraphsMatchTheirProgramsAtSmallShapes) {
  for (const std::string& name : kBenchmarks) {
    SCOPED_TRACE(name);
    KernelGraph prog = load_or_die("examples/programs/" + name + "_small.strata");
    KernelGraph ref = load_or_die("examples/reference/" + name + "_small.json");
    // doubles: the reference interpreter on random inputs
    auto inputs = random_inputs(prog, 7);
    auto a = run_reference(prog, inputs);
    auto b = run_reference(ref, inputs);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LT(max_rel_diff(*b, *a), 1e-9);
    // finite fields: the verifier, with the bound target met
    auto v = verify_equivalent(prog, ref);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
    EXPECT_LE(v->log2_bound, -60.0);
  }
}

// ---- mutations ---------------------------------------------------------------------------

struct Mutation {
  std::string what;
  Json doc;
};

Json dim_json(int d) { return d < 0 ? Json(nullptr) : Json(d); }

/// Every single-field change of a block graph that the rules (docs/mugraph-semantics.md) might
/// still accept: each
/// imap/fmap/omap entry to every other value, each accumulator to every other kind and fmap,
/// each reduction/norm/concat dim to every other dim, and the operands of non-commutative
/// binary ops (matmul, sub, div, concat) swapped.
std::vector<Mutation> mutations_of(const Json& doc) {
  std::vector<Mutation> out;
  const std::vector<std::string> accums = {"accum", "accum_sum_ld", "accum_mean_ld",
                                           "accum_rms_ld"};
  for (size_t k = 0; k < doc["ops"].size(); ++k) {
    const Json& kop = doc["ops"][k];
    if (kop["op"] != "customized") continue;
    const Json& ops = kop["block_graph"]["ops"];
    for (size_t i = 0; i < ops.size(); ++i) {
      const Json& op = ops[i];
      std::string at = "kernel op " + std::to_string(k) + ", block op " + std::to_string(i) +
                       " (" + op["op"].get<std::string>() + ")";
      auto mutate = [&](const std::string& what, auto&& change) {
        Json m = doc;
        change(m["ops"][k]["block_graph"]["ops"][i]);
        out.push_back({at + ": " + what, std::move(m)});
      };
      for (const char* key : {"imap", "omap"}) {
        if (!op.contains(key)) continue;
        for (int axis = 0; axis < 3; ++axis)
          for (int d = -1; d < 4; ++d)
            if (dim_json(d) != op[key][axis])
              mutate(std::string(key) + "[" + std::to_string(axis) + "]=" + std::to_string(d),
                     [&](Json& o) { o[key][axis] = dim_json(d); });
      }
      if (op.contains("fmap"))
        for (int d = -1; d < 4; ++d)
          if (dim_json(d) != op["fmap"])
            mutate("fmap=" + std::to_string(d), [&](Json& o) { o["fmap"] = dim_json(d); });
      std::string kind = op["op"];
      if (std::find(accums.begin(), accums.end(), kind) != accums.end())
        for (const std::string& other : accums)
          if (other != kind) mutate("kind=" + other, [&](Json& o) { o["op"] = other; });
      if (op.contains("dim"))
        for (int d = -1; d < 4; ++d)
          if (d != op["dim"])
            mutate("dim=" + std::to_string(d), [&](Json& o) { o["dim"] = d; });
      if ((kind == "matmul" || kind == "sub" || kind == "div" || kind == "concat") &&
          op["inputs"][0] != op["inputs"][1])
        mutate("operands swapped", [&](Json& o) { std::swap(o["inputs"][0], o["inputs"][1]); });
    }
  }
  return out;
}

// A mutation can leave the function unchanged (an fmap when the forloop range is 1, a fused
// accumulator over a last dim of extent 1, dim −1 naming the same dim): those are equivalent
// rewrites, recognized by the reference interpreter in doubles, and the verifier must accept
// them. Every other mutation that builds must be rejected.
TEST(Examples, EveryMutationOfAReferenceGraphThatBuildsIsRejected) {
  int rejected_total = 0, rewrites_total = 0;
  for (const std::string& name : kBenchmarks) {
    SCOPED_TRACE(name);
    KernelGraph prog = load_or_die("examples/programs/" + name + "_small.strata");
    auto text = read_text_file("examples/reference/" + name + "_small.json");
    ASSERT_TRUE(text.ok());
    auto doc = parse_json_text(*text, name);
    ASSERT_TRUE(doc.ok());
    auto checker = EquivalenceChecker::make(prog, VerifyOptions{});
    ASSERT_TRUE(checker.ok());
    auto inputs = random_inputs(prog, 11);
    auto expected = run_reference(prog, inputs);
    ASSERT_TRUE(expected.ok());
    int rejected = 0;
    for (const Mutation& m : mutations_of(*doc)) {
      auto g = kernel_graph_from_json(m.doc, name + " mutated");
      if (!g.ok()) continue;  // the IR's rules reject it: nothing to verify
      if (g->outputs().size() != prog.outputs().size() ||
          g->tensor(g->outputs()[0]).shape != prog.tensor(prog.outputs()[0]).shape)
        continue;  // a different interface is rejected by the verifier as bad input
      auto got = run_reference(*g, inputs);
      ASSERT_TRUE(got.ok()) << m.what;
      bool same_function = max_rel_diff(*got, *expected) < 1e-9;
      auto v = checker->verify(*g);
      ASSERT_TRUE(v.ok()) << m.what << ": " << v.error().message;
      if (same_function) {
        EXPECT_TRUE(v->equivalent) << name << ": equivalent rewrite rejected: " << m.what;
        ++rewrites_total;
      } else {
        EXPECT_FALSE(v->equivalent) << name << ": mutation accepted: " << m.what;
        ++rejected;
      }
    }
    EXPECT_GT(rejected, 0) << "no mutation of " << name << " changes its function";
    rejected_total += rejected;
  }
  std::printf("rejected %d mutations; accepted %d equivalent rewrites\n", rejected_total,
              rewrites_total);
}

TEST(Examples, IdentityPairsAreAccepted) {
  std::set<std::string> stems;
  for (const auto& e : std::filesystem::directory_iterator("tests/data/identities")) {
    std::string f = e.path().filename().string();
    if (f.size() > 9 && f.compare(f.size() - 9, 9, "_a.strata") == 0)
      stems.insert(f.substr(0, f.size() - 9));
  }
  ASSERT_GE(stems.size(), 10u);
  for (const std::string& stem : stems) {
    SCOPED_TRACE(stem);
    KernelGraph a = load_or_die("tests/data/identities/" + stem + "_a.strata");
    KernelGraph b = load_or_die("tests/data/identities/" + stem + "_b.strata");
    auto v = verify_equivalent(a, b);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->equivalent) << v->detail;
    EXPECT_LE(v->log2_bound, -60.0);
    auto inputs = random_inputs(a, 3);
    auto ra = run_reference(a, inputs);
    auto rb = run_reference(b, inputs);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_LT(max_rel_diff(*rb, *ra), 1e-9);
  }
}

}  // namespace
}  // namespace strata
