// Tests of the launch plan (include/strata/opt/launch_streams.h): streams and events of
// hand-made launch lists (a chain, QKV's three products, a diamond, a barrier, write-after-read),
// random launch lists checked against the plan's contract, the checker itself on broken plans,
// the plans of the suite's kept searches, and emitted sources with side streams: their text and
// runs on the CPU emulator, whose streams run each queue as late as the events allow (and a
// probe of those emulated streams with missing waits and joins).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"
#include "strata/opt/launch_streams.h"
#include "strata/frontend/graph_loader.h"
#include "search/library_form.h"
#include "support/emulation_check.h"
#include "support/library_form_programs.h"
#include "support/parse.h"

namespace strata::testing {
namespace {

LaunchAccess access(std::vector<int> reads, std::vector<int> writes, bool barrier = false) {
  return LaunchAccess{std::move(reads), std::move(writes), barrier};
}

TEST(LaunchStreams, ChainGetsNoSideStreamsNorEvents) {
  std::vector<LaunchAccess> chain;
  for (int i = 0; i < 6; ++i) chain.push_back(access({i}, {i + 1}));
  const LaunchStreamPlan p = plan_launch_streams(chain, 3);
  EXPECT_EQ(p.side_streams, 0);
  EXPECT_EQ(p.events, 0);
  EXPECT_EQ(p.entry_event, -1);
  EXPECT_TRUE(p.joins.empty());
  for (size_t j = 0; j < chain.size(); ++j) {
    EXPECT_EQ(p.stream[j], 0);
    EXPECT_TRUE(p.waits[j].empty());
    EXPECT_EQ(p.records[j], -1);
  }
  EXPECT_EQ(check_launch_streams(chain, p), "");
}

TEST(LaunchStreams, QkvProductsRunOnTwoSideStreamsJoinedAtTheEnd) {
  // Q = X·Wq, K = X·Wk, V = X·Wv: storages X 0, Wq 1, Wk 2, Wv 3, Q 4, K 5, V 6.
  const std::vector<LaunchAccess> qkv = {access({0, 1}, {4}), access({0, 2}, {5}),
                                         access({0, 3}, {6})};
  const LaunchStreamPlan p = plan_launch_streams(qkv, 3);
  EXPECT_EQ(p.side_streams, 2);
  EXPECT_EQ(p.stream, (std::vector<int>{0, 1, 2}));
  // The side streams fork from the entry and are joined after their launches.
  EXPECT_EQ(p.entry_event, 0);
  EXPECT_TRUE(p.waits[0].empty());
  EXPECT_EQ(p.waits[1], std::vector<int>{0});
  EXPECT_EQ(p.waits[2], std::vector<int>{0});
  EXPECT_EQ(p.records, (std::vector<int>{-1, 1, 2}));
  EXPECT_EQ(p.joins, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.events, 3);
  EXPECT_EQ(check_launch_streams(qkv, p), "");
  // One side stream at most: V follows Q, whose stream's last launch is the earliest.
  const LaunchStreamPlan one = plan_launch_streams(qkv, 1);
  EXPECT_EQ(one.side_streams, 1);
  EXPECT_EQ(one.stream, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(one.joins.size(), 1u);
  EXPECT_EQ(check_launch_streams(qkv, one), "");
  // Off: everything on the caller's stream.
  const LaunchStreamPlan off = plan_launch_streams(qkv, 0);
  EXPECT_EQ(off.side_streams, 0);
  EXPECT_EQ(off.events, 0);
  EXPECT_EQ(check_launch_streams(qkv, off), "");
}

TEST(LaunchStreams, DiamondWaitsOnlyWhereStreamsCross) {
  // A → B, A → C, (B, C) → D.
  const std::vector<LaunchAccess> d = {access({0}, {1}), access({1}, {2}), access({1}, {3}),
                                       access({2, 3}, {4})};
  const LaunchStreamPlan p = plan_launch_streams(d, 3);
  EXPECT_EQ(p.side_streams, 1);
  EXPECT_EQ(p.stream, (std::vector<int>{0, 0, 1, 0}));
  // C waits on A's event (which also orders it after the entry: no entry event), D on C's.
  EXPECT_EQ(p.entry_event, -1);
  EXPECT_EQ(p.records, (std::vector<int>{0, -1, 1, -1}));
  EXPECT_EQ(p.waits[2], std::vector<int>{0});
  EXPECT_EQ(p.waits[3], std::vector<int>{1});
  EXPECT_TRUE(p.joins.empty());  // D on stream 0 already follows C
  EXPECT_EQ(check_launch_streams(d, p), "");
}

TEST(LaunchStreams, WritesAfterReadsAndBarriersOrderLaunches) {
  // Launch 1 overwrites what launch 0 reads; launch 2 is independent of both.
  const std::vector<LaunchAccess> war = {access({0}, {1}), access({2}, {0}), access({3}, {4})};
  const LaunchStreamPlan p = plan_launch_streams(war, 3);
  EXPECT_EQ(p.stream[0], p.stream[1]);
  EXPECT_NE(p.stream[2], p.stream[0]);
  EXPECT_EQ(check_launch_streams(war, p), "");
  // An all_reduce between independent launches: on stream 0, after all, before all.
  const std::vector<LaunchAccess> b = {access({0}, {1}), access({2}, {3}),
                                       access({1}, {5}, true), access({6}, {7}),
                                       access({8}, {9})};
  const LaunchStreamPlan q = plan_launch_streams(b, 3);
  EXPECT_EQ(q.stream[2], 0);
  EXPECT_EQ(q.stream[1], 1);
  EXPECT_EQ(q.waits[2].size(), 1u);  // the side stream's launch 1
  EXPECT_EQ(check_launch_streams(b, q), "");
}

TEST(LaunchStreams, CheckerFindsMissingAndRedundantWaits) {
  const std::vector<LaunchAccess> qkv = {access({0, 1}, {4}), access({0, 2}, {5}),
                                         access({0, 3}, {6}), access({4, 5, 6}, {7})};
  const LaunchStreamPlan p = plan_launch_streams(qkv, 3);
  ASSERT_EQ(check_launch_streams(qkv, p), "");
  LaunchStreamPlan no_fork = p;
  no_fork.waits[1].clear();
  EXPECT_NE(check_launch_streams(qkv, no_fork).find("not ordered after"), std::string::npos);
  LaunchStreamPlan no_join = p;
  no_join.waits[3].clear();
  EXPECT_NE(check_launch_streams(qkv, no_join), "");
  LaunchStreamPlan twice = p;
  twice.waits[3].push_back(twice.waits[3].front());
  EXPECT_NE(check_launch_streams(qkv, twice).find("redundant"), std::string::npos);
  LaunchStreamPlan early = p;
  early.waits[0].push_back(early.records[2]);
  EXPECT_NE(check_launch_streams(qkv, early).find("before it is recorded"), std::string::npos);
}

// Random launch lists (storages drawn from a small pool, so that reads meet writes) under every
// cap: each plan meets the contract.
TEST(LaunchStreams, RandomLaunchListsMeetTheContract) {
  std::mt19937 rng(7);
  int with_side = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 14), pool = 2 + static_cast<int>(rng() % 20);
    std::vector<LaunchAccess> ls;
    for (int j = 0; j < n; ++j) {
      LaunchAccess a;
      for (int k = static_cast<int>(rng() % 3); k >= 0; --k)
        a.reads.push_back(static_cast<int>(rng() % pool));
      for (int k = static_cast<int>(rng() % 2); k >= 0; --k)
        a.writes.push_back(static_cast<int>(rng() % pool));
      a.barrier = rng() % 23 == 0;
      ls.push_back(std::move(a));
    }
    for (int cap = 0; cap <= 4; ++cap) {
      const LaunchStreamPlan p = plan_launch_streams(ls, cap);
      EXPECT_LE(p.side_streams, cap);
      with_side += p.side_streams > 0;
      EXPECT_EQ(check_launch_streams(ls, p), "") << "trial " << trial << ", cap " << cap;
    }
  }
  EXPECT_GT(with_side, 400);  // the lists are not all chains
}

// The plans of the suite's kept searches (the top two of each) as the emitter makes them.
TEST(LaunchStreams, SuiteSearchPlansMeetTheContract) {
  int graphs = 0, forked = 0;
  for (const auto& entry : std::filesystem::directory_iterator("bench/search/suite")) {
    if (entry.path().extension() != ".json") continue;
    for (int rank = 0; rank < 2; ++rank) {
      auto loaded = load_graph_entry(entry.path().string(), rank);
      if (!loaded.ok()) break;  // fewer ranked graphs
      auto src = emit_cuda_source(loaded->graph);
      ASSERT_TRUE(src.ok()) << entry.path() << " rank " << rank << ": " << src.error().message;
      ++graphs;
      forked += src->launch_streams.side_streams > 0;
      EXPECT_EQ(check_launch_streams(src->launch_accesses, src->launch_streams), "")
          << entry.path() << " rank " << rank;
      EXPECT_EQ(src->code.find("StreamFork") != std::string::npos,
                src->launch_streams.side_streams > 0);
    }
  }
  EXPECT_GT(graphs, 50);
  EXPECT_GT(forked, 0);
}

constexpr const char* kQkv = R"(input X: f16[40, 48]
input Wq: f16[48, 32]
input Wk: f16[48, 16]
input Wv: f16[48, 16]
Q = matmul(X, Wq)
K = matmul(X, Wk)
V = matmul(X, Wv)
output Q
output K
output V
)";

TEST(LaunchStreams, EmittedQkvForksAndJoinsTheCallersStream) {
  const KernelGraph g = parse(kQkv);
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string& code = src->code;
  for (const char* text :
       {"#include \"strata_rt/streams.cuh\"", "strata_rt::host::LaunchStreams g_streams(2, 3);",
        "strata_rt::host::blas_init(3)", "g_streams.init()",
        "strata_rt::host::StreamFork fork(g_streams, stream);", "fork.record(0, 0);",
        "fork.wait(1, 0);", "fork.stream(1), 1);", "fork.stream(2), 2);", "fork.record(1, 1);",
        "fork.wait(0, 2);", "fork.wait(0, 1);",
        "return fork.finish(strata_rt::host::last_error());"})
    EXPECT_NE(code.find(text), std::string::npos) << "no `" << text << "` in\n" << code;
  // The knob streams=0: the source of today, no streams.
  EmitOptions off;
  ASSERT_TRUE(apply_emit_knobs("streams=0", off).ok());
  auto seq = emit_cuda_source(g, off);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq->code.find("fork"), std::string::npos);
  EXPECT_EQ(seq->code.find("streams.cuh"), std::string::npos);
  EXPECT_FALSE(apply_emit_knobs("streams=5", off).ok());
  // cuBLAS on the caller's stream only (the kernel on the side stream): one handle.
  auto one = emit_cuda_source(parse(R"(input X: f16[40, 48]
input W: f16[48, 32]
Y = matmul(X, W)
Z = exp(X)
output Y
output Z
)"));
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->launch_streams.stream, (std::vector<int>{0, 1}));
  EXPECT_NE(one->code.find("err = strata_rt::host::blas_init();"), std::string::npos) << one->code;
}

TEST(LaunchStreams, EmittedChainHasNoStreams) {
  const KernelGraph g = parse(R"(input X: f16[40, 48]
input W: f16[48, 32]
input U: f16[32, 16]
Y = matmul(silu(matmul(X, W)), U)
output Y
)");
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ(src->launch_streams.side_streams, 0);
  EXPECT_EQ(src->code.find("fork"), std::string::npos);
  EXPECT_EQ(src->code.find("streams.cuh"), std::string::npos);
}

/// The graph's emitted source has at least `min_side_streams` side streams and, on the
/// emulator in both thread orders, every output element within 2e-2 of the reference.
void check_emulated(const std::string& name, const KernelGraph& g, int min_side_streams) {
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << name << ": " << src.error().message;
  EXPECT_GE(src->launch_streams.side_streams, min_side_streams) << name;
  check_emulation(g, {.name = name, .seed = 99, .rtol = 2e-2, .rel_l2 = 0});
}

// Independent cuBLAS calls and generated kernels on side streams, on the emulator: QKV's
// three products; a LoRA (X·W beside X·A, then ·B and the sum in a kernel reading both); the
// library forms of a norm + QKV program (a fused kernel, then three calls reading it).
TEST(LaunchStreams, EmulatedConcurrentLaunchesMatchTheReference) {
  check_emulated("streams_qkv", parse(kQkv), 2);
  check_emulated("streams_lora", parse(R"(input X: f16[36, 40]
input W: f16[40, 24]
input A: f16[40, 8]
input B: f16[8, 24]
Y = add(matmul(X, W), matmul(matmul(X, A), B))
output Y
)"),
                 1);
  const KernelGraph program = parse(norm_qkv_program(67, 37, 24, 8));
  const search::LibraryForms lf = search::library_forms(program, 8);
  ASSERT_FALSE(lf.forms.empty());
  check_emulated("streams_norm_qkv", lf.forms[0].graph, 1);
  // Generated kernels only (no cuBLAS): two independent elementwise chains.
  check_emulated("streams_kernels", parse(R"(input X: f16[64, 32]
input Y: f16[64, 32]
A = silu(X)
B = exp(Y)
output A
output B
)"),
                 1);
}

// The emulated streams themselves (tests/data/streams/probe.cc): a consumer that does not wait
// for its producer's event reads the buffer before the producer wrote it — on the caller's
// stream in the forward order, on a side stream in the reversed one — and a side stream nothing
// joins, or a wait on an event never recorded, aborts the run.
TEST(LaunchStreams, EmulatorCatchesMissingWaitsAndJoins) {
  const std::string nvcc = find_nvcc(), inc = cuda_include_dir(nvcc);
  ASSERT_FALSE(inc.empty()) << "CUDA headers (cuda_fp16.h) not found";
  TempDir dir("streams_probe");
  const char* cxx = std::getenv("CXX");
  const std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                          " -std=c++20 -O1 -w -DSTRATA_RT_EMULATE -x c++ -Iruntime -I" + inc +
                          " tests/data/streams/probe.cc -o " + dir.file("probe");
  std::string log;
  ASSERT_EQ(run_command(cmd, log), 0) << cmd << "\n" << log;
  auto probe = [&](const std::string& args, std::string& out) {
    return run_command(dir.file("probe") + " " + args, out);
  };
  std::string out;
  for (const char* order : {"", " reverse"}) {
    EXPECT_EQ(probe(std::string("ok") + order, out), 0) << order << "\n" << out;
    EXPECT_EQ(probe(std::string("side_ok") + order, out), 0) << order << "\n" << out;
  }
  EXPECT_NE(probe("no_wait", out), 0) << out;
  EXPECT_NE(out.find("read 0"), std::string::npos) << out;
  EXPECT_NE(probe("side_no_wait reverse", out), 0) << out;
  EXPECT_NE(out.find("read 0"), std::string::npos) << out;
  EXPECT_NE(probe("no_join", out), 0) << out;
  EXPECT_NE(out.find("not joined"), std::string::npos) << out;
  EXPECT_NE(probe("unrecorded", out), 0) << out;
  EXPECT_NE(out.find("never recorded"), std::string::npos) << out;
}

}  // namespace
}  // namespace strata::testing
