// Warpgroup MMA on the GPU (PlanOptions::wgmma; docs/codegen.md, "wgmma"): the graphs the
// emulation tests prove (codegen_wgmma_test: plain matmuls with MN- and K-major B, column
// chunks, the attention chain at head dim 64 in f16 and bf16, QK-norm attention with a
// keys-major K, a ragged contraction with A masked past the present extent; at head dim 128
// and for B rows of 128 and 256 halves, B tiles in 64-column atoms, with the searches' prefill
// attention forms at reduced shapes, tests/data/wgmma/attn_d128_*.json) and suite programs
// with 64-row tiles (tests/data/wgmma/*.rows64.json), emitted
// with wgmma=1 for the device, checked against the float64 interpreter. On sm_90a every one
// must take wgmma; on any other GPU the knob must change nothing (and the code still passes).
// Labelled `gpu`: run by scripts/gpu-wgmma.sh and scripts/gpu-check.sh on a GPU machine.
#include <gtest/gtest.h>

#include "strata/frontend/graph_loader.h"
#include "strata/gpu/candidate_profiler.h"
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/runtime_api.h"
#include "support/coverage_graphs.h"
#include "support/wgmma_graphs.h"

namespace strata {
namespace {

#define REQUIRE_GPU() \
  ASSERT_GT(gpu_count(), 0) << "no CUDA device: GPU tests must run on a machine with a GPU"

struct Named {
  std::string name;
  KernelGraph graph;
  std::optional<KernelGraph> program;  ///< the program it implements, if not itself
  double input_scale = 0.5;            ///< inputs uniform in ±input_scale
};

std::vector<Named> wgmma_graphs() {
  using namespace testing;
  std::vector<Named> gs;
  gs.push_back({"mm_f16", plain_matmul(64, 256, 64, 64, 128, false, DType::f16), {}});
  gs.push_back({"mm_bf16_2wg", plain_matmul(128, 128, 64, 64, 256, false, DType::bf16), {}});
  gs.push_back({"mm_gelu", plain_matmul(128, 64, 64, 64, 256, true, DType::f16), {}});
  gs.push_back({"mm_kmajor_chunks", plain_matmul_nt(64, 64, 256, 128, DType::f16), {}});
  gs.push_back({"mm_kmajor_bf16", plain_matmul_nt(128, 64, 64, 256, DType::bf16), {}});
  gs.push_back({"gqa_d64", attention_graph(2, 64, 64, 1024, 2, 64, 32, false), {}});
  gs.push_back({"qknorm_d64_bf16", attention_graph(2, 64, 64, 1024, 2, 64, 32, true, DType::bf16),
                {}});
  gs.push_back({"kmajor_k", qknorm_gain_on_q(2, 64, 64, 256, 4, false, DType::bf16), {}});
  gs.push_back({"ragged_k", ragged_matmul(64, 1020, 64, 16, false), {}});
  gs.push_back({"ragged_k_masked_a", ragged_matmul(64, 1020, 64, 16, true), {}});
  // Head dim 128: B tiles whose rows are stored as 64-column atoms (docs/codegen.md, "wgmma").
  gs.push_back({"mm_n128_atoms", plain_matmul(64, 128, 128, 64, 128, false, DType::f16), {}});
  gs.push_back({"mm_n256_atoms_bf16", plain_matmul(128, 64, 256, 64, 256, true, DType::bf16), {}});
  gs.push_back({"mm_kmajor_k128", plain_matmul_nt(64, 128, 64, 128, DType::f16), {}});
  gs.push_back({"mm_kmajor_k256_bf16", plain_matmul_nt(128, 256, 128, 256, DType::bf16), {}});
  gs.push_back({"ragged_k_n128", ragged_matmul(64, 1020, 128, 16, true), {}});
  gs.push_back({"gqa_d128", attention_graph(2, 64, 128, 512, 2, 64, 32, false), {}});
  gs.push_back(
      {"qknorm_d128_bf16", attention_graph(2, 64, 128, 512, 2, 64, 32, true, DType::bf16), {}});
  // Its exp has no max shift: at inputs of ±0.5 the scores reach about 15 and exp overflows
  // f16 (in P before P·V) where the float64 reference does not; ±0.25 keeps them below 8 (the
  // emulation tests' inputs).
  gs.push_back({"kmajor_d128", qknorm_gain_on_q(2, 64, 128, 256, 4, false), {}, 0.25});
  gs.push_back({"kmajor_d128_bf16", qknorm_gain_on_q(2, 64, 128, 256, 4, true, DType::bf16), {}});
  // (attn_d128_256x128's chain exceeds a thread's registers at 16 warps: not emitted for a GPU.)
  for (const char* name : {"attn_d128_128x64", "attn_d128_128x64.bf16"}) {
    auto g = load_graph(std::string("tests/data/wgmma/") + name + ".json");
    EXPECT_TRUE(g.ok()) << name;
    if (g.ok()) gs.push_back({name, *g, {}});
  }
  for (const char* name : {"mcfuser_s5", "mcfuser_g8", "mcfuser_g10"}) {
    auto g = load_graph(std::string("tests/data/wgmma/") + name + ".rows64.json");
    auto p = load_graph(std::string("bench/suite/") + name + ".strata");
    EXPECT_TRUE(g.ok() && p.ok()) << name;
    if (g.ok() && p.ok()) gs.push_back({name, *g, *p});
  }
  return gs;
}

TEST(WgmmaGpu, EmittedGraphsMatchTheInterpreter) {
  REQUIRE_GPU();
  auto dev = query_device();
  ASSERT_TRUE(dev.ok());
  const bool sm90a = dev->arch() == "sm_90a";
  // Each graph with one loop group (the emulation tests' setting: every graph takes wgmma
  // there) and as the tuning variant `wgmma=1` runs it (the planner's loop groups: a matmul may
  // keep mma.sync, the answer must be right either way).
  for (const Named& n : wgmma_graphs()) {
    for (const char* knobs : {"wgmma=1,groups=1", "wgmma=1"}) {
      const std::string name = n.name + " [" + knobs + "]";
      auto src = emit_graph_source(n.graph, dev->arch(), knobs);
      ASSERT_TRUE(src.ok()) << name << ": " << src.error().message;
      const bool one_group = std::string(knobs) == "wgmma=1,groups=1";
      if (sm90a && one_group)
        EXPECT_NE(src->find("warpgroup_mma"), std::string::npos) << name << ": no wgmma";
      if (!sm90a)
        EXPECT_EQ(*src, *emit_graph_source(n.graph, dev->arch(),
                                           one_group ? "groups=1" : "default"))
            << name;
      ProfileOptions o;
      o.check_only = true;
      o.input_scale = n.input_scale;
      if (n.program) o.reference = *n.program;
      auto out = profile_candidates({n.graph}, {*src}, o);
      ASSERT_TRUE(out.ok()) << name << ": " << out.error().message;
      EXPECT_EQ((*out)[0].status, CandidateStatus::Ok)
          << name << ": " << candidate_status_name((*out)[0].status) << ": " << (*out)[0].error
          << " (rel L2 " << (*out)[0].rel_l2_error << ")";
    }
  }
}

}  // namespace
}  // namespace strata
