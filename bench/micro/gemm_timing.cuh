// What the GEMM microbenchmarks (gemm_api.cu, gemm_algos.cu) share: a round of back-to-back
// launches timed by events, the median of rounds, and the largest difference of two f16
// results on the device.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cstdlib>
#include <vector>

#include "micro_common.cuh"

/// One round of 40 back-to-back launches of `f`, µs per launch.
template <class F>
static double round_us(cudaStream_t s, int copies, F&& f) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0, s));
  for (int i = 0; i < 40; ++i) f(i % copies);
  CHECK(cudaEventRecord(e1, s));
  CHECK(cudaEventSynchronize(e1));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms * 1000.0 / 40;
}

/// The median of v (-1 when empty).
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

/// max |a[i] − b[i]| over n device f16 values.
static double max_diff(const half* a, const half* b, size_t n) {
  std::vector<half> x(n), y(n);
  CHECK(cudaMemcpy(x.data(), a, n * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(y.data(), b, n * 2, cudaMemcpyDeviceToHost));
  double d = 0;
  for (size_t i = 0; i < n; ++i)
    d = std::max(d, (double)std::fabs(__half2float(x[i]) - __half2float(y[i])));
  return d;
}

/// One row-major product C[M,N] = A[M,K]·B[K,N] of a benchmark's list.
struct Shape {
  const char* name;
  int m, n, k;
};

/// The cuBLAS and cuBLASLt handles on one stream, and a 32 MiB workspace (exits on failure).
struct GemmContext {
  cublasHandle_t h;
  cublasLtHandle_t lt;
  cudaStream_t s;
  size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  GemmContext() {
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
      std::exit(1);
    CHECK(cudaStreamCreate(&s));
    cublasSetStream(h, s);
    CHECK(cudaMalloc(&ws, ws_bytes));
  }
};
