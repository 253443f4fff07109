// strata device runtime: predefined matmuls as library calls (host side only; docs/codegen.md,
// "Predefined matmuls through cuBLAS"). The generated launcher includes this header only when a
// graph has such a matmul, and the library is then linked with -lcublas.
//
// gemm_strided_batched takes cuBLAS's own argument conventions (column-major operands, the
// operation of each, leading dimensions, batch strides), so that the emitted call is the same
// on the GPU and on the CPU emulator. An operand may be a view read in place (docs/codegen.md,
// "Views read in place by cuBLAS"): a pointer into a larger tensor with a leading dimension
// larger than its rows (a slice), or a transposed operation (a transpose):
//   - on the GPU it is cublasGemmStridedBatchedEx with f32 compute (CUBLAS_COMPUTE_32F, float
//     alpha = 1 and beta = 0), the inputs in f16 or bf16, the output in its own type, on the
//     launch stream; one handle per device and plan stream (slot: 0 the caller's stream, s the
//     side stream s of strata_rt/streams.cuh), created by blas_init (strata_init calls it, so no
//     handle is created during a CUDA-graph capture), bound to the stream at every call. Calls
//     that may run at once never share a handle: cuBLAS's documentation (results
//     reproducibility) says that calls in parallel streams through one handle may pick their
//     internal workspaces non-deterministically, and recommends one handle per stream. The
//     workspace is cuBLAS's default: from CUDA 12.2 on cuBLAS allocates it stream-ordered, so
//     captured calls replay without a workspace of ours.
//   - under STRATA_RT_EMULATE it is a CPU gemm with the same arguments, checked as cuBLAS
//     checks them, accumulating in f32 and rounding the result to the output type; every
//     element it reads or writes is checked against the emulator's forbidden ranges (the bytes
//     past each tensor, emu::add_forbidden), so a wrong offset, leading dimension or stride
//     that reaches past a tensor fails instead of reading a neighbour.
// gemm_epilogue is the same product with a library epilogue (docs/codegen.md, "Library
// epilogues"): a bias of m elements added along cuBLAS's rows (our columns), then relu or gelu,
// applied to the f32 accumulators before the one rounding to C's type:
//   - on the GPU it is cublasLtMatmul (CUBLASLT_EPILOGUE_BIAS, _RELU, _GELU and their _BIAS
//     forms) with the caller's workspace (a slot of strata's workspace, planned per call), the
//     algorithm chosen by cuBLASLt's heuristic for the pointers' alignment and cached per shape;
//   - under STRATA_RT_EMULATE the CPU gemm above with the epilogue (strata's gelu: the tanh
//     form, as cuBLASLt's).
// Errors are returned as kBlasError + the cublasStatus_t (0 on success).
#pragma once

#if !defined(__CUDACC_RTC__)

#include "strata_rt/host.cuh"

#include "strata_rt/math.cuh"

#if !defined(STRATA_RT_EMULATE)
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#endif

namespace strata_rt {
namespace host {

/// The host API's error codes for cuBLAS failures: kBlasError + cublasStatus_t.
constexpr int kBlasError = 20000;

/// Element types of the gemm's operands: the host API's dtype codes (0 f16, 1 bf16, 2 f32).
enum BlasType { kBlasF16 = 0, kBlasBf16 = 1, kBlasF32 = 2 };

/// What gemm_epilogue applies after the product: a bias (bit kEpilogueBias), then at most one
/// activation.
enum BlasEpilogue { kEpilogueBias = 1, kEpilogueRelu = 2, kEpilogueGelu = 4 };

/// Handles per device: slot s serves the launch plan's stream s (0 the caller's, 1 … the side
/// streams of strata_rt/streams.cuh), so that calls running at once never share a handle.
constexpr int kBlasSlots = 5;

#if defined(STRATA_RT_EMULATE)

namespace emu_blas {

inline float load(const void* p, int type, long long i) {
  emu::check_access(static_cast<const unsigned char*>(p) + (type == kBlasF32 ? 4 : 2) * i,
                    type == kBlasF32 ? 4 : 2);
  if (type == kBlasF32) return static_cast<const float*>(p)[i];
  unsigned short bits;
  const unsigned char* b = static_cast<const unsigned char*>(p) + 2 * i;
  bits = static_cast<unsigned short>(b[0] | (b[1] << 8));
  return emu::half_bits_to_float(bits, type == kBlasBf16);
}

inline void store(void* p, int type, long long i, float v) {
  emu::check_access(static_cast<const unsigned char*>(p) + (type == kBlasF32 ? 4 : 2) * i,
                    type == kBlasF32 ? 4 : 2);
  if (type == kBlasF32) {
    static_cast<float*>(p)[i] = v;
  } else if (type == kBlasF16) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

/// Applies epilogue `epilogue` (BlasEpilogue bits) to accumulator `acc` of cuBLAS row `i`
/// (bias: m elements of type `type`).
inline float apply_epilogue(float acc, int epilogue, const void* bias, int type, int i) {
  if (epilogue & kEpilogueBias) acc += load(bias, type, i);
  if (epilogue & kEpilogueRelu) acc = op_relu(acc);
  if (epilogue & kEpilogueGelu) acc = op_gelu(acc);
  return acc;
}

}  // namespace emu_blas

inline int blas_init(int slots = 1) {
  return slots >= 1 && slots <= kBlasSlots ? 0 : kBlasError + 7;  // CUBLAS_STATUS_INVALID_VALUE
}

/// C[b] = epilogue(op(A[b]) · op(B[b])) for b < batch, column-major as cuBLAS defines it:
/// op(A) is m × k (A stored k × m when trans_a), op(B) k × n, C m × n with leading dimension
/// ldc; the bias (kEpilogueBias) has m elements of C's type, shared by the batch. The
/// workspace is unused here (cuBLASLt's).
inline int gemm_epilogue(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int a_type,
                         int lda, long long stride_a, const void* B, int b_type, int ldb,
                         long long stride_b, void* C, int c_type, int ldc, long long stride_c,
                         int batch, const void* bias, int epilogue, void* workspace,
                         unsigned long long workspace_bytes, cudaStream_t stream, int slot = 0) {
  (void)workspace;
  (void)workspace_bytes;
  const int invalid = kBlasError + 7;         // CUBLAS_STATUS_INVALID_VALUE
  const int not_supported = kBlasError + 15;  // CUBLAS_STATUS_NOT_SUPPORTED
  if (m < 0 || n < 0 || k < 0 || batch < 0) return invalid;
  if (lda < (trans_a ? (k > 1 ? k : 1) : (m > 1 ? m : 1))) return invalid;
  if (ldb < (trans_b ? (n > 1 ? n : 1) : (k > 1 ? k : 1))) return invalid;
  if (ldc < (m > 1 ? m : 1)) return invalid;
  if (a_type != b_type || a_type == kBlasF32 || (c_type != a_type && c_type != kBlasF32))
    return not_supported;
  if ((epilogue & kEpilogueBias) && bias == nullptr) return invalid;
  if ((epilogue & kEpilogueRelu) && (epilogue & kEpilogueGelu)) return invalid;
  if (slot < 0 || slot >= kBlasSlots) return invalid;
  emu::enqueue(stream, [=] {
    for (int b = 0; b < batch; ++b) {
      const long long a0 = b * stride_a, b0 = b * stride_b, c0 = b * stride_c;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          float acc = 0.0f;
          for (int l = 0; l < k; ++l) {
            const long long ai =
                trans_a ? l + static_cast<long long>(i) * lda : i + static_cast<long long>(l) * lda;
            const long long bi =
                trans_b ? j + static_cast<long long>(l) * ldb : l + static_cast<long long>(j) * ldb;
            acc += emu_blas::load(A, a_type, a0 + ai) * emu_blas::load(B, b_type, b0 + bi);
          }
          acc = emu_blas::apply_epilogue(acc, epilogue, bias, c_type, i);
          emu_blas::store(C, c_type, c0 + i + static_cast<long long>(j) * ldc, acc);
        }
    }
  });
  return 0;
}

/// gemm_epilogue without an epilogue: cuBLAS's cublasGemmStridedBatchedEx on the GPU.
inline int gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, const void* A,
                                int a_type, int lda, long long stride_a, const void* B, int b_type,
                                int ldb, long long stride_b, void* C, int c_type, int ldc,
                                long long stride_c, int batch, cudaStream_t stream, int slot = 0) {
  return gemm_epilogue(trans_a, trans_b, m, n, k, A, a_type, lda, stride_a, B, b_type, ldb,
                       stride_b, C, c_type, ldc, stride_c, batch, nullptr, 0, nullptr, 0, stream,
                       slot);
}

#else

inline cudaDataType_t blas_data_type(int type) {
  return type == kBlasF16 ? CUDA_R_16F : type == kBlasBf16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// The cuBLAS handle of each device (created by blas_init, never destroyed: a handle's
/// teardown at process exit may run after the CUDA context's) and the lock that makes binding
/// it to a stream and enqueueing one call atomic across threads.
struct BlasHandles {
  static constexpr int kDevices = 64;
  std::mutex mu;
  cublasHandle_t handle[kDevices][kBlasSlots] = {};
  /// One cuBLASLt handle per device serves every slot: cublasLtMatmul takes its stream and its
  /// workspace per call (each call has a workspace slot of its own).
  cublasLtHandle_t lt[kDevices] = {};
  /// cuBLASLt's descriptors and chosen algorithm per device and call shape (LtKey).
  struct LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo = {};
  };
  using LtKey = std::tuple<int, bool, bool, int, int, int, int, int, long long, int, long long, int,
                           int, long long, int, int, unsigned long long, int>;
  std::map<LtKey, LtPlan> lt_plans;
};
inline BlasHandles& blas_handles() {
  static BlasHandles h;
  return h;
}

/// Creates the current device's cuBLAS handles of slots 0 … slots - 1 that it has none of, and
/// its cuBLASLt handle; a cudaError_t or kBlasError + cublasStatus_t.
inline int blas_init(int slots = 1) {
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (device < 0 || device >= BlasHandles::kDevices)
    return kBlasError + CUBLAS_STATUS_NOT_SUPPORTED;
  BlasHandles& h = blas_handles();
  std::lock_guard<std::mutex> lock(h.mu);
  if (slots < 1 || slots > kBlasSlots) return kBlasError + CUBLAS_STATUS_INVALID_VALUE;
  for (int k = 0; k < slots; ++k) {
    if (h.handle[device][k]) continue;
    const cublasStatus_t s = cublasCreate(&h.handle[device][k]);
    if (s != CUBLAS_STATUS_SUCCESS) {
      h.handle[device][k] = nullptr;
      return kBlasError + static_cast<int>(s);
    }
  }
  if (h.lt[device]) return 0;
  const cublasStatus_t s = cublasLtCreate(&h.lt[device]);
  if (s != CUBLAS_STATUS_SUCCESS) {
    h.lt[device] = nullptr;
    return kBlasError + static_cast<int>(s);
  }
  return 0;
}

/// The largest power of two up to 256 that divides address `p` (cuBLASLt's alignment hints).
inline int blas_alignment(const void* p) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % static_cast<std::uintptr_t>(align) != 0) align /= 2;
  return align;
}

/// Builds the cuBLASLt descriptors of one call shape and asks the heuristic for its algorithm;
/// a cublasStatus_t (CUBLAS_STATUS_NOT_SUPPORTED when no algorithm fits).
inline cublasStatus_t make_lt_plan(cublasLtHandle_t lt, const BlasHandles::LtKey& key,
                                   BlasHandles::LtPlan& plan) {
  const auto [device, trans_a, trans_b, m, n, k, a_type, lda, stride_a, ldb, stride_b, c_type, ldc,
              stride_c, batch_, epilogue, workspace_bytes, align] = key;
  (void)device;
  const int batch = batch_;  // the layouts' lambda captures it (no structured binding)
  cublasStatus_t s = cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epi =
      (epilogue & kEpilogueGelu)
          ? ((epilogue & kEpilogueBias) ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
      : (epilogue & kEpilogueRelu)
          ? ((epilogue & kEpilogueBias) ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
      : (epilogue & kEpilogueBias) ? CUBLASLT_EPILOGUE_BIAS
                                   : CUBLASLT_EPILOGUE_DEFAULT;
  const cudaDataType_t bias_type = blas_data_type(c_type);
  if ((s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta))) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb))) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                          sizeof(epi))) != CUBLAS_STATUS_SUCCESS ||
      ((epilogue & kEpilogueBias) &&
       (s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof(bias_type))) != CUBLAS_STATUS_SUCCESS))
    return s;
  // Column-major layouts as stored: A is m × k (k × m when transposed), B k × n (n × k).
  auto layout = [&](cublasLtMatrixLayout_t& l, int type, int rows, int cols, int ld,
                    long long stride) {
    cublasStatus_t st = cublasLtMatrixLayoutCreate(&l, blas_data_type(type), rows, cols, ld);
    if (st != CUBLAS_STATUS_SUCCESS || batch == 1) return st;
    const int32_t count = batch;
    const int64_t offset = stride;
    if ((st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof(count))) != CUBLAS_STATUS_SUCCESS)
      return st;
    return cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                                            sizeof(offset));
  };
  if ((s = layout(plan.a, a_type, trans_a ? k : m, trans_a ? m : k, lda, stride_a)) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = layout(plan.b, a_type, trans_b ? n : k, trans_b ? k : n, ldb, stride_b)) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = layout(plan.c, c_type, m, n, ldc, stride_c)) != CUBLAS_STATUS_SUCCESS)
    return s;
  cublasLtMatmulPreference_t pref = nullptr;
  if ((s = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) return s;
  const uint64_t ws = workspace_bytes;
  const uint32_t alignment = static_cast<uint32_t>(align);
  s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof(ws));
  for (cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(lt, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1,
                                       &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (found < 1) return CUBLAS_STATUS_NOT_SUPPORTED;
  plan.algo = result.algo;
  return CUBLAS_STATUS_SUCCESS;
}

/// cublasGemmStridedBatchedEx(trans_a, trans_b, m, n, k, 1, A, lda, stride_a, B, ldb, stride_b,
/// 0, C, ldc, stride_c, batch) with f32 compute on `stream`, through the current device's handle
/// of `slot` (blas_init creates it when it is missing, outside a capture as strata_init runs it
/// first).
inline int gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, const void* A,
                                int a_type, int lda, long long stride_a, const void* B, int b_type,
                                int ldb, long long stride_b, void* C, int c_type, int ldc,
                                long long stride_c, int batch, cudaStream_t stream, int slot = 0) {
  if (slot < 0 || slot >= kBlasSlots) return kBlasError + CUBLAS_STATUS_INVALID_VALUE;
  if (const int err = blas_init(slot + 1)) return err;
  int device = 0;
  const cudaError_t derr = cudaGetDevice(&device);
  if (derr != cudaSuccess) return static_cast<int>(derr);
  BlasHandles& h = blas_handles();
  std::lock_guard<std::mutex> lock(h.mu);
  cublasHandle_t handle = h.handle[device][slot];
  cublasStatus_t s = cublasSetStream(handle, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return kBlasError + static_cast<int>(s);
  const float alpha = 1.0f, beta = 0.0f;
  s = cublasGemmStridedBatchedEx(handle, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A,
                                 blas_data_type(a_type), lda, stride_a, B, blas_data_type(b_type),
                                 ldb, stride_b, &beta, C, blas_data_type(c_type), ldc, stride_c,
                                 batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : kBlasError + static_cast<int>(s);
}

/// cublasLtMatmul of the product gemm_strided_batched computes with epilogue `epilogue`
/// (BlasEpilogue bits; the bias: m elements of C's type, shared by the batch) applied before C
/// is rounded, on `stream`, with `workspace_bytes` of `workspace`; the plan (descriptors and the
/// heuristic's algorithm for the pointers' alignment) is made once per device and shape. The
/// device's one cuBLASLt handle serves every `slot` (checked only for range).
inline int gemm_epilogue(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int a_type,
                         int lda, long long stride_a, const void* B, int b_type, int ldb,
                         long long stride_b, void* C, int c_type, int ldc, long long stride_c,
                         int batch, const void* bias, int epilogue, void* workspace,
                         unsigned long long workspace_bytes, cudaStream_t stream, int slot = 0) {
  if (slot < 0 || slot >= kBlasSlots) return kBlasError + CUBLAS_STATUS_INVALID_VALUE;
  if (a_type != b_type) return kBlasError + CUBLAS_STATUS_NOT_SUPPORTED;
  if ((epilogue & kEpilogueBias) && bias == nullptr)
    return kBlasError + CUBLAS_STATUS_INVALID_VALUE;
  if (const int err = blas_init()) return err;
  int device = 0;
  const cudaError_t derr = cudaGetDevice(&device);
  if (derr != cudaSuccess) return static_cast<int>(derr);
  int align = blas_alignment(A);
  for (const void* p : {B, static_cast<const void*>(C), bias})
    if (p != nullptr) align = blas_alignment(p) < align ? blas_alignment(p) : align;
  const BlasHandles::LtKey key{
      device,   trans_a, trans_b, m,        n,     k,        a_type,          lda,  stride_a, ldb,
      stride_b, c_type,  ldc,     stride_c, batch, epilogue, workspace_bytes, align};
  BlasHandles& h = blas_handles();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.lt_plans.find(key);
  if (it == h.lt_plans.end()) {
    BlasHandles::LtPlan plan;
    const cublasStatus_t s = make_lt_plan(h.lt[device], key, plan);
    if (s != CUBLAS_STATUS_SUCCESS) return kBlasError + static_cast<int>(s);
    it = h.lt_plans.emplace(key, plan).first;
  }
  const BlasHandles::LtPlan& plan = it->second;
  if (epilogue & kEpilogueBias) {
    const cublasStatus_t s = cublasLtMatmulDescSetAttribute(
        plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (s != CUBLAS_STATUS_SUCCESS) return kBlasError + static_cast<int>(s);
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      cublasLtMatmul(h.lt[device], plan.op, &alpha, A, plan.a, B, plan.b, &beta, C, plan.c, C,
                     plan.c, &plan.algo, workspace, workspace_bytes, stream);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : kBlasError + static_cast<int>(s);
}

#endif

}  // namespace host
}  // namespace strata_rt

#endif  // !__CUDACC_RTC__
