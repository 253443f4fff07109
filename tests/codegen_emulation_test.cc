// End-to-end tests of the CUDA emitter without a GPU: emitted sources run on the CPU emulator
// of the CUDA execution model (runtime/strata_rt/emulate.h: fibers per thread, barriers, warp
// collectives with the PTX fragment layouts, asynchronous cp.async, NaN-filled shared memory)
// and must match a double-precision evaluation of DESIGN §2 semantics. Each graph also runs
// with the threads of every block in reverse order, so a missing barrier shows up either way.
#include <gtest/gtest.h>

#include "strata/graph_io.h"
#include "support/benchmark_graphs.h"
#include "support/emulation.h"

namespace strata::testing {
namespace {

struct Case {
  std::string name;
  KernelGraph graph;
  double amp = 0.5;
  EmitOptions options{};
};

void check_graph(const Case& c, const KernelGraph* program = nullptr) {
  EmulatedGraph emu(c.graph, c.options, c.name);
  ASSERT_TRUE(emu.ok()) << c.name << ": " << emu.log();
  std::vector<RefTensor> inputs = random_inputs(c.graph, 1234, c.amp);
  std::vector<RefTensor> ref = ref_kernel_graph(c.graph, inputs);
  if (program) {
    // The reference μGraph and the naive program agree (a check of the evaluator itself).
    std::vector<RefTensor> pref = ref_kernel_graph(*program, inputs);
    ASSERT_EQ(pref.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_LT(compare(pref[i], ref[i], 1e-9).rel_l2, 1e-9) << c.name << " output " << i;
  }
  for (bool reverse : {false, true}) {
    std::vector<RefTensor> out;
    ASSERT_TRUE(emu.run(inputs, out, reverse)) << c.name << ": " << emu.log();
    ASSERT_EQ(out.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      Comparison cmp = compare(out[i], ref[i]);
      EXPECT_EQ(cmp.bad, 0) << c.name << " output " << i << (reverse ? " (reverse order)" : "")
                            << ": " << cmp.bad << " of " << ref[i].v.size()
                            << " elements off, rel L2 " << cmp.rel_l2 << ", max abs " << cmp.max_abs
                            << ", ref rms " << cmp.ref_rms;
      EXPECT_LT(cmp.rel_l2, 1e-2) << c.name << " output " << i;
    }
  }
}

TEST(Emulation, RmsNormReference) {
  check_graph({"rmsnorm", rmsnorm_graph(4, 256, 512)}, nullptr);
  KernelGraph prog = rmsnorm_program(4, 256, 512);
  check_graph({"rmsnorm_ref", rmsnorm_graph(4, 256, 512)}, &prog);
}

}  // namespace
}  // namespace strata::testing
