// `strata equiv` proves every reference μGraph equivalent to its program at the paper shapes
// (batch 1 and batch 8), with the error bound target 2^-60 met. Runs the built tool.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/test_steps.h"

namespace {

struct ToolRun {
  int exit_code;
  std::string out;
};

ToolRun run_tool(const std::string& args) {
  const char* bin = std::getenv("STRATA_BIN");
  std::string cmd = std::string(bin ? bin : "build/strata") + " " + args + " 2>&1";
  ToolRun r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class PaperShapes : public testing::TestWithParam<std::string> {};

TEST_P(PaperShapes, ReferenceGraphIsEquivalentToItsProgram) {
  for (const char* size : {"b1", "b8"}) {
    std::string stem = GetParam() + "_" + size;
    strata::testing::test_step("strata equiv " + stem);
    ToolRun r = run_tool("equiv --quiet examples/programs/" + stem + ".strata examples/reference/" +
                         stem + ".json");
    EXPECT_EQ(r.exit_code, 0) << stem << ": " << r.out;
    auto at = r.out.find("≤ 2^");
    ASSERT_NE(at, std::string::npos) << r.out;
    double log2_bound = std::stod(r.out.substr(at + std::string("≤ 2^").size()));
    EXPECT_LE(log2_bound, -60.0) << stem << ": " << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, PaperShapes,
                         testing::Values("rmsnorm", "gatedmlp", "lora", "ntrans", "gqa", "qknorm"));

}  // namespace
