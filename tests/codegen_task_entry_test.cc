// Task entries (docs/codegen.md, "Task entries"): every customized kernel emitted as well as a
// __device__ function of one block, called by a block of more threads than the kernel's, with
// the block index and the shared memory passed in. On the CPU emulator, calling the entry for
// every block index (strata_launch_tasks) must give exactly the bytes the kernel gives, and both
// must match the float64 interpreter.
#include <gtest/gtest.h>

#include "strata/codegen/cuda_emitter.h"
#include "support/benchmark_graphs.h"
#include "support/emulation.h"
#include "support/ragged_graphs.h"

namespace strata::testing {
namespace {

/// Emits `g` with task entries beside the kernels (callers of `caller_threads` threads), checks
/// that some kernel runs with fewer threads than its caller, runs the kernels and the task
/// entries on the emulator (threads in order and reversed) and compares: the two bit for bit,
/// the kernels with the interpreter.
void check_task_entries(const std::string& name, const KernelGraph& g, EmitOptions opts = {},
                        int caller_threads = 256, double amp = 0.5) {
  opts.task_entry = TaskEntryForm::Beside;
  opts.task_threads = caller_threads;
  auto src = emit_cuda_source(g, opts);
  ASSERT_TRUE(src.ok()) << name << ": " << src.error().message;
  bool fewer = false;
  for (const EmittedKernel& k : src->kernels) {
    ASSERT_FALSE(k.task_entry.empty()) << name << ": " << k.name;
    EXPECT_LE(k.threads, caller_threads) << name << ": " << k.name;
    fewer |= k.threads < caller_threads;
    // The entry's threads and shared memory are constants beside it.
    EXPECT_NE(src->code.find("constexpr int " + k.task_entry +
                             "_threads = " + std::to_string(k.threads) + ";"),
              std::string::npos)
        << name;
    EXPECT_NE(src->code.find("constexpr long long " + k.task_entry +
                             "_smem_bytes = " + std::to_string(k.smem_bytes) + ";"),
              std::string::npos)
        << name;
  }
  EXPECT_TRUE(fewer) << name << ": no kernel has fewer threads than its caller";
  EmulatedGraph kernels(g, opts, name + "_kernels");
  ASSERT_TRUE(kernels.ok()) << kernels.log();
  EmulatedGraph tasks(g, opts, name + "_tasks", "strata_launch_tasks");
  ASSERT_TRUE(tasks.ok()) << tasks.log();
  std::vector<HostTensor> inputs = rounded_random_inputs(g, 777, amp);
  auto reference = run_reference(g, inputs);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  for (bool reverse : {false, true}) {
    std::vector<HostTensor> a, b;
    ASSERT_TRUE(kernels.run(inputs, a, reverse)) << kernels.log();
    ASSERT_TRUE(tasks.run(inputs, b, reverse)) << tasks.log();
    ASSERT_EQ(a.size(), reference->size());
    ASSERT_EQ(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t differ = 0;
      for (size_t e = 0; e < a[i].data.size(); ++e) {
        const double x = a[i].data[e], y = b[i].data[e];
        if (!(x == y || (x != x && y != y))) ++differ;
      }
      EXPECT_EQ(differ, 0) << name << " output " << i << (reverse ? " (reverse)" : "")
                           << ": task entries differ from the kernel";
      Comparison cmp = compare(a[i], (*reference)[i]);
      EXPECT_EQ(cmp.bad, 0) << name << " output " << i << ": rel L2 " << cmp.rel_l2;
    }
  }
}

TEST(TaskEntry, RmsNormMatmul) {
  check_task_entries("rmsnorm", rmsnorm_graph(8, 256, 256));
}

TEST(TaskEntry, GatedMlp) {
  check_task_entries("gatedmlp", gatedmlp_graph(8, 256, 256));
}

// A loop split over loop groups: the groups' named barriers (1, 2, …) and the entry's (15)
// meet in one block.
TEST(TaskEntry, LoopGroupsAndRegisterAccumulators) {
  EmitOptions o;
  o.plan.loop_groups = 2;
  auto src = emit_cuda_source(rmsnorm_graph(8, 512, 128), o);
  ASSERT_TRUE(src.ok());
  ASSERT_EQ(src->kernels[0].loop_groups, 2);
  check_task_entries("rmsnorm_groups", rmsnorm_graph(8, 512, 128), o);
}

// A one-iteration kernel with block-wide reductions (rms_norm over a row per block).
TEST(TaskEntry, RowReductions) {
  check_task_entries("ntrans", ntrans_graph(4, 512));
}

// Two kernels (FlashDecoding: partials through the workspace, then their combination).
TEST(TaskEntry, TwoKernels) {
  check_task_entries("attention", attention_graph(2, 32, 32, 512, 4, 32, 16, false), {}, 256, 0.25);
}

// Ragged tiles: N = 1000 over 9 blocks; a gated MLP with hidden 1100 over 23 blocks.
TEST(TaskEntry, Ragged) {
  RaggedCase a = ragged_rmsnorm_n1000();
  check_task_entries(a.name, a.graph);
  RaggedCase b = ragged_gatedmlp_h1100();
  check_task_entries(b.name, b.graph);
}

// A caller of fewer threads than a kernel wants: the plan is made for the caller's threads, or
// refused with a message naming them.
TEST(TaskEntry, CallerThreadsBoundThePlan) {
  EmitOptions o;
  o.task_entry = TaskEntryForm::Only;
  o.task_threads = 64;
  auto src = emit_cuda_source(gatedmlp_graph(8, 256, 256), o);
  if (src.ok()) {
    for (const EmittedKernel& k : src->kernels) EXPECT_LE(k.threads, 64);
    EXPECT_EQ(src->code.find("__global__"), std::string::npos);
    EXPECT_EQ(src->code.find("strata_launch"), std::string::npos);
  } else {
    EXPECT_NE(src.error().message.find("at most 64"), std::string::npos) << src.error().message;
  }
  o.task_threads = 100;
  auto bad = emit_cuda_source(gatedmlp_graph(8, 256, 256), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("multiple of 32"), std::string::npos);
}

// The task entries alone compile with nvcc for sm_90a, called from a kernel of 256 threads.
TEST(TaskEntry, OnlyFormCompilesWithNvcc) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "nvcc not found";
  EmitOptions o;
  o.task_entry = TaskEntryForm::Only;
  o.name = "gmlp";
  auto src = emit_cuda_source(gatedmlp_graph(8, 256, 256), o);
  ASSERT_TRUE(src.ok()) << src.error().message;
  ASSERT_EQ(src->kernels.size(), 1u);
  const EmittedKernel& k = src->kernels[0];
  TempDir dir("task_entry_nvcc");
  std::string caller = src->code +
                       "\n__global__ void __launch_bounds__(256) caller(const half* x, const half* "
                       "w1, const half* w3, half* o) {\n"
                       "  extern __shared__ __align__(128) unsigned char smem[];\n"
                       "  static_assert(" +
                       k.task_entry + "_threads <= 256, \"fits the caller\");\n  " + k.task_entry +
                       "(blockIdx.x, 0, 0, x, w1, w3, o, smem);\n  __syncthreads();\n}\n";
  write_file(dir.file("entries.cu"), caller);
  std::string log;
  const std::string cmd = nvcc + " -std=c++17 -arch=sm_90a -c -I" + cuda_runtime_include_dir() +
                          " " + dir.file("entries.cu") + " -o " + dir.file("entries.o");
  EXPECT_EQ(run_command(cmd, log), 0) << cmd << "\n" << log;
}

}  // namespace
}  // namespace strata::testing
