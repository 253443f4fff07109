// Compile checks of emitted CUDA without a GPU: every reference μGraph of examples/, every
// graph `strata optimize` returns for the small-shape benchmarks, and the coverage graphs are
// emitted and compiled with nvcc for sm_80 and sm_90a (-Xptxas -v); the
// resource report must show every kernel for both targets, no register spills, and static +
// dynamic shared memory within the H100 limit (227 KB). The device part must also compile with
// NVRTC. Fails (does not skip) when nvcc is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "strata/codegen/cuda_emitter.h"
#include "strata/frontend/graph_loader.h"
#include "strata/frontend/program_parser.h"
#include "strata/ir/graph_io.h"
#include "strata/opt/thread_fusion.h"
#include "strata/search/search.h"
#include "support/cuda_tools.h"
#include "support/elementwise_graphs.h"
#include "support/mma_padding_graphs.h"
#include "support/op_coverage_graphs.h"
#include "support/ragged_graphs.h"
#include "support/routed_graphs.h"
#include "support/test_steps.h"

namespace strata::testing {
namespace {

constexpr int64_t kSmemLimit = 227 * 1024;

struct KernelResources {
  int registers = -1;
  int64_t spill_stores = -1, spill_loads = -1, stack = -1, static_smem = 0;
};

/// ptxas -v output → resources per (kernel, arch).
std::map<std::pair<std::string, std::string>, KernelResources> parse_ptxas(const std::string& log) {
  std::map<std::pair<std::string, std::string>, KernelResources> out;
  std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::regex used(R"(Used (\d+) registers)");
  std::regex smem(R"((\d+) bytes smem)");
  std::pair<std::string, std::string> cur;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      cur = {m[1], m[2]};
      out[cur];
    } else if (!cur.first.empty() && std::regex_search(line, m, frame)) {
      out[cur].stack = std::stoll(m[1]);
      out[cur].spill_stores = std::stoll(m[2]);
      out[cur].spill_loads = std::stoll(m[3]);
    } else if (!cur.first.empty() && std::regex_search(line, m, used)) {
      out[cur].registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) out[cur].static_smem = std::stoll(m[1]);
    }
  }
  return out;
}

struct Target {
  std::string name;
  KernelGraph graph;
};

struct Outcome {
  std::string name, error, log;
  EmittedSource source;
};

Outcome compile_one(const Target& t, const std::string& nvcc, const std::string& dir) {
  test_step("nvcc " + t.name);
  Outcome o;
  o.name = t.name;
  EmitOptions opts;
  opts.name = t.name;
  auto src = emit_cuda_source(t.graph, opts);
  if (!src.ok()) {
    o.error = "emit failed: " + src.error().message;
    return o;
  }
  o.source = *src;
  const std::string cu = dir + "/" + t.name + ".cu";
  write_file(cu, src->code);
  std::string cmd = nvcc +
                    " -std=c++17 -O3 -gencode arch=compute_80,code=sm_80"
                    " -gencode arch=compute_90a,code=sm_90a -Xptxas -v -I" +
                    cuda_runtime_include_dir() + " -shared -Xcompiler -fPIC -o " + dir + "/" +
                    t.name + ".so " + cu;
  if (run_command(cmd, o.log) != 0) o.error = "nvcc failed:\n" + cmd + "\n" + o.log;
  return o;
}

std::vector<Target> targets() {
  std::vector<Target> ts;
  for (const char* bench : {"rmsnorm", "gatedmlp", "lora", "ntrans", "gqa", "qknorm"})
    for (const char* size : {"small", "b1", "b8"}) {
      std::string path = std::string("examples/reference/") + bench + "_" + size + ".json";
      auto g = load_graph(path);
      if (!g.ok()) throw std::runtime_error(g.error().message);
      ts.push_back({std::string(bench) + "_" + size, std::move(*g)});
    }
  // The search results at small shapes: every ranked graph but the program itself.
  for (const char* bench : {"rmsnorm", "gatedmlp", "lora", "ntrans", "gqa", "qknorm"}) {
    test_step(std::string("search ") + bench + "_small");
    auto program = load_graph(std::string("examples/programs/") + bench + "_small.strata");
    if (!program.ok()) throw std::runtime_error(program.error().message);
    auto r = superoptimize(*program, SearchConfig{}.with_quiet(true).with_cache(false));
    if (!r.ok()) throw std::runtime_error(std::string(bench) + ": " + r.error().message);
    int rank = 0;
    for (const Candidate& c : r->ranked) {
      if (!c.is_program)
        ts.push_back({std::string("search_") + bench + "_small_" + std::to_string(rank), c.graph});
      ++rank;
    }
  }
  ts.push_back({"cov_accmaps", accumulators_and_maps()});
  ts.push_back({"cov_simt", simt_and_reductions()});
  ts.push_back({"cov_batched", batched_tensor_cores()});
  ts.push_back({"cov_views", views_and_block_reductions()});
  ts.push_back({"cov_predefined", predefined_ops()});
  ts.push_back({"cov_elementwise", predefined_elementwise().graph});
  // The reduction family beyond sums, layout views, the online softmax (op_coverage_graphs.h).
  ts.push_back({"cov_rowmax", rowwise_max_eps()});
  ts.push_back({"cov_loopmax", looped_max_eps()});
  ts.push_back({"cov_foldeps", folded_eps_and_chain_max()});
  ts.push_back({"cov_layout_views", layout_views()});
  ts.push_back({"cov_rotary", rotary_rotate_half()});
  ts.push_back({"cov_kviews", kernel_level_views()});
  ts.push_back({"cov_routed", sliced_projection({0, 64, 80}, {64, 80, 96})});
  ts.push_back({"cov_routed_rows", sliced_norm_rows({0, 2, 6}, {2, 6, 8})});
  ts.push_back({"cov_smstats", softmax_statistics()});
  ts.push_back({"cov_attention", online_attention()});
  ts.push_back({"cov_attention_g", online_attention(DType::f16, true, true, false, 2, 32)});
  ts.push_back({"prog_rmsnorm_b1", rmsnorm_program(2, 4096, 6144)});
  ts.push_back({"prog_gqa_b1", attention_program(2, 256, 64, 4096, false)});
  // Ragged tiles: zero-filling cp.async and scalar copies, masked tensor-core fragments.
  for (RaggedCase c : {ragged_rmsnorm_n1000(), ragged_rmsnorm_k300(), ragged_log_down_h220()})
    ts.push_back({"ragged_" + c.name, std::move(c.graph)});
  // Matmuls padded to the mma step: an odd N's single last column, a ragged padded contraction.
  for (RaggedCase c : mma_padding_cases())
    if (c.name == "pad_epilogue_k40_n21" || c.name == "pad_splitkv_n521_s4")
      ts.push_back({c.name, std::move(c.graph)});
  return ts;
}

TEST(CodegenCompile, ParsesPtxasReport) {
  auto r = parse_ptxas(
      "ptxas info    : Compiling entry function 'k0' for 'sm_80'\n"
      "ptxas info    : Function properties for k0\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 96 registers, used 1 barriers, 1024 bytes smem, 376 bytes cmem[0]\n");
  ASSERT_EQ(r.size(), 1u);
  const KernelResources& k = r[{"k0", "sm_80"}];
  EXPECT_EQ(k.registers, 96);
  EXPECT_EQ(k.spill_stores, 4);
  EXPECT_EQ(k.spill_loads, 12);
  EXPECT_EQ(k.stack, 8);
  EXPECT_EQ(k.static_smem, 1024);
}

TEST(CodegenCompile, ReferenceAndCoverageGraphsCompileWithoutSpills) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty())
      << "nvcc not found (set NVCC, put it on PATH, or install the CUDA toolkit at "
         "/usr/local/cuda): the codegen compile checks need it";
  TempDir dir("compile");
  std::vector<Target> ts = targets();
  // Two compilations at a time (nvcc is single-threaded per target).
  std::vector<Outcome> outcomes(ts.size());
  for (size_t i = 0; i < ts.size(); i += 2) {
    auto a = std::async(std::launch::async, compile_one, std::cref(ts[i]), nvcc, dir.path.string());
    if (i + 1 < ts.size()) outcomes[i + 1] = compile_one(ts[i + 1], nvcc, dir.path.string());
    outcomes[i] = a.get();
  }
  std::ostringstream table;
  table << "kernel                                   arch     regs  spill(st/ld)  stack  "
           "smem(static+dynamic)\n";
  for (const Outcome& o : outcomes) {
    ASSERT_TRUE(o.error.empty()) << o.name << ": " << o.error;
    auto res = parse_ptxas(o.log);
    for (const EmittedKernel& k : o.source.kernels)
      for (const char* arch : {"sm_80", "sm_90a"}) {
        if (k.library) continue;  // a cuBLAS call, no kernel of ours
        auto it = res.find({k.name, arch});
        ASSERT_NE(it, res.end()) << o.name << ": no ptxas report for " << k.name << " on " << arch;
        const KernelResources& r = it->second;
        EXPECT_GT(r.registers, 0) << k.name << " " << arch;
        EXPECT_EQ(r.spill_stores, 0) << k.name << " " << arch << " spills registers";
        EXPECT_EQ(r.spill_loads, 0) << k.name << " " << arch << " spills registers";
        EXPECT_LE(r.static_smem + k.smem_bytes, kSmemLimit)
            << k.name << " " << arch << " uses too much shared memory";
        char line[256];
        std::snprintf(line, sizeof line, "%-40s %-7s %4d  %5lld/%-5lld  %5lld  %lld+%lld\n",
                      k.name.c_str(), arch, r.registers, static_cast<long long>(r.spill_stores),
                      static_cast<long long>(r.spill_loads), static_cast<long long>(r.stack),
                      static_cast<long long>(r.static_smem), static_cast<long long>(k.smem_bytes));
        table << line;
      }
  }
  std::cout << table.str();
}

/// A graph whose predefined matmuls are cuBLAS calls (EmitOptions::library_matmul) compiles
/// into a shared library that links with -lcublas -lcublasLt and with nothing left undefined
/// (one call has a library epilogue: cublasLtMatmul); without them the link fails (the calls
/// are real), and with the knob blas=0 the same graph links without cuBLAS. Its two products
/// are independent: both forms run the second on a side stream (docs/codegen.md, "Concurrent
/// launches"), so the runtime's streams.cuh compiles and links too.
TEST(CodegenCompile, LibraryMatmulSourceLinksCublas) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "nvcc not found (set NVCC or put it on PATH)";
  TempDir dir("compile_blas");
  auto g = parse_program(R"(input X: f16[512, 1024]
input W: bf16[2, 3, 64, 40]
input V: bf16[2, 3, 40, 24]
input U: f16[1024, 3072]
input B: f16[3072]
Y = gelu(add(matmul(X, U), B))
Z = matmul(W, V)
output Y, Z
)",
                         "blas.strata");
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (bool library : {true, false}) {
    EmitOptions opts;
    opts.library_matmul = library;
    auto src = emit_cuda_source(*g, opts);
    ASSERT_TRUE(src.ok()) << src.error().message;
    EXPECT_EQ(src->launch_streams.side_streams, 1);
    EXPECT_NE(src->code.find("fork.stream(1)"), std::string::npos);
    const std::string cu = dir.file(library ? "blas.cu" : "kernels.cu");
    write_file(cu, src->code);
    const std::string base = nvcc + " -std=c++17 -O3 -arch=sm_90a -I" + cuda_runtime_include_dir() +
                             " -shared -Xcompiler -fPIC -Xlinker --no-undefined -o " + cu + ".so " +
                             cu;
    std::string log;
    EXPECT_EQ(run_command(base + (library ? " -lcublas -lcublasLt" : ""), log), 0) << base << "\n"
                                                                                   << log;
    if (library) {
      EXPECT_NE(src->code.find("gemm_epilogue("), std::string::npos);
      EXPECT_NE(run_command(base, log), 0) << "linked without -lcublas:\n" << log;
      EXPECT_NE(log.find("cublas"), std::string::npos) << log;
    }
  }
}

/// The device part of emitted code (everything outside #ifndef __CUDACC_RTC__) compiles with
/// NVRTC, as a JIT would use it.
TEST(CodegenCompile, DevicePartCompilesWithNvrtc) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "nvcc not found: the codegen compile checks need it";
  const std::string inc = cuda_include_dir(nvcc);
  ASSERT_FALSE(inc.empty()) << "CUDA include directory not found next to " << nvcc;
  TempDir dir("nvrtc");
  write_file(dir.file("check.cc"), R"(#include <nvrtc.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string src = ss.str();
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), "graph.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) return 3;
  std::vector<std::string> opts = {std::string("--gpu-architecture=") + argv[2], "-std=c++17"};
  for (int i = 3; i < argc; ++i) opts.push_back(std::string("-I") + argv[i]);
  std::vector<const char*> o;
  for (auto& s : opts) o.push_back(s.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(o.size()), o.data());
  size_t n;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(prog, &log[0]);
  std::printf("%s\n%s\n", nvrtcGetErrorString(r), log.c_str());
  return r == NVRTC_SUCCESS ? 0 : 1;
}
)");
  std::string out;
  ASSERT_EQ(
      run_command(nvcc + " -o " + dir.file("check") + " " + dir.file("check.cc") + " -lnvrtc", out),
      0)
      << out;
  EmitOptions opts;
  opts.name = "nvrtc";
  auto src = emit_cuda(attention_graph(2, 32, 32, 512, 4, 32, 16, true), opts);
  ASSERT_TRUE(src.ok()) << src.error().message;
  write_file(dir.file("graph.cu"), *src);
  auto pre = emit_cuda(predefined_ops(), opts);
  ASSERT_TRUE(pre.ok()) << pre.error().message;
  write_file(dir.file("pre.cu"), *pre);
  // The online softmax with a transposed key tile, and max reductions with shared atomics.
  auto online =
      emit_cuda(fuse_thread_graphs(online_attention(DType::f16, true, true, false, 2, 32)), opts);
  ASSERT_TRUE(online.ok()) << online.error().message;
  write_file(dir.file("online.cu"), *online);
  auto maxima = emit_cuda(looped_max_eps(), opts);
  ASSERT_TRUE(maxima.ok()) << maxima.error().message;
  write_file(dir.file("maxima.cu"), *maxima);
  for (const char* f : {"graph.cu", "pre.cu", "online.cu", "maxima.cu"})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      EXPECT_EQ(run_command(dir.file("check") + " " + dir.file(f) + " " + arch + " " +
                                cuda_runtime_include_dir() + " " + inc,
                            out),
                0)
          << f << " " << arch << ":\n"
          << out;
    }
}

}  // namespace
}  // namespace strata::testing
