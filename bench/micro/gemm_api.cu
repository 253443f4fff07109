// Microbenchmark: one row-major f16 product C[M,N] = A[M,K]·B[K,N] (f32 accumulation) through
// three cuBLAS entry points — cublasGemmEx, cublasGemmStridedBatchedEx with one batch entry
// (what strata's library calls use), and cublasLtMatmul with the heuristic's first algorithm
// and a 32 MiB workspace — on the suite's prefill shapes. bench/micro/torch_mm.py times
// torch.mm on the same shapes the same way, so that the two outputs compare.
//
// Times: median of 9 rounds of 40 back-to-back launches on one stream, divided by the launches,
// the three entry points' rounds interleaved (the order rotating), operands rotated over enough
// copies to exceed L2. Every entry point's result is compared with
// cublasGemmEx's (max |diff|).
//
// Build and run: bench/micro/run-gemm-api.sh
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemm_timing.cuh"


int main() {
  const Shape shapes[] = {
      {"qwen25_7b_mlp_down_p512 up", 512, 18944, 3584},
      {"qwen25_7b_mlp_down_p512 down", 512, 3584, 18944},
      {"llama32_1b_mlp_p4096 up", 4096, 8192, 2048},
      {"llama32_1b_qkv_p2048 qkv", 2048, 3072, 2048},
      {"mistral_7b_qkv_p4096 qkv", 4096, 6144, 4096},
      {"llama3_8b_mlp_p2048 up", 2048, 14336, 4096},
      {"qwen25_7b_lora_down_r64_p512", 512, 3584, 18944},
  };
  GemmContext ctx;
  cublasHandle_t h = ctx.h;
  cublasLtHandle_t lt = ctx.lt;
  cudaStream_t s = ctx.s;
  const size_t ws_bytes = ctx.ws_bytes;
  void* ws = ctx.ws;
  std::printf("%-32s %10s %14s %10s   max|diff| strided lt\n", "shape (M N K)", "GemmEx",
              "StridedBatch1", "LtMatmul");
  for (const Shape& sh : shapes) {
    const size_t a_n = (size_t)sh.m * sh.k, b_n = (size_t)sh.k * sh.n, c_n = (size_t)sh.m * sh.n;
    const size_t bytes = (a_n + b_n) * 2;
    const int copies = (int)std::max<size_t>(1, std::min<size_t>(4, (200u << 20) / bytes + 1));
    std::vector<half*> a(copies), b(copies);
    for (int c = 0; c < copies; ++c) {
      a[c] = alloc_random(a_n, 11 + c, 0.125f);
      b[c] = alloc_random(b_n, 71 + c, 0.125f);
    }
    half *c0, *c1, *c2;
    CHECK(cudaMalloc(&c0, c_n * 2));
    CHECK(cudaMalloc(&c1, c_n * 2));
    CHECK(cudaMalloc(&c2, c_n * 2));
    const float one = 1.f, zero = 0.f;
    // Column-major view: C^T[N,M] = B^T[N,K] · A^T[K,M].
    auto gemm_ex = [&](int c) {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, sh.n, sh.m, sh.k, &one, b[c], CUDA_R_16F,
                          sh.n, a[c], CUDA_R_16F, sh.k, &zero, c0, CUDA_R_16F, sh.n,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    };
    auto strided = [&](int c) {
      return cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, sh.n, sh.m, sh.k, &one, b[c],
                                        CUDA_R_16F, sh.n, b_n, a[c], CUDA_R_16F, sh.k, a_n, &zero,
                                        c1, CUDA_R_16F, sh.n, c_n, 1, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    };
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, sh.n, sh.k, sh.n);  // B^T as cuBLAS's A
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, sh.k, sh.m, sh.k);  // A^T as cuBLAS's B
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, sh.n, sh.m, sh.n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                         sizeof(ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found);
    auto lt_mm = [&](int c) {
      return found > 0 &&
             cublasLtMatmul(lt, op, &one, b[c], la, a[c], lb, &zero, c2, lc, c2, lc, &heur.algo,
                            ws, ws_bytes, s) == CUBLAS_STATUS_SUCCESS;
    };
    gemm_ex(0);
    strided(0);
    lt_mm(0);
    CHECK(cudaDeviceSynchronize());
    const double d1 = max_diff(c0, c1, c_n), d2 = found ? max_diff(c0, c2, c_n) : -1;
    // The entry points' rounds interleave, the order rotating per round, so that the clock's
    // drift under sustained load (power) falls on each alike.
    std::vector<double> r0, r1, r2;
    for (int i = 0; i < 10; ++i) gemm_ex(i % copies), strided(i % copies), lt_mm(i % copies);
    CHECK(cudaStreamSynchronize(s));
    for (int r = 0; r < 9; ++r)
      for (int j = 0; j < 3; ++j) switch ((r + j) % 3) {
          case 0: r0.push_back(round_us(s, copies, gemm_ex)); break;
          case 1: r1.push_back(round_us(s, copies, strided)); break;
          default: if (found) r2.push_back(round_us(s, copies, lt_mm));
        }
    const double t0 = median(r0), t1 = median(r1), t2 = found ? median(r2) : -1;
    char label[96];
    std::snprintf(label, sizeof label, "%s (%d %d %d)", sh.name, sh.m, sh.n, sh.k);
    std::printf("%-44s %10.2f %14.2f %10.2f   %.3g %.3g\n", label, t0, t1, t2, d1, d2);
    std::fflush(stdout);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    for (int c = 0; c < copies; ++c) {
      cudaFree(a[c]);
      cudaFree(b[c]);
    }
    cudaFree(c0);
    cudaFree(c1);
    cudaFree(c2);
  }
  return 0;
}
