// Predefined matmuls as cuBLAS calls (EmitOptions::library_matmul, docs/codegen.md "Predefined
// matmuls through cuBLAS"): which matmuls become calls, the emitted call and host API, the
// knob and flag that keep the generated kernels, and the results on the CPU emulator (whose
// strata_rt::host::gemm_strided_batched takes cuBLAS's column-major arguments and checks them as
// cuBLAS does) against the float64 interpreter: batched, bf16, f32 results, odd extents (M = 1
// against 50257 columns, M = 513), and the f32 fallback to the generated kernel.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "strata/codegen/emit_knobs.h"
#include "support/emulation_check.h"
#include "support/parse.h"

namespace strata::testing {
namespace {

EmitOptions knobs(const std::string& spec) {
  EmitOptions o;
  Status st = apply_emit_knobs(spec, o);
  EXPECT_TRUE(st.ok()) << spec;
  return o;
}

int library_calls(const EmittedSource& s) {
  int n = 0;
  for (const EmittedKernel& k : s.kernels) n += k.library && k.op == "matmul";
  return n;
}

/// Emits `g` with `options`, checks the source contains every `expect` and none of `absent`,
/// runs it on the emulator (threads in order and reversed) and compares every output with the
/// float64 interpreter at a relative L2 error below 1e-2.
void check_emulated(const std::string& name, const KernelGraph& g, const EmitOptions& options,
                    const std::vector<std::string>& expect,
                    const std::vector<std::string>& absent = {}) {
  check_emulation(g, {.name = name,
                      .options = options,
                      .expect = expect,
                      .absent = absent,
                      .seed = 77,
                      .rtol = 0,
                      .rel_l2 = 1e-2});
}

const char* kPrefill = R"(input X: f16[64, 128]
input W: f16[128, 96]
input R: f16[64, 96]
Y = matmul(X, W)
O = add(Y, R)
output O
)";

TEST(LibraryMatmul, F16AndBf16MatmulsBecomeCublasCalls) {
  const KernelGraph g = parse(kPrefill);
  auto src = emit_cuda_source(g);
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ(library_calls(*src), 1);
  EXPECT_NE(src->code.find("#include \"strata_rt/blas.cuh\""), std::string::npos);
  EXPECT_NE(src->code.find("\"cublas\":true"), std::string::npos);
  EXPECT_NE(src->code.find("-lcublas"), std::string::npos);
  EXPECT_NE(src->code.find("err = strata_rt::host::blas_init();"), std::string::npos);
  // Row-major C = A·B as cuBLAS's C^T = B^T·A^T: m = N, n = M, k = K, B first (ld N), A (ld K).
  EXPECT_NE(src->code.find("gemm_strided_batched(false, false, 96, 64, 128, t1, "
                           "strata_rt::host::kBlasF16, 96, 12288LL, t0, strata_rt::host::kBlasF16, "
                           "128, 8192LL, t3, strata_rt::host::kBlasF16, 96, 6144LL, 1, stream)"),
            std::string::npos)
      << src->code;
  // Only the add is a kernel.
  int kernels = 0;
  for (const EmittedKernel& k : src->kernels) kernels += !k.library;
  EXPECT_EQ(kernels, 1);

  // bf16 likewise; a graph without matmuls neither includes nor links cuBLAS.
  std::string bf = kPrefill;
  for (size_t p = bf.find("f16["); p != std::string::npos; p = bf.find("f16[", p + 5))
    bf.replace(p, 3, "bf16");
  auto bsrc = emit_cuda_source(parse(bf));
  ASSERT_TRUE(bsrc.ok()) << bsrc.error().message;
  EXPECT_EQ(library_calls(*bsrc), 1);
  EXPECT_NE(bsrc->code.find("strata_rt::host::kBlasBf16"), std::string::npos);
  auto plain = emit_cuda_source(parse("input X: f16[8, 8]\nY = exp(X)\noutput Y\n"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->code.find("blas.cuh"), std::string::npos);
  EXPECT_NE(plain->code.find("\"cublas\":false"), std::string::npos);
}

TEST(LibraryMatmul, KnobFlagF32AndTaskEntriesKeepGeneratedKernels) {
  const KernelGraph g = parse(kPrefill);
  // blas=0: the tiled block graph, as before.
  auto off = emit_cuda_source(g, knobs("blas=0"));
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(library_calls(*off), 0);
  EXPECT_EQ(off->code.find("blas.cuh"), std::string::npos);
  EXPECT_NE(off->code.find("matmul lowered to a tiled block graph"), std::string::npos);
  EXPECT_EQ(format_emit_knobs(knobs("blas=0")), "blas=0");
  // f32 operands, and f16 against f32, are generated kernels.
  for (const char* text : {"input A: f32[16, 32]\ninput B: f32[32, 24]\nC = matmul(A, B)\n"
                           "output C\n",
                           "input A: f16[16, 32]\ninput B: f32[32, 24]\nC = matmul(A, B)\n"
                           "output C\n"}) {
    auto s = emit_cuda_source(parse(text));
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(library_calls(*s), 0) << text;
    EXPECT_EQ(s->code.find("blas.cuh"), std::string::npos) << text;
  }
  // A megakernel's task entries cannot call a library: the matmul stays a lowered kernel.
  EmitOptions tasks;
  tasks.task_entry = TaskEntryForm::Beside;
  auto t = emit_cuda_source(parse("input A: f16[64, 128]\ninput B: f16[128, 96]\n"
                                  "C = matmul(A, B)\noutput C\n"),
                            tasks);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(library_calls(*t), 0);
  EXPECT_NE(t->code.find("_task("), std::string::npos);
}

TEST(LibraryMatmul, CliFlagNoLibraryMatmul) {
  const char* bin = std::getenv("STRATA_BIN");
  const std::string tool = bin && *bin ? bin : "build/strata";
  TempDir dir("blas_cli");
  write_file(dir.file("p.strata"), kPrefill);
  std::string out;
  ASSERT_EQ(run_command(tool + " emit " + dir.file("p.strata") + " -o " + dir.file("on.cu"), out),
            0)
      << out;
  EXPECT_NE(out.find("matmul as a library call (cublasGemmStridedBatchedEx)"), std::string::npos)
      << out;
  ASSERT_EQ(run_command(tool + " emit " + dir.file("p.strata") + " --no-library-matmul -o " +
                            dir.file("off.cu"),
                        out),
            0)
      << out;
  std::ifstream on(dir.file("on.cu")), off(dir.file("off.cu"));
  const std::string on_text((std::istreambuf_iterator<char>(on)), {});
  const std::string off_text((std::istreambuf_iterator<char>(off)), {});
  EXPECT_NE(on_text.find("gemm_strided_batched("), std::string::npos);
  EXPECT_EQ(off_text.find("gemm_strided_batched("), std::string::npos);
  EXPECT_NE(off_text.find("matmul lowered to a tiled block graph"), std::string::npos);
}

TEST(LibraryMatmulEmulation, PrefillShapeBothPaths) {
  const KernelGraph g = parse(kPrefill);
  check_emulated("blas_prefill", g, {}, {"gemm_strided_batched("});
  check_emulated("blas_prefill_off", g, knobs("blas=0"), {}, {"gemm_strided_batched("});
}

TEST(LibraryMatmulEmulation, BatchedRank4AndRank3) {
  const KernelGraph g = parse(R"(input A: f16[2, 3, 17, 40]
input B: f16[2, 3, 40, 24]
input P: f16[5, 33, 16]
input Q: f16[5, 16, 8]
C = matmul(A, B)
D = matmul(P, Q)
output C
output D
)");
  // Six [17, 40]·[40, 24] products and five [33, 16]·[16, 8] ones, the second call on a side
  // stream with its own handle (docs/codegen.md, "Concurrent launches").
  check_emulated("blas_batched", g, {},
                 {"gemm_strided_batched(false, false, 24, 17, 40,", "408LL, 6, stream)",
                  "264LL, 5, fork.stream(1), 1)"});
}

TEST(LibraryMatmulEmulation, Bf16WithF32Intermediates) {
  // f32mid: the matmul's result is an f32 intermediate (cuBLAS writes f32 from bf16 inputs),
  // then a bf16 matmul chain and an add.
  const KernelGraph g = parse(R"(input X: bf16[40, 64]
input W: bf16[64, 72]
input V: bf16[72, 48]
input R: bf16[40, 48]
H = matmul(X, W)
Y = matmul(H, V)
O = add(Y, R)
output O
)");
  check_emulated("blas_bf16", g, {}, {"kBlasBf16, 48, 1920LL, 1, stream)"});
  // With f32 intermediates H is f32: the second matmul (bf16 × f32) is a generated kernel.
  check_emulated("blas_bf16_f32mid", g, knobs("f32mid=1"),
                 {"strata_rt::host::kBlasF32, 72, 2880LL, 1, stream)"},
                 {"gemm_strided_batched(false, false, 48,"});
}

TEST(LibraryMatmulEmulation, OddExtents) {
  // A vocabulary of 50257 columns for one row; 513 rows with K and N that tile by neither 16
  // nor 8 (the generated path would take the generic kernel).
  const KernelGraph g = parse(R"(input X: f16[1, 64]
input W: f16[64, 50257]
input A: f16[513, 37]
input B: f16[37, 45]
L = matmul(X, W)
C = matmul(A, B)
output L
output C
)");
  check_emulated("blas_odd", g, {},
                 {"gemm_strided_batched(false, false, 50257, 1, 64,",
                  "gemm_strided_batched(false, false, 45, 513, 37,"});
}

TEST(LibraryMatmulEmulation, F32FallsBackToTheGeneratedKernel) {
  const KernelGraph g = parse(R"(input A: f32[24, 32]
input B: f32[32, 40]
input C: f16[40, 16]
input D: f16[16, 8]
P = matmul(A, B)
Q = matmul(C, D)
output P
output Q
)");
  check_emulated(
      "blas_f32", g, {},
      {"matmul lowered to a tiled block graph", "gemm_strided_batched(false, false, 8, 40, 16,"});
}

// Views read in place by cuBLAS (docs/codegen.md, "Views read in place by cuBLAS"): a column
// slice of B, a row slice of A, a transpose of either (CUBLAS_OP_T), a slice of a transpose, a
// slice along the batch dim; odd rows and an odd K. Only a slice along a batch dim after the
// first stays a copy kernel. The emulated gemm checks every element it touches against the
// bytes past each tensor, so a wrong offset or leading dimension fails.
TEST(LibraryMatmulEmulation, ViewsReadInPlace) {
  const KernelGraph g = parse(R"(input X: f16[67, 96]
input W: f16[96, 160]
input Wt: f16[40, 96]
input Y: f16[37, 50]
input W2: f16[37, 24]
input A: f16[3, 33, 37]
input B: f16[3, 37, 24]
input C4: f16[2, 3, 8, 16]
input D4: f16[2, 2, 16, 8]
Q = matmul(X, slice(W, -1, 16, 80))
R = matmul(slice(X, 0, 20, 67), W)
T = matmul(X, transpose(Wt))
S = matmul(transpose(slice(Y, -1, 10, 40)), W2)
U = matmul(slice(A, 0, 1, 3), slice(B, 0, 1, 3))
E = matmul(slice(C4, 1, 1, 3), D4)
output Q, R, T, S, U, E
)");
  auto emitted = emit_cuda_source(g);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  EXPECT_EQ(library_calls(*emitted), 6);
  int kernels = 0;
  for (const EmittedKernel& k : emitted->kernels) kernels += !k.library;
  EXPECT_EQ(kernels, 1);  // the slice of C4 along its second batch dim: a copy
  check_emulated(
      "blas_views", g, {},
      {// Q: B = W's columns 16..80 (offset 16, ld 160).
       "gemm_strided_batched(false, false, 64, 67, 96, t1 + 16LL, strata_rt::host::kBlasF16, 160, "
       "15360LL, t0,",
       // R: A = X's rows 20..67 (offset 20·96).
       "gemm_strided_batched(false, false, 160, 47, 96, t1, strata_rt::host::kBlasF16, 160, "
       "15360LL, t0 + 1920LL, strata_rt::host::kBlasF16, 96,",
       // T: B = Wt^T, cuBLAS's A operation transposed, leading dimension 96.
       "gemm_strided_batched(true, false, 40, 67, 96, t2, strata_rt::host::kBlasF16, 96,",
       // S: A = (Y's columns 10..40)^T: cuBLAS's B operation transposed, offset 10, ld 50;
       // K = 37.
       "gemm_strided_batched(false, true, 24, 30, 37, t4, strata_rt::host::kBlasF16, 24, 888LL, "
       "t3 + 10LL, strata_rt::host::kBlasF16, 50, 1850LL,",
       // U: batch entries 1..3 of A and B (offsets of one entry each), two products.
       "gemm_strided_batched(false, false, 24, 33, 37, t6 + 888LL, strata_rt::host::kBlasF16, 24, "
       "888LL, t5 + 1221LL, strata_rt::host::kBlasF16, 37, 1221LL,"});
}

// Outputs packed in one allocation (docs/codegen.md, "Packed outputs"): check_emulation runs a
// packing source twice, with every output in a buffer of its own — the launcher takes the
// fallback: the product in the workspace, one copy per slice — and with the outputs placed as
// declared (the product written in place); the outputs match both ways, whether the product is
// a cuBLAS call or a generated kernel, sliced along the columns (odd widths) or the rows.
TEST(LibraryMatmulEmulation, PackedOutputsFallBackToCopies) {
  const KernelGraph columns = parse(R"(input X: f16[67, 96]
input W: f16[96, 150]
QKV = matmul(X, W)
Q = slice(QKV, -1, 0, 96)
K = slice(QKV, -1, 96, 123)
V = slice(QKV, -1, 123, 150)
output Q, K, V
)");
  check_emulated("packed_columns", columns, {},
                 {"const bool packed2 =", "if (!packed2) {", "gemm_strided_batched"});
  check_emulated("packed_columns_kernel", columns, knobs("blas=0"),
                 {"const bool packed2 =", "if (!packed2) {"}, {"gemm_strided_batched"});
  const KernelGraph rows = parse(R"(input X: f16[67, 96]
input W: f16[96, 40]
Y = matmul(X, W)
A = slice(Y, 0, 0, 30)
B = slice(Y, 0, 30, 67)
output B, A
)");
  check_emulated("packed_rows", rows, {}, {"outputs[0]) == static_cast<const char*>(outputs[1]) + 2400"});
}

// A view of an intermediate that is stored in f32 (f32mid) cannot be read by cuBLAS with a
// 16-bit operand: that matmul falls back to a generated kernel and the slice to a copy; the
// result still matches.
TEST(LibraryMatmulEmulation, ViewOfAWidenedIntermediateIsCopied) {
  const KernelGraph g = parse(R"(input X: f16[40, 64]
input W: f16[64, 72]
input V: f16[48, 24]
H = matmul(X, W)
Y = matmul(slice(H, -1, 8, 56), V)
output Y
)");
  check_emulated("blas_view_plain", g, {},
                 {"gemm_strided_batched(false, false, 24, 40, 48, t2, strata_rt::host::kBlasF16, "
                  "24, 1152LL, t3 + 8LL, strata_rt::host::kBlasF16, 72,"});
  check_emulated("blas_view_f32mid", g, knobs("f32mid=1"), {},
                 {"gemm_strided_batched(false, false, 24,"});
}

// Library epilogues (docs/codegen.md, "Library epilogues"): a bias along the columns, then relu
// or gelu, applied by the call (gemm_epilogue, cublasLtMatmul on the GPU) to its accumulators;
// the absorbed ops are no kernels and the product is never stored. On the emulator against the
// float64 interpreter: f16 bias + gelu, bf16 batched with a shared bias, relu alone, odd
// extents, a residual add after the epilogue (a kernel of its own reading the call's result).
TEST(LibraryMatmulEmulation, Epilogues) {
  struct Case {
    const char* name;
    const char* text;
    int kernels;  // generated kernels besides the call
  };
  const Case cases[] = {
      {"bias_gelu",
       "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[96]\nY = matmul(X, W)\n"
       "O = gelu(add(Y, B))\noutput O\n",
       0},
      {"bf16_batched_bias",
       "input X: bf16[3, 33, 64]\ninput W: bf16[3, 64, 40]\ninput B: bf16[1, 40]\n"
       "Y = matmul(X, W)\nO = add(B, Y)\noutput O\n",
       0},
      {"relu",
       "input X: f16[17, 72]\ninput W: f16[72, 56]\nY = matmul(X, W)\nO = relu(Y)\n"
       "output O\n",
       0},
      {"bias_then_residual",
       "input X: f16[64, 128]\ninput W: f16[128, 96]\ninput B: f16[96]\ninput R: f16[64, 96]\n"
       "Y = matmul(X, W)\nZ = add(Y, B)\nO = add(Z, R)\noutput O\n",
       1},
  };
  for (const Case& c : cases) {
    const KernelGraph g = parse(c.text);
    auto src = emit_cuda_source(g);
    ASSERT_TRUE(src.ok()) << c.name << ": " << src.error().message;
    EXPECT_EQ(library_calls(*src), 1) << c.name;
    int kernels = 0;
    for (const EmittedKernel& k : src->kernels) kernels += !k.library;
    EXPECT_EQ(kernels, c.kernels) << c.name;
    EXPECT_NE(src->code.find("strata_rt::host::gemm_epilogue("), std::string::npos) << c.name;
    EXPECT_NE(src->code.find("-lcublasLt"), std::string::npos) << c.name;
    check_emulated(c.name, g, EmitOptions{}, {"gemm_epilogue("});
  }
  // The epilogue's bits: bias 1, relu 2, gelu 4; the call's workspace slot past the tensors.
  auto src = emit_cuda_source(parse(cases[0].text));
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find(", t2, 5, ws + 0, 4194304ULL, stream)"), std::string::npos) << src->code;
  EXPECT_EQ(src->workspace_bytes, 4194304);
  // With blas=0 the add and the gelu are kernels again.
  auto off = emit_cuda_source(parse(cases[0].text), knobs("blas=0"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->code.find("gemm_epilogue"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
