// Microbenchmark: how far cuBLASLt's other algorithms are from the one strata's library calls
// get. For one row-major f16 product C[M,N] = A[M,K]·B[K,N] (f32 accumulation) it asks
// cublasLtMatmulAlgoGetHeuristic for up to 16 algorithms (32 MiB workspace) and times each
// against cublasGemmStridedBatchedEx with one batch entry (what the library calls use, the
// "default" row), on the suite's prefill shapes and MCFuser's small GEMM chains.
//
// Times: median of 9 rounds of 40 back-to-back launches on one stream, divided by the launches;
// every algorithm's rounds interleave with the others' (the order rotating), operands rotated
// over enough copies to exceed L2. Every algorithm's result is compared with the default's
// (max |diff|); an algorithm that fails to run or differs by more than 0.05 is reported so.
// Per algorithm: its tile (CUBLASLT_ALGO_CONFIG_TILE_ID), split-K count, stages id and cluster
// shape id, as cuBLASLt numbers them.
//
// Build and run: bench/micro/run-gemm-algos.sh
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gemm_timing.cuh"

static int config_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t what) {
  uint32_t v = 0;
  size_t got = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, what, &v, sizeof v, &got) != CUBLAS_STATUS_SUCCESS)
    return -1;
  return (int)v;
}

int main() {
  const Shape shapes[] = {
      {"mcfuser_g4 first", 512, 512, 256},
      {"mcfuser_g5 first", 512, 512, 512},
      {"mcfuser_g6 first", 512, 512, 1024},
      {"mcfuser_g6 second", 512, 256, 512},
      {"qwen25_7b_mlp_down_p512 up", 512, 18944, 3584},
      {"qwen25_7b_mlp_down_p512 down", 512, 3584, 18944},
      {"llama32_1b_mlp_p4096 up", 4096, 8192, 2048},
      {"llama32_1b_mlp_p4096 down", 4096, 2048, 8192},
      {"llama32_1b_qkv_p2048 qkv", 2048, 3072, 2048},
      {"mistral_7b_qkv_p4096 qkv", 4096, 6144, 4096},
  };
  GemmContext ctx;
  cublasHandle_t h = ctx.h;
  cublasLtHandle_t lt = ctx.lt;
  cudaStream_t s = ctx.s;
  const size_t ws_bytes = ctx.ws_bytes;
  void* ws = ctx.ws;
  for (const Shape& sh : shapes) {
    const size_t a_n = (size_t)sh.m * sh.k, b_n = (size_t)sh.k * sh.n, c_n = (size_t)sh.m * sh.n;
    const size_t bytes = (a_n + b_n) * 2;
    const int copies = (int)std::max<size_t>(1, std::min<size_t>(8, (200u << 20) / bytes + 1));
    std::vector<half*> a(copies), b(copies);
    for (int c = 0; c < copies; ++c) {
      a[c] = alloc_random(a_n, 11 + c, 0.125f);
      b[c] = alloc_random(b_n, 71 + c, 0.125f);
    }
    half *c0, *c1;
    CHECK(cudaMalloc(&c0, c_n * 2));
    CHECK(cudaMalloc(&c1, c_n * 2));
    const float one = 1.f, zero = 0.f;
    // Column-major view: C^T[N,M] = B^T[N,K] · A^T[K,M].
    auto strided = [&](int c) {
      return cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, sh.n, sh.m, sh.k, &one, b[c],
                                        CUDA_R_16F, sh.n, b_n, a[c], CUDA_R_16F, sh.k, a_n, &zero,
                                        c0, CUDA_R_16F, sh.n, c_n, 1, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    };
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, sh.n, sh.k, sh.n);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, sh.k, sh.m, sh.k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, sh.n, sh.m, sh.n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                         sizeof(ws_bytes));
    cublasLtMatmulHeuristicResult_t heur[16];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, heur, &found);
    strided(0);
    CHECK(cudaDeviceSynchronize());
    std::vector<bool> usable(found, true);
    std::vector<double> diff(found, -1);
    for (int i = 0; i < found; ++i) {
      CHECK(cudaMemset(c1, 0xff, c_n * 2));  // NaN: a result left unwritten shows
      if (cublasLtMatmul(lt, op, &one, b[0], la, a[0], lb, &zero, c1, lc, c1, lc, &heur[i].algo,
                         ws, ws_bytes, s) != CUBLAS_STATUS_SUCCESS) {
        usable[i] = false;
        continue;
      }
      CHECK(cudaStreamSynchronize(s));
      diff[i] = max_diff(c0, c1, c_n);
      if (!(diff[i] <= 0.05)) usable[i] = false;
    }
    // Contender 0 is the strided call; 1 + i the i-th heuristic algorithm.
    const int n = 1 + found;
    auto launch = [&](int who, int c) {
      if (who == 0) return strided(c);
      return cublasLtMatmul(lt, op, &one, b[c], la, a[c], lb, &zero, c1, lc, c1, lc,
                            &heur[who - 1].algo, ws, ws_bytes, s) == CUBLAS_STATUS_SUCCESS;
    };
    for (int i = 0; i < 10; ++i)
      for (int w = 0; w < n; ++w)
        if (w == 0 || usable[w - 1]) launch(w, i % copies);
    CHECK(cudaStreamSynchronize(s));
    std::vector<std::vector<double>> t(n);
    for (int r = 0; r < 9; ++r)
      for (int j = 0; j < n; ++j) {
        const int w = (r + j) % n;
        if (w > 0 && !usable[w - 1]) continue;
        t[w].push_back(round_us(s, copies, [&](int c) { return launch(w, c); }));
      }
    const double base = median(t[0]);
    std::printf("\n%s (M %d N %d K %d): default (strided) %.2f us\n", sh.name, sh.m, sh.n, sh.k,
                base);
    std::printf("  %4s %10s %8s %6s %7s %7s %8s %10s\n", "algo", "us", "vs dflt", "tile",
                "splitK", "stages", "cluster", "max|diff|");
    for (int i = 0; i < found; ++i) {
      const cublasLtMatmulAlgo_t& al = heur[i].algo;
      const int tile = config_attr(al, CUBLASLT_ALGO_CONFIG_TILE_ID);
      const int split = config_attr(al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
      const int stages = config_attr(al, CUBLASLT_ALGO_CONFIG_STAGES_ID);
      const int cluster = config_attr(al, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
      if (!usable[i]) {
        std::printf("  %4d %10s %8s %6d %7d %7d %8d %10.3g\n", i, "unusable", "", tile, split,
                    stages, cluster, diff[i]);
        continue;
      }
      const double us = median(t[1 + i]);
      std::printf("  %4d %10.2f %8.3f %6d %7d %7d %8d %10.3g\n", i, us, us / base, tile, split,
                  stages, cluster, diff[i]);
    }
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
  }
  return 0;
}
