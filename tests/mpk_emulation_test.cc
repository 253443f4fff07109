// The megakernel's device task functions (runtime/mpk/mpk_tasks.cuh) on the CPU emulator of
// runtime/strata_rt/emulate.h, against the float64 task executor (docs/megakernel.md,
// "Testing"): runtime/mpk/emulate_ops.cc runs a compiled step op by op, every task a block of
// 256 emulated threads; the logits, the new cache entries and the tokens must match within f16
// tolerance. With generated ops the emulator includes the compilation's generated header, so
// their tasks run strata's generated task entries through its dispatch. Also compiles the
// persistent kernel (runtime/mpk/megakernel.cu) with nvcc for sm_90a (device code only, ptxas at
// -O0 to keep the test short; scripts/gpu-mpk.sh builds -O3).
// Needs the CUDA toolkit's headers and nvcc (label nvcc), no GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "strata/mpk/generated_ops.h"
#include "strata/mpk/task_exec.h"
#include "strata/mpk/task_graph.h"
#include "support/cuda_tools.h"
#include "support/mpk_graphs.h"

namespace strata::mpk {
namespace {

namespace fs = std::filesystem;
using strata::testing::cuda_include_dir;
using strata::testing::f16_bits_to_f32;
using strata::testing::f32_to_f16_bits;
using strata::testing::find_nvcc;
using strata::testing::run_command;

fs::path work_dir() {
  fs::path d = fs::path(::testing::TempDir()) / ("mpk_emu_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// Compiles runtime/mpk/emulate_ops.cc once per test process, and once per generated header
// (`header`: a file written by generated_header, included with STRATA_MPK_GENERATED_HEADER, so
// MPK_GENERATED tasks run the generated task entries through its dispatch).
std::string emulator(const std::string& header = "") {
  static std::map<std::string, std::string> built;
  const std::string& key = header;
  if (auto it = built.find(key); it != built.end()) return it->second;
  const std::string nvcc = find_nvcc(), inc = cuda_include_dir(nvcc);
  if (inc.empty()) return std::string();
  const char* cxx = std::getenv("CXX");
  const std::string out = (work_dir() / ("emulate_ops" + std::to_string(built.size()))).string();
  std::string log;
  const std::string cmd =
      std::string(cxx && *cxx ? cxx : "c++") +
      " -std=c++20 -O1 -w -DSTRATA_RT_EMULATE -x c++ -I include -I runtime -I" + inc +
      (header.empty() ? "" : " '-DSTRATA_MPK_GENERATED_HEADER=\"" + header + "\"'") +
      " runtime/mpk/emulate_ops.cc -o " + out;
  if (run_command(cmd, log) != 0) {
    ADD_FAILURE() << cmd << "\n" << log;
    return built[key] = std::string();
  }
  return built[key] = out;
}

struct Case {
  ModelConfig model;
  CompileOptions options;
  int64_t pos;
};

// Rounds every weight and the filled cache entries to f16 (what the device stores), leaves the
// rotary frequencies in f32.
void round_to_device(const TaskGraph& g, ModelBuffers& mb, int64_t pos, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0, 1);
  const ModelConfig& m = g.model;
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    const TensorInfo& T = g.tensors[g.buffers[i]];
    std::vector<double>& v = mb.data[i];
    if (T.storage == Storage::State) {
      for (int64_t r = 0; r < m.layers * m.batch * m.kv_heads; ++r)
        for (int64_t j = 0; j < pos * m.head_dim; ++j) v[r * m.max_kv * m.head_dim + j] = n(rng);
    }
    for (double& x : v)
      x = T.dtype == DType::F16 ? f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(x)))
                                : static_cast<double>(static_cast<float>(x));
  }
}

void check_case(const Case& c) {
  auto compiled = compile_task_graph(c.model, c.options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const TaskGraph& g = *compiled;
  const ModelConfig& m = g.model;
  // With generated ops, the emulator is built with the header of this compilation.
  std::string header;
  int64_t generated_smem = 0;
  if (c.options.generated) ASSERT_FALSE(g.functions.empty()) << "no generated ops";
  if (!g.functions.empty()) {
    header = (work_dir() / ("generated" +
                            std::to_string(std::hash<std::string>{}(generated_header(g))) + ".cuh"))
                 .string();
    std::ofstream(header) << generated_header(g);
    generated_smem = generated_smem_bytes(*c.options.generated);
  }
  const std::string prog = emulator(header);
  ASSERT_FALSE(prog.empty()) << "the emulator did not build (CUDA headers needed)";
  ModelBuffers mb = random_buffers(g, 7);
  round_to_device(g, mb, c.pos, 11);
  ModelBuffers ref_buf = mb;
  std::vector<int64_t> tokens;
  for (int64_t b = 0; b < m.batch; ++b) tokens.push_back((5 * b + 1) % m.vocab);
  const std::vector<double> want = reference_step(g, ref_buf, tokens, c.pos);

  // The emulator's input.
  const fs::path dir = work_dir(), in = dir / "in.bin", out = dir / "out.bin";
  {
    std::ofstream f(in, std::ios::binary);
    auto put = [&](const void* p, size_t n) { f.write(static_cast<const char*>(p), n); };
    const int64_t max_k = std::max({m.hidden, m.intermediate, m.q_width()});
    // The matmul rows, the argmax, the generated entries; the emulator adds what attention needs.
    const int64_t smem =
        std::max<int64_t>({m.batch * ((max_k + 7) / 8 * 8) * 2 + 64, 256 * 8, generated_smem});
    const int64_t h[15] = {static_cast<int64_t>(g.ops.size()),
                           static_cast<int64_t>(g.tasks.size()),
                           static_cast<int64_t>(g.buffers.size()),
                           g.workspace_bytes,
                           smem,
                           c.pos,
                           m.batch,
                           m.hidden,
                           m.heads,
                           m.kv_heads,
                           m.head_dim,
                           m.intermediate,
                           m.vocab,
                           m.max_kv,
                           m.layers};
    put(h, sizeof h);
    put(&m.eps, sizeof(double));
    for (size_t o = 0; o < g.ops.size(); ++o) {
      const std::vector<int64_t> r = op_record(g, static_cast<int>(o));
      put(r.data(), r.size() * 8);
    }
    for (const TaskInfo& t : g.tasks) {
      const int32_t r[MPK_TASK_FIELDS] = {t.op, t.i0, t.i1, t.i2, 0, 0, 0, 0};
      put(r, sizeof r);
    }
    for (int64_t t : tokens) {
      const int32_t v = static_cast<int32_t>(t);
      put(&v, 4);
    }
    for (size_t i = 0; i < g.buffers.size(); ++i) {
      const TensorInfo& T = g.tensors[g.buffers[i]];
      const int64_t bytes = T.bytes();
      put(&bytes, 8);
      for (double x : mb.data[i]) {
        if (T.dtype == DType::F16) {
          const unsigned short b = f32_to_f16_bits(static_cast<float>(x));
          put(&b, 2);
        } else {
          const float v = static_cast<float>(x);
          put(&v, 4);
        }
      }
    }
  }
  std::string log;
  ASSERT_EQ(run_command(prog + " " + in.string() + " " + out.string(), log), 0) << log;
  std::ifstream f(out, std::ios::binary);
  std::vector<char> ws(g.workspace_bytes);
  f.read(ws.data(), ws.size());
  std::vector<int32_t> got_tokens(m.batch);
  f.read(reinterpret_cast<char*>(got_tokens.data()), m.batch * 4);
  std::vector<std::vector<unsigned short>> bufs;
  for (int t : g.buffers) {
    std::vector<unsigned short> b(g.tensors[t].bytes() / 2);
    f.read(reinterpret_cast<char*>(b.data()), b.size() * 2);
    bufs.push_back(std::move(b));
  }
  ASSERT_TRUE(f.good());

  // Logits within f16 tolerance of the float64 model.
  int logits = -1;
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i].name == "logits") logits = static_cast<int>(i);
  ASSERT_GE(logits, 0);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    float v;
    std::memcpy(&v, ws.data() + g.tensors[logits].offset + 4 * i, 4);
    ASSERT_TRUE(std::isfinite(v)) << "logit " << i;
    worst = std::max(worst, std::abs(v - want[i]) / (1 + std::abs(want[i])));
  }
  EXPECT_LT(worst, 2e-2) << "largest relative logit error";
  // Tokens: the float64 argmax, unless the top two logits are within the tolerance.
  for (int64_t b = 0; b < m.batch; ++b) {
    std::vector<double> row(want.begin() + b * m.vocab, want.begin() + (b + 1) * m.vocab);
    const int64_t best = argmax_rows(row, m.vocab)[0];
    double second = -1e300;
    for (int64_t i = 0; i < m.vocab; ++i)
      if (i != best) second = std::max(second, row[i]);
    if (row[best] - second > 0.05) EXPECT_EQ(got_tokens[b], best) << "row " << b;
  }
  // The new cache entries.
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    if (g.tensors[g.buffers[i]].storage != Storage::State) continue;
    for (int64_t r = 0; r < m.layers * m.batch * m.kv_heads; ++r)
      for (int64_t d = 0; d < m.head_dim; ++d) {
        const int64_t at = (r * m.max_kv + c.pos) * m.head_dim + d;
        EXPECT_NEAR(f16_bits_to_f32(bufs[i][at]), ref_buf.data[i][at],
                    2e-2 * (1 + std::abs(ref_buf.data[i][at])))
            << g.tensors[g.buffers[i]].name << " row " << r << " d " << d;
      }
  }
}

ModelConfig small(bool qk_norm, int64_t batch, int64_t hidden, int64_t head_dim) {
  ModelConfig m;
  m.layers = 2;
  m.hidden = hidden;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = head_dim;
  m.intermediate = 96;
  m.vocab = 101;
  m.qk_norm = qk_norm;
  m.max_kv = 300;
  m.batch = batch;
  return m;
}

TEST(MpkEmulation, TaskFunctionsMatchTheFloat64Model) {
  CompileOptions o;
  o.workers = 6;
  o.max_tile_bytes = 64 * 2 * 16;
  // Vector path (K a multiple of 8), batch 1, a cache longer than one attention sub-block.
  check_case({small(false, 1, 64, 16), o, 270});
  // qk-norm, batch 3, head dim 32, several chunks, some empty (position 2 of 6 chunks); large
  // tiles: up to 7 column tiles of 16 per task (the last one partial), one warp each.
  o.attn_chunks = 6;
  o.max_tile_bytes = 1 << 19;
  check_case({small(true, 3, 64, 32), o, 2});
  // The full batch of 8 and more column tiles than warps (13 gated tiles of the MLP, 19 of the
  // LM head: warps take several), K a multiple of 8 but not of the 32-k chunk (hidden 72).
  ModelConfig big = small(true, 8, 72, 16);
  big.intermediate = 200;
  big.vocab = 301;
  check_case({big, o, 5});
  // Batch 5, K not a multiple of 8 in the QKV, gated MLP and LM head products (hidden 44) and
  // the down projection (intermediate 90).
  ModelConfig odd = small(false, 5, 44, 16);
  odd.intermediate = 90;
  check_case({odd, o, 3});
  // K not a multiple of 8 at batch 1 (the CUDA-core path's element loads), position 0.
  o.attn_chunks = 0;
  o.max_tile_bytes = 64 * 2 * 16;
  check_case({small(true, 1, 36, 8), o, 0});
  // Attention's lane layout with a head dim whose 16-byte vectors (3) are not a power of two,
  // more q heads per kv head (6) than one cross-warp reduction takes, two sub-blocks per chunk.
  ModelConfig wide = small(false, 2, 48, 24);
  wide.heads = 12;
  wide.kv_heads = 2;
  o.attn_chunks = 2;
  check_case({wide, o, 280});
}

// The matmul-family ops from generated μGraphs (docs/megakernel.md, "Generated tasks"): their
// tasks run the task entries of the compilation's generated header through its dispatch, the
// other tasks the hand-written functions, op by op, against the float64 model.
TEST(MpkEmulation, GeneratedTaskEntriesMatchTheFloat64Model) {
  CompileOptions o;
  o.workers = 6;
  // Given μGraphs with ragged column tiles (QKV 64 + 2·32 = 128 columns and the MLP's 96 in
  // tiles of 24 and 40), qk-norm, batch 2, a cache longer than one attention sub-block.
  ModelConfig m = small(true, 2, 64, 16);
  o.generated = testing::mpk_generated_set(m, 40);
  ASSERT_EQ(o.generated->size(), 4u);
  check_case({m, o, 261});
  // K not a multiple of 8 (hidden 36: the entries' scalar copies), batch 1, position 0.
  m = small(false, 1, 36, 8);
  o.generated = testing::mpk_generated_set(m, 24);
  check_case({m, o, 0});
}

TEST(MpkEmulation, SearchedTaskEntriesMatchTheFloat64Model) {
  // The four ops searched at these shapes (a few seconds at most; no result cache), as
  // `strata mpk compile --generated all` does.
  const ModelConfig m = small(false, 3, 64, 16);
  auto set = std::make_shared<GeneratedSet>();
  SearchConfig sc;
  sc.with_time_limit(20).with_cache(false).with_quiet(true).with_threads(2);
  for (const std::string& op : generated_op_names()) {
    auto gg = search_generated(m, op, sc);
    ASSERT_TRUE(gg.ok()) << gg.error().message;
    set->emplace(op, std::move(*gg));
  }
  CompileOptions o;
  o.workers = 6;
  o.generated = set;
  check_case({m, o, 5});
}

TEST(MpkEmulation, PersistentKernelCompilesWithNvcc) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "nvcc not found";
  const std::string out = (work_dir() / "megakernel.cubin").string();
  std::string log;
  const std::string cmd = nvcc +
                          " -O1 -arch=sm_90a -std=c++17 -shared -Xcompiler -fPIC -I include"
                          " -I runtime runtime/mpk/megakernel.cu -o " +
                          out;
  EXPECT_EQ(run_command(cmd, log), 0) << cmd << "\n" << log;
}

}  // namespace
}  // namespace strata::mpk
