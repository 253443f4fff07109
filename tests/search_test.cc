// Tests of the search (docs/search.md): the graphs of docs/mugraph-semantics.md §6 are rediscovered
// from the
// naive programs (a `program => expected structure` table at small shapes), the answer does
// not depend on the thread count, a stopped search resumes to the same answer, limits give
// their stop reasons, and programs the search cannot handle are refused with a message.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>

#include "strata/graph_io.h"
#include "strata/graph_json.h"
#include "strata/search.h"

namespace strata {
namespace {

KernelGraph load(const std::string& path) {
  auto g = load_graph(path);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

/// A fresh cache directory per test.
std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("strata-search-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

SearchConfig base_config(const std::string& name) {
  return SearchConfig{}.with_threads(2).with_quiet(true).with_cache(false).with_cache_dir(
      temp_dir(name));
}

// ---- structure predicates -------------------------------------------------------------

std::vector<const KernelOp*> customized_ops(const KernelGraph& g) {
  std::vector<const KernelOp*> out;
  for (const KernelOp& op : g.ops())
    if (op.kind == OpKind::Customized) out.push_back(&op);
  return out;
}

int predefined_ops(const KernelGraph& g) {
  int n = 0;
  for (const KernelOp& op : g.ops())
    if (op.kind != OpKind::Input && op.kind != OpKind::Customized) ++n;
  return n;
}

/// How many ops of `kind` a block graph has, counting the steps of thread graphs.
int count_ops(const BlockGraph& b, OpKind kind) {
  int n = 0;
  for (const BlockOp& op : b.ops()) {
    if (op.kind == kind) ++n;
    for (const ThreadStep& s : op.chain)
      if (s.kind == kind) ++n;
  }
  return n;
}

/// Whether an elementwise `kind` runs after the for-loop (alone or inside a thread graph).
bool post_loop(const BlockGraph& b, OpKind kind) {
  for (const BlockOp& op : b.ops()) {
    if (op.output < 0 || b.tensor(op.output).stage != Stage::Post) continue;
    if (op.kind == kind) return true;
    for (const ThreadStep& s : op.chain)
      if (s.kind == kind) return true;
  }
  return false;
}

bool one_kernel(const KernelGraph& g) {
  return customized_ops(g).size() == 1 && predefined_ops(g) == 0;
}

bool rmsnorm_reference(const KernelGraph& g) {
  if (!one_kernel(g)) return false;
  const BlockGraph& b = *customized_ops(g)[0]->body;
  return b.forloop() > 1 && count_ops(b, OpKind::Matmul) == 1 &&
         count_ops(b, OpKind::AccumSum) == 1 && count_ops(b, OpKind::AccumRmsLd) == 1 &&
         post_loop(b, OpKind::Div);
}

bool gatedmlp_reference(const KernelGraph& g) {
  if (!one_kernel(g)) return false;
  const BlockGraph& b = *customized_ops(g)[0]->body;
  return b.forloop() > 1 && count_ops(b, OpKind::Matmul) == 2 &&
         count_ops(b, OpKind::AccumSum) == 2 && post_loop(b, OpKind::Silu) &&
         post_loop(b, OpKind::Mul);
}

bool lora_reference(const KernelGraph& g) {
  if (!one_kernel(g)) return false;
  const BlockGraph& b = *customized_ops(g)[0]->body;
  return b.forloop() == 1 && count_ops(b, OpKind::Concat) == 2 &&
         count_ops(b, OpKind::Matmul) == 2 && b.num_inputs() == 4;
}

bool ntrans_reference(const KernelGraph& g) {
  if (!one_kernel(g)) return false;
  const BlockGraph& b = *customized_ops(g)[0]->body;
  return b.forloop() == 1 && count_ops(b, OpKind::RmsNorm) == 2;
}

/// FlashDecoding: kernel 1 splits the KV sequence (K's dim 2) across blocks, loops over it
/// and saves two partial results; kernel 2 reads both and loops over the splits.
bool flash_decoding(const KernelGraph& g, int norms) {
  auto cs = customized_ops(g);
  if (cs.size() != 2) return false;
  const BlockGraph &k1 = *cs[0]->body, &k2 = *cs[1]->body;
  const BlockOp& k_iter = k1.op(k1.input_op(1));  // inputs Q, K, V
  bool kv_split = false;
  for (int a = 0; a < 3; ++a) kv_split |= k_iter.attrs.imap[a] == 2;
  std::vector<int> k2_inputs = cs[1]->inputs;
  bool reads_partials = true;
  for (int t : cs[0]->outputs) {
    bool read = std::find(k2_inputs.begin(), k2_inputs.end(), t) != k2_inputs.end();
    // the sum of exps may be added up by a predefined sum first
    for (const KernelOp& op : g.ops())
      if (op.kind == OpKind::Sum && op.inputs[0] == t &&
          std::find(k2_inputs.begin(), k2_inputs.end(), op.outputs[0]) != k2_inputs.end())
        read = true;
    reads_partials &= read;
  }
  return cs[0]->inputs.size() == 3 && kv_split && k1.forloop() > 1 && k1.num_outputs() == 2 &&
         count_ops(k1, OpKind::Exp) == 1 && count_ops(k1, OpKind::RmsNorm) == norms &&
         reads_partials && k2.forloop() > 1;
}

struct Discovery {
  std::string bench;
  std::function<bool(const KernelGraph&)> expected;
};

class SearchDiscovers : public ::testing::TestWithParam<Discovery> {};

TEST_P(SearchDiscovers, ReferenceStructureFromTheNaiveProgram) {
  const Discovery& d = GetParam();
  KernelGraph program = load("examples/programs/" + d.bench + "_small.strata");
  KernelGraph reference = load("examples/reference/" + d.bench + "_small.json");
  std::mutex mu;
  int matching = 0;
  SearchConfig config = base_config(d.bench).with_top_k(4).with_observer([&](const KernelGraph& g) {
    if (d.expected(g)) {
      std::lock_guard<std::mutex> lock(mu);
      ++matching;
    }
  });
  auto r = superoptimize(program, config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  EXPECT_GT(matching, 0) << "no candidate with the structure of docs/mugraph-semantics.md §6";
  // The reference graph itself is recognized by the predicate (it tests the predicate).
  EXPECT_TRUE(d.expected(reference));
  // The answer: verified, never slower than the program, at least as fast as the reference.
  ASSERT_GE(r->ranked.size(), 2u);
  const Candidate& best = r->ranked[0];
  EXPECT_FALSE(best.is_program);
  EXPECT_TRUE(best.verification.equivalent);
  EXPECT_LE(best.verification.log2_bound, -60.0);
  auto target = Target::by_name("h100");
  ASSERT_TRUE(target.ok());
  EXPECT_LE(best.cost.predicted_us, estimate_cost(reference, *target).predicted_us + 1e-9);
  int prog = r->program_index();
  ASSERT_GE(prog, 0);
  EXPECT_LE(best.cost.predicted_us, r->ranked[prog].cost.predicted_us);
  for (size_t i = 1; i < r->ranked.size(); ++i)
    EXPECT_LE(r->ranked[i - 1].cost.predicted_us, r->ranked[i].cost.predicted_us);
}

INSTANTIATE_TEST_SUITE_P(
    Benchmarks, SearchDiscovers,
    ::testing::Values(Discovery{"rmsnorm", rmsnorm_reference},
                      Discovery{"gatedmlp", gatedmlp_reference}, Discovery{"lora", lora_reference},
                      Discovery{"ntrans", ntrans_reference},
                      Discovery{"gqa", [](const KernelGraph& g) { return flash_decoding(g, 0); }},
                      Discovery{"qknorm",
                                [](const KernelGraph& g) { return flash_decoding(g, 2); }}),
    [](const ::testing::TestParamInfo<Discovery>& p) { return p.param.bench; });

// ---- verification order ----------------------------------------------------------------

// The verified set mixes the model's cheapest graphs with a round robin over structures. At
// RMSNorm b = 1 the round robin alone spent most of a top 12 on poor three-kernel structures
// and never verified the 96-block fused kernel (the fastest on an H200,
// bench/results/h200-2026-11-22-top16.md).
TEST(Search, VerifiesTheCheapestGraphsAndSeveralStructures) {
  KernelGraph program = load("examples/programs/rmsnorm_b1.strata");
  auto r = superoptimize(program, base_config("order").with_top_k(12));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->ranked.size(), 13u);  // 12 verified graphs and the program
  bool fused_96 = false;
  std::set<int> kernel_counts;
  for (const Candidate& c : r->ranked) {
    if (c.is_program) continue;
    std::vector<const KernelOp*> k = customized_ops(c.graph);
    kernel_counts.insert(static_cast<int>(c.graph.ops().size() - c.graph.inputs().size()));
    fused_96 = fused_96 || (k.size() == 1 && predefined_ops(c.graph) == 0 &&
                            k[0]->body->grid().x * k[0]->body->grid().y *
                                    k[0]->body->grid().z == 96);
  }
  EXPECT_TRUE(fused_96) << "no single 96-block kernel among the verified graphs";
  EXPECT_GE(kernel_counts.size(), 2u) << "the verified graphs span one structure only";
}

// ---- determinism, resume, limits --------------------------------------------------------

std::vector<std::string> ranked_json(const SearchResult& r) {
  std::vector<std::string> out;
  for (const Candidate& c : r.ranked) out.push_back(kernel_graph_to_json(c.graph).dump());
  return out;
}

TEST(Search, SameResultForAnyThreadCount) {
  KernelGraph program = load("examples/programs/lora_small.strata");
  auto one = superoptimize(program, base_config("threads1").with_threads(1));
  auto two = superoptimize(program, base_config("threads2").with_threads(2));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(ranked_json(*one), ranked_json(*two));
  EXPECT_EQ(one->stats.states, two->stats.states);
  EXPECT_EQ(one->stats.prunes_by_rule, two->stats.prunes_by_rule);
  EXPECT_EQ(one->stats.candidates_found, two->stats.candidates_found);
  EXPECT_GT(one->stats.states, 1000);
}

TEST(Search, ResumeReachesTheUninterruptedResult) {
  KernelGraph program = load("examples/programs/gatedmlp_small.strata");
  auto full = superoptimize(program, base_config("full"));
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->stats.stop, StopReason::Exhausted);
  ASSERT_GT(full->stats.states, 2000);

  std::string dir = temp_dir("resume");
  SearchConfig limited = base_config("resume").with_cache_dir(dir).with_max_states(500);
  auto first = superoptimize(program, limited);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->stats.stop, StopReason::StateLimit);
  EXPECT_LT(first->stats.tasks_done, first->stats.tasks_total);
  std::string ckpt = dir + "/" + first->cache_key + ".ckpt.json";
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  // The interrupted run still answers with what it found, program included.
  EXPECT_GE(first->program_index(), 0);

  auto resumed = superoptimize(program, limited.with_max_states(0).with_resume(true));
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed->stats.stop, StopReason::Exhausted);
  EXPECT_EQ(resumed->stats.tasks_done, resumed->stats.tasks_total);
  EXPECT_EQ(ranked_json(*resumed), ranked_json(*full));
  EXPECT_EQ(resumed->stats.states, full->stats.states);  // finished tasks counted once
  EXPECT_FALSE(std::filesystem::exists(ckpt));           // removed once finished
}

TEST(Search, ResumeWithoutCheckpointStartsOver) {
  KernelGraph program = load("examples/programs/rmsnorm_small.strata");
  auto r = superoptimize(program, base_config("nockpt").with_resume(true));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.stop, StopReason::Exhausted);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes[0].find("no checkpoint"), std::string::npos) << r->notes[0];
}

TEST(Search, LimitsGiveTheirStopReasons) {
  KernelGraph program = load("examples/programs/qknorm_small.strata");
  auto timed = superoptimize(program, base_config("time").with_time_limit(0.2));
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(timed->stats.stop, StopReason::TimeLimit);
  EXPECT_LT(timed->stats.tasks_done, timed->stats.tasks_total);

  auto states = superoptimize(program, base_config("states").with_max_states(100));
  ASSERT_TRUE(states.ok());
  EXPECT_EQ(states->stats.stop, StopReason::StateLimit);
  EXPECT_LT(states->stats.states, 100000);

  std::atomic<bool> interrupted{true};
  auto stopped = superoptimize(program, base_config("sigint").with_interrupt(&interrupted));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->stats.stop, StopReason::Interrupted);
  // Every stopped run keeps the program as its fallback answer.
  for (const auto* r : {&*timed, &*states, &*stopped}) EXPECT_GE(r->program_index(), 0);
}

TEST(Search, SmallLimitsRestrictTheAnswer) {
  KernelGraph program = load("examples/programs/rmsnorm_small.strata");
  // With room for 5 ops per block graph (2 inputs + 3), the fused reference (2 inputs + 4
  // ops) cannot be built; with 6 it can.
  int found5 = 0, found6 = 0;
  std::mutex mu;
  auto count_into = [&](int& n) {
    return [&mu, &n](const KernelGraph& g) {
      std::lock_guard<std::mutex> lock(mu);
      if (rmsnorm_reference(g)) ++n;
    };
  };
  auto r5 = superoptimize(
      program, base_config("ops5").with_max_block_ops(5).with_observer(count_into(found5)));
  auto r6 = superoptimize(
      program, base_config("ops6").with_max_block_ops(6).with_observer(count_into(found6)));
  ASSERT_TRUE(r5.ok() && r6.ok());
  EXPECT_EQ(found5, 0);
  EXPECT_GT(found6, 0);
  EXPECT_LT(r5->stats.states, r6->stats.states);
}

TEST(Search, AbstractPruningOffExploresMore) {
  KernelGraph program = load("examples/programs/rmsnorm_small.strata");
  SearchConfig config = base_config("nopruning").with_max_kernel_ops(1).with_max_block_ops(6);
  auto on = superoptimize(program, config);
  auto off = superoptimize(program, SearchConfig(config).with_abstract_pruning(false));
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_GT(off->stats.states, 2 * on->stats.states);
  EXPECT_EQ(off->stats.prunes_by_rule.count("abstract_expr"), 0u);
  EXPECT_GT(on->stats.prunes_by_rule.at("abstract_expr"), 0);
  // Both find the same best graph: pruning keeps every prefix of it (Theorem 1).
  ASSERT_FALSE(on->ranked.empty());
  ASSERT_FALSE(off->ranked.empty());
  EXPECT_EQ(kernel_graph_to_json(on->ranked[0].graph).dump(),
            kernel_graph_to_json(off->ranked[0].graph).dump());
}

// accum(sum(E, last dim)) over a loop of E's last dim is accum_sum_ld(E), which the code
// generator computes from the matmul chain's registers; the unfused twin measured 2–4× slower
// on an H200. The search keeps only the fused form.
TEST(Search, AccumulatesLastDimSumsFused) {
  KernelGraph program = load("examples/programs/gqa_small.strata");
  std::mutex mu;
  int unfused = 0, fused = 0;
  auto r = superoptimize(program, base_config("unfused").with_top_k(4).with_observer(
                                      [&](const KernelGraph& g) {
                                        for (const KernelOp* c : customized_ops(g)) {
                                          const BlockGraph& b = *c->body;
                                          std::lock_guard<std::mutex> lock(mu);
                                          fused += count_ops(b, OpKind::AccumSumLd);
                                          for (const BlockOp& op : b.ops()) {
                                            if (op.kind != OpKind::AccumSum) continue;
                                            const BlockOp& p = b.op(b.tensor(op.inputs[0]).producer);
                                            if (p.kind == OpKind::Sum && b.forloop() > 1) ++unfused;
                                          }
                                        }
                                      }));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->stats.prunes_by_rule.at("unfused_reduction"), 0);
  EXPECT_EQ(unfused, 0);
  EXPECT_GT(fused, 0);
}

// ---- programs the search refuses ----------------------------------------------------------

std::string error_of(const KernelGraph& g, SearchConfig config = base_config("errors")) {
  auto r = superoptimize(g, config);
  return r.ok() ? std::string("(no error)") : r.error().message;
}

TEST(Search, UnsupportedProgramsGetAClearMessage) {
  {
    KernelGraph g;
    int x = *g.add_input("X", Shape{4, 64}, DType::f16);
    ASSERT_TRUE(g.add_op(OpKind::Exp, {x}, {}, "Y").ok());
    EXPECT_NE(error_of(g).find("no outputs"), std::string::npos) << error_of(g);
  }
  {
    KernelGraph g;
    int x = *g.add_input("X", Shape{4, 64}, DType::f16);
    ASSERT_TRUE(g.mark_output(x).ok());
    EXPECT_NE(error_of(g).find("is a program input"), std::string::npos) << error_of(g);
  }
  {
    KernelGraph g;
    int x = *g.add_input("X", Shape{4, 64}, DType::f16);
    auto body = *BlockGraph::make({1, 1, 1}, 128, 1);
    int tx = *body.add_input(Shape{4, 64}, kAllReplicated, kReplicate);
    int e = *body.add_op(OpKind::Exp, {tx});
    ASSERT_TRUE(body.add_output(*body.add_op(OpKind::AccumSum, {e}), kAllReplicated).ok());
    ASSERT_TRUE(g.mark_output((*g.add_customized({x}, std::move(body)))[0]).ok());
    EXPECT_NE(error_of(g).find("customized"), std::string::npos) << error_of(g);
  }
  {
    // A prime-sized tensor far larger than shared memory: no tile fits, nothing splits.
    KernelGraph g;
    int x = *g.add_input("X", Shape{7919, 7919}, DType::f16);
    ASSERT_TRUE(g.mark_output(*g.add_op(OpKind::Exp, {x}, {}, "Y")).ok());
    std::string msg = error_of(g);
    EXPECT_NE(msg.find("no block-graph configuration fits"), std::string::npos) << msg;
  }
  {
    KernelGraph g = load("examples/programs/rmsnorm_small.strata");
    std::string msg = error_of(g, base_config("target").with_target("tpu"));
    EXPECT_NE(msg.find("h100"), std::string::npos) << msg;  // lists the valid targets
    msg = error_of(g, base_config("limits").with_max_block_ops(1));
    EXPECT_NE(msg.find("max block ops"), std::string::npos) << msg;
  }
}

TEST(Search, CandidatesWithoutABoundAreNotReported) {
  // Σ_k y_k / (e^x_k + e^z_k): 64 different denominators; no candidate can be proved (the
  // verifier answers "unknown"), so none is reported as verified, and a note says why.
  KernelGraph g;
  int x = *g.add_input("X", Shape{2, 64}, DType::f16);
  int y = *g.add_input("Y", Shape{2, 64}, DType::f16);
  int z = *g.add_input("Z", Shape{2, 64}, DType::f16);
  int d = *g.add_op(OpKind::Add, {*g.add_op(OpKind::Exp, {x}), *g.add_op(OpKind::Exp, {z})});
  OpAttrs rows;
  rows.dim = 1;
  ASSERT_TRUE(g.mark_output(*g.add_op(OpKind::Sum, {*g.add_op(OpKind::Div, {y, d})}, rows)).ok());
  auto r = superoptimize(g, base_config("unproved"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->stats.candidates_verified, 0);
  ASSERT_EQ(r->ranked.size(), 1u);  // the program alone
  EXPECT_TRUE(r->ranked[0].is_program);
  bool noted = false;
  for (const std::string& n : r->notes)
    noted |= n.find("could not be proved equivalent") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace strata
