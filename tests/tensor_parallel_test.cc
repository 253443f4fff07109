// Tensor parallelism (docs/tensor-parallel.md): programs over R ranks with sharded inputs and
// outputs, all_reduce, the unsharded form behind the interpreters and the verifier, the search
// around all_reduce, the NCCL calls of the emitted host API, and bad declarations.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "strata/codegen/cuda_emitter.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/graph_print.h"
#include "strata/interp/interpreter.h"
#include "strata/frontend/program_parser.h"
#include "strata/ir/rank_expansion.h"
#include "strata/search/search.h"
#include "strata/verify/verifier.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

KernelGraph parse(const std::string& text) {
  auto g = parse_program(text, "test.strata");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(*g) : KernelGraph{};
}

std::string parse_error(const std::string& text) {
  auto g = parse_program(text, "bad.strata");
  EXPECT_FALSE(g.ok()) << "parsed: " << text;
  return g.ok() ? "" : g.error().message;
}

// A Llama-style MLP (RMSNorm·G, SwiGLU, down projection, residual) over `ranks` ranks, the
// intermediate dim (full extent `inter`) sharded: gate/up by columns, down by rows.
std::string tp_mlp(int ranks, int tokens, int hidden, int inter, const std::string& dt = "f32") {
  const std::string I = std::to_string(inter / ranks), Hd = std::to_string(hidden),
                    T = std::to_string(tokens);
  return "ranks " + std::to_string(ranks) + "\ninput X: " + dt + "[" + T + ", " + Hd +
         "]\ninput G: " + dt + "[" + Hd + "]\ninput W1: " + dt + "[" + Hd + ", " + I +
         "] shard(dim=1)\ninput W3: " + dt + "[" + Hd + ", " + I +
         "] shard(dim=-1)\ninput W2: " + dt + "[" + I + ", " + Hd +
         "] shard(dim=0)\n"
         "Y = mul(rms_norm(X, eps=1e-05), G)\n"
         "H = mul(silu(matmul(Y, W1)), matmul(Y, W3))\n"
         "A = all_reduce(matmul(H, W2))\n"
         "O = add(A, X)\n"
         "output O\n";
}

std::string full_mlp(int tokens, int hidden, int inter, const std::string& dt = "f32") {
  const std::string I = std::to_string(inter), Hd = std::to_string(hidden),
                    T = std::to_string(tokens);
  return "input X: " + dt + "[" + T + ", " + Hd + "]\ninput G: " + dt + "[" + Hd +
         "]\ninput W1: " + dt + "[" + Hd + ", " + I + "]\ninput W3: " + dt + "[" + Hd + ", " + I +
         "]\ninput W2: " + dt + "[" + I + ", " + Hd +
         "]\n"
         "Y = mul(rms_norm(X, eps=1e-05), G)\n"
         "H = mul(silu(matmul(Y, W1)), matmul(Y, W3))\n"
         "O = add(matmul(H, W2), X)\n"
         "output O\n";
}

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  double m = 0;
  for (int64_t i = 0; i < a.numel() && i < b.numel(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

VerifyResult equiv(const KernelGraph& a, const KernelGraph& b) {
  auto r = verify_equivalent(a, b);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : VerifyResult{};
}

// ---- format ------------------------------------------------------------------------------

TEST(TensorParallelFormat, ParsesRanksShardsAndAllReduce) {
  KernelGraph g = parse(tp_mlp(2, 4, 16, 24));
  EXPECT_EQ(g.ranks(), 2);
  ASSERT_EQ(g.inputs().size(), 5u);
  EXPECT_EQ(g.input_shard(0), kReplicated);
  EXPECT_EQ(g.input_shard(2), 1);
  EXPECT_EQ(g.input_shard(3), 1);  // dim=-1, normalized
  EXPECT_EQ(g.input_shard(4), 0);
  EXPECT_EQ(g.tensor(g.inputs()[2]).shape, Shape({16, 12}));  // the rank's part
  EXPECT_EQ(full_input_shape(g, 2), Shape({16, 24}));
  EXPECT_EQ(full_input_shape(g, 4), Shape({24, 16}));
  int all_reduce = 0;
  for (const KernelOp& op : g.ops()) all_reduce += op.kind == OpKind::AllReduce;
  EXPECT_EQ(all_reduce, 1);
  EXPECT_TRUE(g.is_parallel());
}

TEST(TensorParallelFormat, PrintsAndRoundTripsThroughJson) {
  KernelGraph g = parse(
      "ranks 4\ninput X: f16[2, 8]\ninput W: f16[8, 3] shard(dim=1)\nY = matmul(X, W)\n"
      "output Y shard(dim=1)\n");
  const std::string text = format_graph(g);
  EXPECT_NE(text.find("ranks 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("input W: f16[8, 3] shard(dim=1)"), std::string::npos) << text;
  EXPECT_NE(text.find("output Y shard(dim=1)"), std::string::npos) << text;
  auto back = kernel_graph_from_json(kernel_graph_to_json(g), "doc");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->structurally_equal(g));
  EXPECT_EQ(back->ranks(), 4);
  EXPECT_EQ(back->output_shard(0), 1);
}

TEST(TensorParallelFormat, BadDeclarationsAreErrorsAtTheirPlace) {
  struct Case {
    std::string text, where, what;
  };
  const Case cases[] = {
      {"input X: f32[4]\nranks 2\noutput X\n", "2:1", "before the first input"},
      {"ranks 2\nranks 2\ninput X: f32[4]\noutput X\n", "2:1", "second `ranks`"},
      {"ranks 0\ninput X: f32[4]\noutput X\n", "1:7", "out of range"},
      {"ranks 65\ninput X: f32[4]\noutput X\n", "1:7", "out of range"},
      {"ranks two\ninput X: f32[4]\noutput X\n", "1:7", "number of ranks"},
      {"input X: f32[4] shard(dim=0)\nY = exp(X)\noutput Y\n", "1:17", "without `ranks R`"},
      {"ranks 2\ninput X: f32[4, 2] shard(dim=2)\noutput X\n", "2:30", "dim index"},
      {"ranks 2\ninput X: f32[4] shard(dim=0\noutput X\n", "2:28", "expected `)`"},
      {"ranks 2\ninput X: f32[4] shard dim=0\noutput X\n", "2:23", "after `shard`"},
      // A replicated output that depends on a shard not summed by all_reduce.
      {"ranks 2\ninput X: f32[2, 4] shard(dim=1)\ninput W: f32[4, 3] shard(dim=0)\n"
       "Y = matmul(X, W)\noutput Y\n",
       "5:8", "differs between the ranks"},
      {"ranks 2\ninput X: f32[16777216, 16777216] shard(dim=0)\nY = exp(X)\noutput Y\n", "2:34",
       "2^48"},
  };
  for (const Case& c : cases) {
    std::string msg = parse_error(c.text);
    EXPECT_NE(msg.find("bad.strata:" + c.where + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
  }
}

TEST(TensorParallelFormat, ToolExitsWith2OnABadDeclaration) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
  fs::path dir = fs::temp_directory_path() / ("strata-tp-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "bad.strata") << "ranks 2\ninput X: f32[2, 4] shard(dim=1)\n"
                                       "Y = exp(X)\noutput Y\n";
  const std::string cmd = "'" + std::string(bin) + "' check '" + (dir / "bad.strata").string() +
                          "' >/dev/null 2>'" + (dir / "err.txt").string() + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream err(dir / "err.txt");
  std::string msg((std::istreambuf_iterator<char>(err)), {});
  EXPECT_NE(msg.find("bad.strata:4:8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard(dim=D)"), std::string::npos) << msg;
  fs::remove_all(dir);
}

// ---- interpreters ------------------------------------------------------------------------

TEST(TensorParallelInterpreter, RanksOnTheirShardsEqualTheUnshardedProgram) {
  for (int ranks : {2, 4}) {
    KernelGraph tp = parse(tp_mlp(ranks, 3, 8, 16));
    KernelGraph full = parse(full_mlp(3, 8, 16));
    std::vector<HostTensor> in = random_inputs(tp, 7);  // the full inputs
    ASSERT_EQ(in.size(), 5u);
    EXPECT_EQ(in[2].shape, Shape({8, 16}));
    auto a = run_reference(tp, in);
    auto b = run_reference(full, in);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_LT(max_abs_diff((*a)[0], (*b)[0]), 1e-12) << ranks << " ranks";
  }
}

TEST(TensorParallelInterpreter, ShardedOutputsConcatenateAndReplicatedSumsMultiply) {
  // Column-parallel: rank r computes X·W[:, r-th part]; the output is sharded along dim 1.
  // all_reduce of a replicated value sums R equal copies.
  KernelGraph g = parse(
      "ranks 3\ninput X: f32[2, 4]\ninput W: f32[4, 2] shard(dim=1)\nY = matmul(X, W)\n"
      "Z = all_reduce(X)\noutput Y shard(dim=1), Z\n");
  std::vector<HostTensor> in = random_inputs(g, 3);
  ASSERT_EQ(in[1].shape, Shape({4, 6}));
  auto out = run_reference(g, in);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ((*out)[0].shape, Shape({2, 6}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) {
      double want = 0;
      for (int k = 0; k < 4; ++k) want += in[0][i * 4 + k] * in[1][k * 6 + j];
      EXPECT_NEAR((*out)[0][i * 6 + j], want, 1e-12);
    }
  for (int64_t e = 0; e < 8; ++e) EXPECT_NEAR((*out)[1][e], 3 * in[0][e], 1e-12);
}

TEST(TensorParallelInterpreter, OneRankAllReduceIsTheIdentity) {
  KernelGraph g = parse("input X: f32[2, 3]\nY = all_reduce(X)\nZ = exp(Y)\noutput Y, Z\n");
  std::vector<HostTensor> in = random_inputs(g, 1);
  auto out = run_reference(g, in);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(max_abs_diff((*out)[0], in[0]), 0);
  EXPECT_NEAR((*out)[1][4], std::exp(in[0][4]), 1e-15);
}

// ---- verifier ----------------------------------------------------------------------------

TEST(TensorParallelVerifier, ShardedProgramIsProvedEquivalentToItsUnshardedForm) {
  KernelGraph tp = parse(tp_mlp(2, 4, 16, 24));
  KernelGraph full = parse(full_mlp(4, 16, 24));
  VerifyResult r = equiv(tp, full);
  EXPECT_TRUE(r.equivalent) << r.detail;
  EXPECT_LT(r.log2_bound, -60);
  // Over 4 ranks, and 2 ranks against 4: the same function of the full inputs.
  KernelGraph tp4 = parse(tp_mlp(4, 4, 16, 24));
  EXPECT_TRUE(equiv(full, tp4).equivalent);
  EXPECT_TRUE(equiv(tp, tp4).equivalent);
}

TEST(TensorParallelVerifier, RejectsMutants) {
  KernelGraph full = parse("input X: f32[4, 8]\ninput W: f32[8, 8]\nO = matmul(X, W)\noutput O\n");
  // Row-parallel matmul: X by columns, W by rows, partial sums reduced.
  KernelGraph good = parse(
      "ranks 2\ninput X: f32[4, 4] shard(dim=1)\ninput W: f32[4, 8] shard(dim=0)\n"
      "O = all_reduce(matmul(X, W))\noutput O\n");
  EXPECT_TRUE(equiv(good, full).equivalent);
  // A wrong shard with the same full shapes: W by columns, used transposed.
  KernelGraph wrong_shard = parse(
      "ranks 2\ninput X: f32[4, 4] shard(dim=1)\ninput W: f32[8, 4] shard(dim=1)\n"
      "O = all_reduce(matmul(X, transpose(W)))\noutput O\n");
  VerifyResult r = equiv(wrong_shard, full);
  EXPECT_FALSE(r.equivalent);
  EXPECT_FALSE(r.unknown);
  EXPECT_NE(r.detail.find("differs"), std::string::npos) << r.detail;
  // A wrong shard that changes the full shape: an interface difference.
  KernelGraph wrong_dim = parse(
      "ranks 2\ninput X: f32[4, 4] shard(dim=1)\ninput W: f32[4, 8] shard(dim=1)\n"
      "O = all_reduce(matmul(X, W))\noutput O\n");
  EXPECT_FALSE(equiv(wrong_dim, full).equivalent);
  // Without the all_reduce, declared as the rank's part of a sharded output: each rank's
  // partial sum, concatenated, is not the product.
  KernelGraph no_reduce = parse(
      "ranks 2\ninput X: f32[4, 4] shard(dim=1)\ninput W: f32[4, 4] shard(dim=0)\n"
      "O = matmul(X, W)\noutput O shard(dim=1)\n");
  EXPECT_FALSE(equiv(no_reduce, full).equivalent);
  // The residual added before the all_reduce is added R times.
  KernelGraph tp = parse(tp_mlp(2, 4, 16, 24));
  std::string text = tp_mlp(2, 4, 16, 24);
  text.replace(text.find("A = all_reduce(matmul(H, W2))\nO = add(A, X)"),
               std::string("A = all_reduce(matmul(H, W2))\nO = add(A, X)").size(),
               "A = add(matmul(H, W2), X)\nO = all_reduce(A)");
  KernelGraph late = parse(text);
  EXPECT_FALSE(equiv(late, parse(full_mlp(4, 16, 24))).equivalent);
  EXPECT_TRUE(equiv(tp, parse(full_mlp(4, 16, 24))).equivalent);
}

TEST(TensorParallelVerifier, CandidateWithAReplicatedOutputThatDiffersIsNotEquivalent) {
  // A per-rank graph whose replicated output is not the same on every rank (as a search
  // candidate could be) is a "not equivalent" verdict, not an error.
  KernelGraph program = parse(
      "ranks 2\ninput X: f32[4, 4] shard(dim=1)\ninput W: f32[4, 8] shard(dim=0)\n"
      "O = all_reduce(matmul(X, W))\noutput O\n");
  KernelGraph bad;
  int x = *bad.add_input("X", Shape({4, 4}), DType::f32);
  int w = *bad.add_input("W", Shape({4, 8}), DType::f32);
  int o = *bad.add_op(OpKind::Matmul, {x, w});
  ASSERT_TRUE(bad.mark_output(o).ok());
  bad.copy_parallel_interface(program);
  auto checker = EquivalenceChecker::make(program, VerifyOptions{});
  ASSERT_TRUE(checker.ok()) << checker.error().message;
  auto screened = checker->screen(bad);
  ASSERT_TRUE(screened.ok());
  EXPECT_FALSE(*screened);
  auto v = checker->verify(bad);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->equivalent);
  EXPECT_NE(v->detail.find("differs between the ranks"), std::string::npos) << v->detail;
}

// ---- search ------------------------------------------------------------------------------

TEST(TensorParallelSearch, FusesAroundTheAllReduceAndVerifies) {
  // The TP MLP followed by the next layer's RMSNorm: the search keeps the all_reduce where it
  // is and fuses on both sides of it.
  std::string text = tp_mlp(2, 8, 512, 512, "f16");
  text.replace(text.find("output O\n"), 9,
               "input G2: f16[512]\nN = mul(rms_norm(O, eps=1e-05), G2)\noutput O, N\n");
  KernelGraph program = parse(text);
  auto dir = fs::temp_directory_path() / ("strata-tp-search-" + std::to_string(::getpid()));
  auto r = superoptimize(
      program, SearchConfig{}.with_threads(2).with_quiet(true).with_cache(false).with_cache_dir(
                   dir.string()));
  fs::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Candidate& best = r->ranked[0];
  ASSERT_FALSE(best.is_program) << search_summary(*r);
  EXPECT_EQ(best.graph.ranks(), 2);
  EXPECT_EQ(best.graph.input_shard(2), 1);
  // Customized kernels before the all_reduce (the matmuls) and after it (residual + norm).
  int all_reduce_at = -1, before = 0, after = 0;
  for (size_t i = 0; i < best.graph.ops().size(); ++i) {
    const KernelOp& op = best.graph.op(static_cast<int>(i));
    if (op.kind == OpKind::AllReduce) all_reduce_at = static_cast<int>(i);
    if (op.kind == OpKind::Customized) (all_reduce_at < 0 ? before : after) += 1;
  }
  ASSERT_GE(all_reduce_at, 0) << format_graph(best.graph);
  EXPECT_GE(before, 1) << format_graph(best.graph);
  EXPECT_GE(after, 1) << format_graph(best.graph);
  EXPECT_LT(best.cost.predicted_us, r->ranked[r->program_index()].cost.predicted_us);
  // Proved against the program, and against the unsharded form.
  EXPECT_TRUE(best.verification.equivalent);
  std::string full = full_mlp(8, 512, 512, "f16");
  full.replace(full.find("output O\n"), 9,
               "input G2: f16[512]\nN = mul(rms_norm(O, eps=1e-05), G2)\noutput O, N\n");
  EXPECT_TRUE(equiv(best.graph, parse(full)).equivalent);
}

// ---- code generation ---------------------------------------------------------------------

TEST(TensorParallelCodegen, AllReduceIsAnNcclCallOnTheLaunchStream) {
  KernelGraph g = parse(tp_mlp(2, 4, 64, 128, "f16"));
  EmitOptions opts;
  opts.nccl = true;
  auto src = emit_cuda_source(g, opts);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::string& code = src->code;
  EXPECT_NE(code.find("#include <nccl.h>"), std::string::npos);
  EXPECT_NE(code.find("ncclAllReduce("), std::string::npos);
  EXPECT_NE(code.find("ncclFloat16, ncclSum, g_comm, stream)"), std::string::npos);
  EXPECT_NE(code.find("extern \"C\" int strata_nccl_init(const void* id, int nranks, int rank)"),
            std::string::npos);
  EXPECT_NE(code.find("extern \"C\" int strata_nccl_set_comm(void* comm)"), std::string::npos);
  EXPECT_NE(code.find("extern \"C\" int strata_ranks(void) { return 2; }"), std::string::npos);
  EXPECT_NE(code.find("\"ranks\":2,\"nccl\":true"), std::string::npos);
  // The all_reduce comes after the down projection's kernel and before the residual add's.
  const size_t call = code.find("ncclAllReduce(t");
  EXPECT_LT(code.find("// kernel op #11: matmul"), call);
  EXPECT_LT(code.find("// kernel op #12: all_reduce (NCCL, sum over 2 ranks)"), call);
  EXPECT_GT(code.find("// kernel op #13: add"), call);
  // No device synchronization in the launch: it stays capturable.
  EXPECT_EQ(code.find("cudaDeviceSynchronize"), std::string::npos);
  EXPECT_EQ(code.find("cudaStreamSynchronize"), std::string::npos);

  opts.nccl = false;
  auto refused = emit_cuda_source(g, opts);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("all_reduce needs NCCL"), std::string::npos);
  // A graph without all_reduce needs no NCCL.
  auto plain = emit_cuda_source(parse(full_mlp(4, 64, 128, "f16")), opts);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->code.find("ncclAllReduce"), std::string::npos);
  EXPECT_EQ(plain->code.find("#include <nccl.h>"), std::string::npos);
}

}  // namespace
}  // namespace strata
