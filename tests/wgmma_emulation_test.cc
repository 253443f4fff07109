// wgmma on the CPU emulator and with nvcc (no GPU): the emulated wgmma.mma_async against a
// plain triple loop for both B majors, 128-byte and no swizzle, N = 8 … 256, f16 and bf16; the
// wrong programs the emulator must catch; the runtime's warpgroup_mma entries against the
// triple loop (B in 128-byte rows or in 64-column atoms of wider rows); and ptxas's
// verification of their inline PTX for sm_90a (and an sm_80 build).
// The probe programs are tests/data/wgmma/probe.cc (emulator) and compile.cu (nvcc).
#include <gtest/gtest.h>

#include <string>

#include "support/cuda_tools.h"

namespace strata::testing {
namespace {

class WgmmaProbe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    nvcc_ = new std::string(find_nvcc());
    dir_ = new TempDir("wgmma");
    const std::string inc = cuda_include_dir(*nvcc_);
    ASSERT_FALSE(inc.empty()) << "CUDA headers (cuda_fp16.h) not found";
    const char* cxx = std::getenv("CXX");
    const std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                            " -std=c++20 -O1 -w -DSTRATA_RT_EMULATE -x c++ -Iruntime -I" + inc +
                            " tests/data/wgmma/probe.cc -o " + dir_->file("probe");
    std::string log;
    built_ = run_command(cmd, log) == 0;
    if (!built_) build_log_ = new std::string(cmd + "\n" + log);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete nvcc_;
    delete build_log_;
  }
  /// Runs the probe with `args`; returns its exit status, output in `out`.
  static int probe(const std::string& args, std::string& out) {
    return run_command(dir_->file("probe") + " " + args, out);
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::string* nvcc_ = nullptr;
  static inline std::string* build_log_ = nullptr;
  static inline bool built_ = false;
};

TEST_F(WgmmaProbe, InstructionMatchesTripleLoop) {
  ASSERT_TRUE(built_) << *build_log_;
  for (const char* major : {"k", "mn"})
    for (int swizzle : {128, 0})
      for (int n : {8, 16, 32, 64, 128, 256})
        for (int bf16 : {0, 1}) {
          // K-major 128-byte rows: the k-step inside the row moves the start address.
          const int kstep = (std::string(major) == "k" && swizzle == 128) ? n % 4 : 0;
          const std::string args = "instr " + std::to_string(n) + " " + major + " " +
                                   std::to_string(swizzle) + " " + std::to_string(bf16) + " " +
                                   std::to_string(kstep) + " " + std::to_string(n % 16 == 0);
          std::string out;
          EXPECT_EQ(probe(args, out), 0) << args << "\n" << out;
          EXPECT_NE(out.find("ok"), std::string::npos) << args << "\n" << out;
        }
}

TEST_F(WgmmaProbe, WrongProgramsAreCaught) {
  ASSERT_TRUE(built_) << *build_log_;
  std::string out;
  EXPECT_NE(probe("misuse nofence", out), 0);
  EXPECT_NE(out.find("without a preceding wgmma.fence"), std::string::npos) << out;
  EXPECT_NE(probe("misuse overwrite", out), 0);
  EXPECT_NE(out.find("written before its wait"), std::string::npos) << out;
  EXPECT_NE(probe("misuse exit", out), 0);
  EXPECT_NE(out.find("in flight"), std::string::npos) << out;
  // Reading D before the wait sees NaN, not the product.
  EXPECT_EQ(probe("misuse early", out), 0) << out;
  EXPECT_NE(out.find("nan"), std::string::npos) << out;
}

TEST_F(WgmmaProbe, RuntimeEntriesMatchTripleLoop) {
  ASSERT_TRUE(built_) << *build_log_;
  struct Case {
    int n, k;
    const char* major;
  };
  // The last four store B's rows in 64-column atoms (MmaSpec's AB): MN-major N = 128 and 256
  // (one m64n64k16 per atom), K-major K = 128 and 256 (the k-step's atom in the descriptor).
  const Case cases[] = {{64, 64, "mn"},  {32, 64, "mn"},  {8, 32, "mn"},  {64, 256, "mn"},
                        {64, 64, "k"},   {128, 64, "k"},  {256, 32, "k"}, {8, 16, "k"},
                        {128, 64, "mn"}, {256, 32, "mn"}, {64, 128, "k"}, {128, 256, "k"}};
  for (const char* variant : {"smem", "rega", "chained"})
    for (const Case& c : cases)
      for (int bf16 : {0, 1}) {
        const std::string args = std::string("runtime ") + variant + " " + std::to_string(c.n) +
                                 " " + std::to_string(c.k) + " " + c.major + " " +
                                 std::to_string(bf16) + " " + std::to_string(c.k);
        std::string out;
        EXPECT_EQ(probe(args, out), 0) << args << "\n" << out;
      }
  // A ragged contraction: the k-steps past klimit skipped, A zeroed past it in the straddling one.
  for (const char* args : {"runtime smem 64 64 mn 0 40", "runtime smem 128 64 k 1 23",
                           "runtime smem 64 256 mn 1 97", "runtime smem 128 64 mn 1 40",
                           "runtime smem 64 128 k 0 77", "runtime smem 128 256 k 1 150"}) {
    std::string out;
    EXPECT_EQ(probe(args, out), 0) << args << "\n" << out;
  }
}

TEST_F(WgmmaProbe, PtxasAcceptsTheInlinePtx) {
  ASSERT_FALSE(nvcc_->empty()) << "nvcc not found";
  auto compile = [&](const std::string& arch, const std::string& flags, std::string& log) {
    const std::string cmd = *nvcc_ + " -std=c++17 -O3 -arch=" + arch + " " + flags +
                            " -Xptxas -v -Iruntime -c tests/data/wgmma/compile.cu -o " +
                            dir_->file("compile_" + arch + ".o");
    return run_command(cmd, log) == 0;
  };
  std::string log;
  // sm_90a: ptxas verifies the PTX and reports the warpgroup MMA it compiled.
  EXPECT_TRUE(compile("sm_90a", "", log)) << log;
  EXPECT_NE(log.find("GMMA"), std::string::npos) << log;
  // sm_80: the same source compiles (the wgmma calls trap there), without any GMMA.
  EXPECT_TRUE(compile("sm_80", "", log)) << log;
  EXPECT_EQ(log.find("GMMA"), std::string::npos) << log;
}

}  // namespace
}  // namespace strata::testing
