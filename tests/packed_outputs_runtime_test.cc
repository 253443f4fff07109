// The callers' side of packed outputs (docs/gpu-runtime.md, "Packed outputs"): the runtime
// reads where a library places its outputs (strata_output_base / _offset / _stride / _alloc),
// checks the placement, lays one launch's outputs out packed or each alone (place_outputs) and
// reads them back through their strides (gather_output). The last test runs generated code for
// a small fused QKV projection through CompiledGraph on the CPU emulator — the generated
// source compiled as a host shared library, loaded as the runtime loads a compiled graph — with
// its outputs packed (the fast path: one product written in place) and each alone (the
// fallback copies), both against the float64 interpreter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"
#include "strata/gpu/output_buffers.h"
#include "strata/gpu/runtime_api.h"
#include "strata/interp/interpreter.h"
#include "strata/ir/dtype_codec.h"
#include "support/emulation.h"
#include "support/parse.h"

namespace strata::testing {
namespace {

TensorSignature output(const std::string& name, Shape shape, int base = -1, int64_t offset = 0,
                       std::vector<int64_t> strides = {}, int64_t alloc = -1) {
  TensorSignature s;
  s.name = name;
  s.shape = shape;
  s.base = base;
  s.offset = offset;
  s.strides = std::move(strides);
  s.alloc = alloc;
  return s;
}

/// Q, K, V: the column blocks 0–64, 64–80 and 80–96 of a [64, 96] product, packed in Q's
/// allocation as the generated code declares them.
std::vector<TensorSignature> packed_qkv() {
  return {output("Q", Shape{64, 64}, 0, 0, {96, 1}, 64 * 96),
          output("K", Shape{64, 16}, 0, 64, {96, 1}, 0),
          output("V", Shape{64, 16}, 0, 80, {96, 1}, 0)};
}

std::string error_of(const std::vector<TensorSignature>& outs) {
  Status st = check_placement(outs);
  return st.ok() ? "" : st.error().message;
}

/// A fused QKV projection whose Q, K and V (64, 16 and 16 columns) are packed outputs.
const char* const kQkvProgram = R"(input X: f16[64, 128]
input W: f16[128, 96]
QKV = matmul(X, W)
Q = slice(QKV, -1, 0, 64)
K = slice(QKV, -1, 64, 80)
V = slice(QKV, -1, 80, 96)
output Q, K, V
)";

TEST(PackedOutputsRuntime, PlacementIsChecked) {
  EXPECT_EQ(error_of(packed_qkv()), "");
  EXPECT_EQ(error_of({output("O", Shape{4, 8})}), "");  // dense defaults

  auto outs = packed_qkv();
  outs[2].base = 3;
  EXPECT_NE(error_of(outs).find("output 2 (V): base 3 is not an output"), std::string::npos)
      << error_of(outs);
  outs = packed_qkv();
  outs[0].base = 1;
  EXPECT_NE(error_of(outs).find("output 0 (Q): its base, output 1, lies in another output's "
                                "allocation"),
            std::string::npos)
      << error_of(outs);
  outs = packed_qkv();
  outs[1].alloc = 64 * 16;  // inside Q's allocation, yet allocating
  EXPECT_NE(error_of(outs).find("output 1 (K): lies in output 0's allocation"), std::string::npos);
  outs = packed_qkv();
  outs[0].alloc = 64 * 96 - 1;  // V's last element is the allocation's last: one short
  EXPECT_NE(error_of(outs).find("output 2 (V): reaches element 6144 of output 0's allocation "
                                "of 6143"),
            std::string::npos)
      << error_of(outs);
  outs = packed_qkv();
  outs[1].strides = {96};
  EXPECT_NE(error_of(outs).find("1 strides for rank 2"), std::string::npos);
  outs = packed_qkv();
  outs[1].dtype = DType::f32;
  EXPECT_NE(error_of(outs).find("dtype differs"), std::string::npos);
  outs = packed_qkv();
  outs[2].offset = -1;
  EXPECT_NE(error_of(outs).find("negative offset"), std::string::npos);
}

TEST(PackedOutputsRuntime, PlacesOneLaunchsOutputs) {
  std::vector<TensorSignature> outs = packed_qkv();
  outs.push_back(output("O", Shape{3, 5}));  // dense, alone, after the packed tensor
  auto packed = place_outputs(outs, 256);
  ASSERT_TRUE(packed.ok()) << packed.error().message;
  EXPECT_TRUE(packed->packed);
  // Q at 0 with the whole product (12288 bytes), K and V inside it, O after it.
  EXPECT_EQ(packed->pointer, (std::vector<int64_t>{0, 128, 160, 12288}));
  EXPECT_EQ(packed->bytes, 12288 + 256);

  auto alone = place_outputs(outs, 256, false);
  ASSERT_TRUE(alone.ok());
  EXPECT_FALSE(alone->packed);
  EXPECT_EQ(alone->pointer, (std::vector<int64_t>{0, 8192, 10240, 12288}));
  EXPECT_EQ(alone->bytes, 12288 + 256);

  outs[1].alloc = 5;
  EXPECT_FALSE(place_outputs(outs, 256).ok());          // a placement the ABI does not allow
  EXPECT_TRUE(place_outputs(outs, 256, false).ok());    // not read when placed alone
  EXPECT_FALSE(place_outputs(packed_qkv(), 100).ok());  // not a power of two
}

TEST(PackedOutputsRuntime, GathersThroughStrides) {
  // A [2, 6] f16 product whose elements are their positions; K = its columns 4–5.
  std::vector<double> product(12);
  for (int i = 0; i < 12; ++i) product[i] = i;
  const std::vector<uint8_t> bytes = encode_elements(DType::f16, product);
  TensorSignature k = output("K", Shape{2, 2}, 0, 4, {6, 1}, 0);
  std::vector<uint8_t> got = gather_output(k, bytes.data() + 4 * 2, true);
  EXPECT_EQ(decode_elements(DType::f16, got.data(), 4), (std::vector<double>{4, 5, 10, 11}));
  // Placed alone it is dense at its pointer.
  got = gather_output(k, bytes.data() + 4 * 2, false);
  EXPECT_EQ(decode_elements(DType::f16, got.data(), 4), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_TRUE(output("O", Shape{2, 3}).dense());
  EXPECT_FALSE(k.dense());
  EXPECT_EQ(k.element_strides(), (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(output("O", Shape{2, 3, 4}).element_strides(), (std::vector<int64_t>{12, 4, 1}));
}

/// Compiles `source` with the host compiler into a shared library (against the emulator when
/// `emulate`) in `dir`; returns its path, or "" with a test failure.
std::string host_library(const TempDir& dir, const std::string& name, const std::string& source,
                         bool emulate) {
  const std::string inc = cuda_include_dir(find_nvcc());
  if (inc.empty()) {
    ADD_FAILURE() << "CUDA headers (cuda_fp16.h) not found: install the CUDA toolkit or set NVCC";
    return "";
  }
  write_file(dir.file(name + ".cu"), source);
  const char* cxx = std::getenv("CXX");
  const std::string cmd =
      std::string(cxx && *cxx ? cxx : "c++") + " -std=c++20 -O1 -w -shared -fPIC" +
      (emulate ? " -DSTRATA_RT_EMULATE" : "") + " -x c++ -I" + cuda_runtime_include_dir() + " -I" +
      inc + " " + dir.file(name + ".cu") + " -o " + dir.file(name + ".so");
  std::string log;
  if (run_command(cmd, log) != 0) {
    ADD_FAILURE() << "compiling " << name << " failed:\n" << cmd << "\n" << log;
    return "";
  }
  return dir.file(name + ".so");
}

/// A fake library of one [2, 6] f16 output with the signature functions and, per `placement`,
/// the placement functions (each a C++ body returning for (i) or (i, d)).
std::string fake_source(const std::vector<std::string>& placement) {
  std::string s = R"(extern "C" {
int strata_launch(const void* const*, void* const*, void*, void*) { return 0; }
unsigned long long strata_workspace_bytes() { return 0; }
int strata_num_inputs() { return 0; }
int strata_num_outputs() { return 1; }
int strata_input_rank(int) { return -1; }
long long strata_input_dim(int, int) { return -1; }
int strata_input_dtype(int) { return -1; }
int strata_output_rank(int) { return 2; }
long long strata_output_dim(int, int d) { return d == 0 ? 2 : 6; }
int strata_output_dtype(int) { return 0; }
)";
  const char* heads[] = {"int strata_output_base(int i)", "long long strata_output_offset(int i)",
                         "long long strata_output_stride(int i, int d)",
                         "long long strata_output_alloc(int i)"};
  for (size_t f = 0; f < placement.size(); ++f)
    if (!placement[f].empty()) s += std::string(heads[f]) + " { " + placement[f] + " }\n";
  return s + "}\n";
}

Result<CompiledGraph> load_fake(const TempDir& dir, const std::string& name,
                                const std::vector<std::string>& placement) {
  CompiledBinary bin;
  bin.path = host_library(dir, name, fake_source(placement), false);
  return CompiledGraph::from_binary(bin, nullptr, false);
}

TEST(PackedOutputsRuntime, ReadsThePlacementALibraryDeclares) {
  TempDir dir("packed_fake");
  // A library from before packed outputs: every output dense.
  auto old = load_fake(dir, "old", {});
  ASSERT_TRUE(old.ok()) << old.error().message;
  ASSERT_EQ(old->outputs().size(), 1u);
  EXPECT_TRUE(old->outputs()[0].dense());
  EXPECT_EQ(old->outputs()[0].alloc_bytes(), 24);

  // The dense placement, declared.
  auto dense =
      load_fake(dir, "dense", {"return 0;", "return 0;", "return d == 0 ? 6 : 1;", "return 12;"});
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  EXPECT_TRUE(dense->outputs()[0].dense());
  EXPECT_EQ(dense->outputs()[0].base, 0);

  // A wider allocation with the output's rows 8 elements apart.
  auto wide =
      load_fake(dir, "wide", {"return 0;", "return 0;", "return d == 0 ? 8 : 1;", "return 14;"});
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  EXPECT_FALSE(wide->outputs()[0].dense());
  EXPECT_EQ(wide->outputs()[0].strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(wide->outputs()[0].alloc_bytes(), 28);

  auto partial = load_fake(dir, "partial", {"return 0;", "return 0;", "return 1;", ""});
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("one of strata_output_base, _offset, _stride, _alloc "
                                         "is missing"),
            std::string::npos)
      << partial.error().message;
  auto short_alloc =
      load_fake(dir, "short", {"return 0;", "return 0;", "return d == 0 ? 8 : 1;", "return 12;"});
  ASSERT_FALSE(short_alloc.ok());
  EXPECT_NE(short_alloc.error().message.find("reaches element 14 of output 0's allocation of 12"),
            std::string::npos)
      << short_alloc.error().message;
  auto bad = load_fake(dir, "bad", {"return -1;", "return 0;", "return 1;", "return 12;"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("output placement 0: base -1"), std::string::npos)
      << bad.error().message;
}

/// Runs `cg` once on host memory as check_outputs runs it on the device: outputs placed by
/// place_outputs (packed or alone) in one allocation poisoned with 0xFF bytes, read back by
/// gather_output. Returns the outputs' values, row-major.
std::vector<std::vector<double>> run_on_host(CompiledGraph& cg, const KernelGraph& g,
                                             const std::vector<HostTensor>& inputs, bool packed) {
  std::vector<std::vector<uint8_t>> in_bytes;
  std::vector<const void*> in_ptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in_bytes.push_back(encode_elements(g.tensor(g.inputs()[i]).dtype, inputs[i].data));
    in_ptr.push_back(in_bytes.back().data());
  }
  auto placed = place_outputs(cg.outputs(), 256, packed);
  EXPECT_TRUE(placed.ok()) << placed.error().message;
  if (!placed.ok()) return {};
  std::vector<uint8_t> out_bytes(placed->bytes, 0xFF);
  std::vector<void*> out_ptr;
  for (int64_t at : placed->pointer) out_ptr.push_back(out_bytes.data() + at);
  std::vector<uint8_t> workspace(cg.workspace_bytes() + 256, 0xFF);
  Status st = cg.run(in_ptr.data(), out_ptr.data(), workspace.data(), nullptr);
  EXPECT_TRUE(st.ok()) << st.error().message;
  std::vector<std::vector<double>> outs;
  for (size_t o = 0; o < cg.outputs().size(); ++o) {
    const TensorSignature& s = cg.outputs()[o];
    std::vector<uint8_t> bytes = gather_output(s, out_bytes.data() + placed->pointer[o], packed);
    outs.push_back(decode_elements(s.dtype, bytes.data(), s.shape.numel()));
  }
  return outs;
}

TEST(PackedOutputsRuntime, EmulatedQkvMatchesTheInterpreterPackedAndAlone) {
  const KernelGraph g = parse(kQkvProgram);
  const std::vector<HostTensor> inputs = rounded_random_inputs(g, 7, 0.5);
  auto ref = run_reference(g, inputs);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  TempDir dir("packed_qkv");
  // The product as a cuBLAS call (the emulator's strided-batched GEMM) and as a generated kernel.
  for (const std::string knobs : {"", "blas=0"}) {
    SCOPED_TRACE("knobs \"" + knobs + "\"");
    EmitOptions options;
    ASSERT_TRUE(apply_emit_knobs(knobs, options).ok());
    auto src = emit_cuda(g, options);
    ASSERT_TRUE(src.ok()) << src.error().message;
    CompiledBinary bin;
    bin.path = host_library(dir, knobs.empty() ? "blas" : "kernel", *src, true);
    ASSERT_FALSE(bin.path.empty());
    auto cg = CompiledGraph::from_binary(bin, &g, false);
    ASSERT_TRUE(cg.ok()) << cg.error().message;
    // The signature carries the graph's names and the library's placement.
    const auto& outs = cg->outputs();
    ASSERT_EQ(outs.size(), 3u);
    EXPECT_EQ(outs[1].name, "K");
    EXPECT_EQ(outs[0].base, 0);
    EXPECT_EQ(outs[0].alloc, 64 * 96);
    EXPECT_EQ(outs[1].base, 0);
    EXPECT_EQ(outs[1].offset, 64);
    EXPECT_EQ(outs[2].offset, 80);
    EXPECT_EQ(outs[2].strides, (std::vector<int64_t>{96, 1}));
    EXPECT_EQ(outs[2].alloc, 0);
    for (bool packed : {true, false}) {
      SCOPED_TRACE(packed ? "packed" : "alone");
      std::vector<std::vector<double>> got = run_on_host(*cg, g, inputs, packed);
      ASSERT_EQ(got.size(), 3u);
      for (int o = 0; o < 3; ++o) {
        HostTensor out((*ref)[o].shape);
        out.data = got[o];
        const Comparison c = compare(out, (*ref)[o]);
        EXPECT_EQ(c.bad, 0) << "output " << o << ": rel L2 " << c.rel_l2;
        EXPECT_LT(c.rel_l2, 1e-2) << "output " << o;
      }
    }
  }
}

// The emulation harness (support/emulation.h) runs a source that packs outputs both ways, as
// every emulation test does through check_emulation: it must see the packing (the strata-meta
// "layout" objects) and place the outputs as declared; a source that packs none runs alone only.
TEST(PackedOutputsRuntime, TheEmulationHarnessRunsPackingSourcesPacked) {
  const KernelGraph qkv = parse(kQkvProgram);
  EmulatedGraph packing(qkv, {}, "harness_qkv");
  ASSERT_TRUE(packing.ok()) << packing.log();
  EXPECT_TRUE(packing.packs());
  const std::vector<HostTensor> inputs = rounded_random_inputs(qkv, 3, 0.5);
  auto ref = run_reference(qkv, inputs);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  std::vector<HostTensor> out;
  ASSERT_TRUE(packing.run(inputs, out, false, true)) << packing.log();
  ASSERT_EQ(out.size(), 3u);
  for (int o = 0; o < 3; ++o) EXPECT_LT(compare(out[o], (*ref)[o]).rel_l2, 1e-2) << o;

  const KernelGraph whole = parse(
      "input X: f16[64, 128]\ninput W: f16[128, 96]\nY = matmul(X, W)\noutput Y\n");
  EmulatedGraph dense(whole, {}, "harness_dense");
  ASSERT_TRUE(dense.ok()) << dense.log();
  EXPECT_FALSE(dense.packs());
}

}  // namespace
}  // namespace strata::testing
