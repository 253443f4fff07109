// End-to-end tests of `strata emit`: the written source, exit codes and messages. Runs the
// built tool named by $STRATA_BIN (set by CTest).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/cuda_tools.h"

namespace strata::testing {
namespace {

std::string tool() {
  const char* bin = std::getenv("STRATA_BIN");
  return bin && *bin ? bin : "build/strata";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EmitCli, WritesTheSourceOfAReferenceGraph) {
  TempDir dir("emit_cli");
  std::string out;
  int rc = run_command(tool() + " emit examples/reference/gatedmlp_b1.json -o " + dir.file("g.cu") +
                           " --arch sm_90a",
                       out);
  ASSERT_EQ(rc, 0) << out;
  std::string src = read_all(dir.file("g.cu"));
  EXPECT_NE(src.find("extern \"C\" int strata_launch(const void* const* inputs"),
            std::string::npos);
  EXPECT_NE(src.find("strata_workspace_bytes"), std::string::npos);
  EXPECT_NE(src.find("// strata-meta: {\"graph\":\"gatedmlp_b1\",\"arch\":\"sm_90a\""),
            std::string::npos);
  // Threads per block and loop groups are the optimizer's choice (PlanOptions); the kernel
  // is named after the graph and the kernel op.
  EXPECT_NE(src.find("__global__ void __launch_bounds__("), std::string::npos);
  EXPECT_NE(src.find(") strata_gatedmlp_b1_k3_customized("), std::string::npos);
  EXPECT_NE(src.find("strata_rt::warp_mma<"), std::string::npos);  // tensor cores
  EXPECT_NE(out.find("bytes of shared memory"), std::string::npos) << out;
  // A .strata program becomes predefined-op kernels (its matmul a generated one, not cuBLAS).
  rc = run_command(tool() + " emit examples/programs/rmsnorm_small.strata -o " + dir.file("p.cu") +
                       " --no-tensor-cores --no-library-matmul --stages 2",
                   out);
  ASSERT_EQ(rc, 0) << out;
  src = read_all(dir.file("p.cu"));
  EXPECT_NE(src.find("strata_rmsnorm_small_k2_rms_norm"), std::string::npos);
  EXPECT_EQ(src.find("strata_rt::warp_mma<"), std::string::npos);
  EXPECT_NE(src.find("SIMT"), std::string::npos);
}

TEST(EmitCli, KnobsChangeTheSourceAndAreListed) {
  TempDir dir("emit_cli_knobs");
  std::string out;
  const std::string graph = " emit examples/reference/rmsnorm_b8.json -o ";
  ASSERT_EQ(run_command(tool() + graph + dir.file("a.cu"), out), 0) << out;
  ASSERT_EQ(run_command(tool() + graph + dir.file("b.cu") + " --groups 1 --stages 3", out), 0)
      << out;
  EXPECT_NE(out.find("3 stages"), std::string::npos) << out;
  ASSERT_EQ(run_command(tool() + graph + dir.file("c.cu") + " --knobs groups=1,stages=3", out), 0)
      << out;
  EXPECT_NE(read_all(dir.file("a.cu")), read_all(dir.file("b.cu")));
  EXPECT_EQ(read_all(dir.file("b.cu")), read_all(dir.file("c.cu")));  // flags = knobs
  EXPECT_EQ(run_command(tool() + graph + dir.file("d.cu") + " --knobs bogus=1", out), 2);
  EXPECT_NE(out.find("unknown knob `bogus`"), std::string::npos) << out;
  ASSERT_EQ(run_command(tool() + " emit --list-knobs", out), 0) << out;
  for (const char* knob : {"groups ", "stages ", "threads ", "inflight ", "tc ", "chain ", "fold ",
                           "regacc ", "rowwise ", "f32mid "})
    EXPECT_NE(out.find(knob), std::string::npos) << knob << "\n" << out;
}

TEST(EmitCli, BadInputExitsWithTwo) {
  TempDir dir("emit_cli_bad");
  std::string out;
  EXPECT_EQ(run_command(tool() + " emit does_not_exist.json -o " + dir.file("x.cu"), out), 2);
  EXPECT_NE(out.find("does_not_exist.json"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool() + " emit examples/reference/rmsnorm_b1.json --arch sm_75 -o " +
                            dir.file("x.cu"),
                        out),
            2);
  EXPECT_NE(out.find("expected sm_80 or newer"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool() + " emit examples/reference/rmsnorm_b1.json --arch sm_9x -o " +
                            dir.file("x.cu"),
                        out),
            2);
  // A block graph too large for shared memory: the kernel and the reason are named.
  write_file(dir.file("big.json"), R"({"format": "strata-mugraph", "version": 1,
    "inputs": [{"name": "X", "shape": [256, 1024], "dtype": "f32"}],
    "ops": [{"op": "customized", "inputs": ["X"], "outputs": ["O"],
      "block_graph": {"grid": [1, 1, 1], "block": 128, "forloop": 1, "ops": [
        {"op": "input", "input": 0, "imap": [null, null, null], "fmap": null, "output": "Xi"},
        {"op": "exp", "inputs": ["Xi"], "output": "E"},
        {"op": "sum", "inputs": ["E"], "output": "S", "dim": 1},
        {"op": "div", "inputs": ["E", "S"], "output": "P"},
        {"op": "accum", "inputs": ["P"], "output": "A", "fmap": null},
        {"op": "output", "inputs": ["A"], "omap": [null, null, null]}]}}],
    "outputs": ["O"]})");
  EXPECT_EQ(run_command(tool() + " emit " + dir.file("big.json") + " -o " + dir.file("x.cu"), out),
            2);
  EXPECT_NE(out.find("kernel op #1 (customized)"), std::string::npos) << out;
  EXPECT_NE(out.find("bytes of shared memory"), std::string::npos) << out;
}

}  // namespace
}  // namespace strata::testing
