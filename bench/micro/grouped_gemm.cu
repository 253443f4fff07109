// Microbenchmark: sibling matmuls that share their left operand (Y·Wq, Y·Wk, Y·Wv; X·W1, X·W3),
// issued as separate cuBLAS calls, as one grouped call (cublasGemmGroupedBatchedEx, one group per
// distinct shape), as one pointer-array batched call where every shape and leading dimension
// agree (cublasGemmBatchedEx), and, for reference, as one call over the concatenated weight
// (what a framework does when the weights are one tensor and the outputs are views of it).
//
// Row-major f16 operands, f32 accumulation, f16 results. A case is M, K and a list of N; the
// weights are column slices of one [K, sum N] matrix ("fused") or separate [K, N_i] matrices
// ("separate"); the outputs are separate [M, N_i] matrices. Inputs rotate over enough copies
// to exceed L2. Times: median of 7 rounds of 40 back-to-back launches on one stream, divided by
// the launches (µs per product set). Each variant's results are compared with the separate
// calls' (max |diff|), so a variant that computes something else is reported, not timed.
//
// Build and run: bench/micro/run-grouped.sh
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "micro_common.cuh"

#define CHECK_BLAS(x)                                                                  \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d: cublas status %d\n", __FILE__, __LINE__, (int)s_); \
      return false;                                                                    \
    }                                                                                  \
  } while (0)

struct Case {
  const char* name;
  int m, k;
  std::vector<int> n;
  bool fused;  // weights are column slices of one [K, sum N] matrix
};

struct Buffers {
  int copies = 1;
  std::vector<half*> x;                 // [M, K] per copy
  std::vector<std::vector<half*>> w;    // per copy, per product: base of W_i (ld = ldw[i])
  std::vector<half*> wcat;              // per copy: the [K, sum N] matrix (fused cases)
  std::vector<int> ldw;
  std::vector<half*> out;               // per product [M, N_i]
  half* outcat = nullptr;               // [M, sum N]
};

static half* alloc_fill(size_t n, unsigned seed) {
  return alloc_random(n, seed, 0.125f);
}

// Row-major C[M,N] = X[M,K]·W[K,N] is column-major C^T = W^T X^T: m=N, n=M, k=K,
// A = W (ld = ldw), B = X (ld = K), C (ld = ldc).
static bool separate(cublasHandle_t h, const Case& c, Buffers& b, int copy) {
  const float one = 1.f, zero = 0.f;
  for (size_t i = 0; i < c.n.size(); ++i)
    CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, c.n[i], c.m, c.k, &one, b.w[copy][i],
                            CUDA_R_16F, b.ldw[i], b.x[copy], CUDA_R_16F, c.k, &zero, b.out[i],
                            CUDA_R_16F, c.n[i], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

static bool concatenated(cublasHandle_t h, const Case& c, Buffers& b, int copy) {
  const float one = 1.f, zero = 0.f;
  int total = 0;
  for (int n : c.n) total += n;
  CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, total, c.m, c.k, &one, b.wcat[copy],
                          CUDA_R_16F, total, b.x[copy], CUDA_R_16F, c.k, &zero, b.outcat,
                          CUDA_R_16F, total, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

struct PointerArrays {
  const void** a = nullptr;  // device: per copy, per product
  const void** bm = nullptr;
  void** c = nullptr;
};

static PointerArrays make_arrays(const Case& c, Buffers& b) {
  size_t p = c.n.size();
  std::vector<const void*> a(p * b.copies), bm(p * b.copies);
  std::vector<void*> cc(p * b.copies);
  for (int copy = 0; copy < b.copies; ++copy)
    for (size_t i = 0; i < p; ++i) {
      a[copy * p + i] = b.w[copy][i];
      bm[copy * p + i] = b.x[copy];
      cc[copy * p + i] = b.out[i];
    }
  PointerArrays d;
  CHECK(cudaMalloc(&d.a, a.size() * sizeof(void*)));
  CHECK(cudaMalloc(&d.bm, bm.size() * sizeof(void*)));
  CHECK(cudaMalloc(&d.c, cc.size() * sizeof(void*)));
  CHECK(cudaMemcpy(d.a, a.data(), a.size() * sizeof(void*), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d.bm, bm.data(), bm.size() * sizeof(void*), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d.c, cc.data(), cc.size() * sizeof(void*), cudaMemcpyHostToDevice));
  return d;
}

static bool grouped(cublasHandle_t h, const Case& c, Buffers& b, const PointerArrays& d,
                    int copy) {
  int p = (int)c.n.size();
  std::vector<cublasOperation_t> ta(p, CUBLAS_OP_N), tb(p, CUBLAS_OP_N);
  std::vector<int> m(p), n(p, c.m), k(p, c.k), lda(p), ldb(p, c.k), ldc(p), size(p, 1);
  std::vector<float> alpha(p, 1.f), beta(p, 0.f);
  for (int i = 0; i < p; ++i) {
    m[i] = c.n[i];
    lda[i] = b.ldw[i];
    ldc[i] = c.n[i];
  }
  CHECK_BLAS(cublasGemmGroupedBatchedEx(
      h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), d.a + copy * p,
      CUDA_R_16F, lda.data(), d.bm + copy * p, CUDA_R_16F, ldb.data(), beta.data(),
      d.c + copy * p, CUDA_R_16F, ldc.data(), p, size.data(), CUBLAS_COMPUTE_32F));
  return true;
}

static bool batched(cublasHandle_t h, const Case& c, Buffers& b, const PointerArrays& d,
                    int copy) {
  const float one = 1.f, zero = 0.f;
  int p = (int)c.n.size();
  CHECK_BLAS(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, c.n[0], c.m, c.k, &one,
                                 d.a + copy * p, CUDA_R_16F, b.ldw[0], d.bm + copy * p,
                                 CUDA_R_16F, c.k, &zero, d.c + copy * p, CUDA_R_16F, c.n[0], p,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

template <class F>
static double time_us(cudaStream_t s, int copies, F&& f) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 10; ++i)
    if (!f(i % copies)) return -1;
  CHECK(cudaStreamSynchronize(s));
  std::vector<double> rounds;
  const int launches = 40;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < launches; ++i) f(i % copies);
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    rounds.push_back(ms * 1000.0 / launches);
  }
  std::sort(rounds.begin(), rounds.end());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return rounds[rounds.size() / 2];
}

static std::vector<std::vector<half>> snapshot(const Case& c, Buffers& b, bool from_cat) {
  std::vector<std::vector<half>> r;
  int total = 0;
  for (int n : c.n) total += n;
  int col = 0;
  for (size_t i = 0; i < c.n.size(); ++i) {
    std::vector<half> h((size_t)c.m * c.n[i]);
    if (from_cat)
      CHECK(cudaMemcpy2D(h.data(), c.n[i] * sizeof(half), b.outcat + col, total * sizeof(half),
                         c.n[i] * sizeof(half), c.m, cudaMemcpyDeviceToHost));
    else
      CHECK(cudaMemcpy(h.data(), b.out[i], h.size() * sizeof(half), cudaMemcpyDeviceToHost));
    col += c.n[i];
    r.push_back(std::move(h));
  }
  return r;
}

static double max_diff(const std::vector<std::vector<half>>& a,
                       const std::vector<std::vector<half>>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      d = std::max(d, (double)std::fabs(__half2float(a[i][j]) - __half2float(b[i][j])));
  return d;
}

int main() {
  std::vector<Case> cases = {
      {"llama32_1b_qkv_p2048", 2048, 2048, {2048, 512, 512}, true},
      {"mistral_7b_qkv_p4096", 4096, 4096, {4096, 1024, 1024}, true},
      {"llama3_8b_qkv_p512", 512, 4096, {4096, 1024, 1024}, true},
      {"llama3_8b_qkv_d4", 4, 4096, {4096, 1024, 1024}, true},
      {"qwen25_7b_gate_up_p512", 512, 3584, {18944, 18944}, false},
      {"llama3_8b_gate_up_p2048", 2048, 4096, {14336, 14336}, false},
      {"llama32_1b_gate_up_p2048", 2048, 2048, {8192, 8192}, false},
  };
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cublasSetStream(h, s);
  int version = 0;
  cublasGetVersion(h, &version);
  std::printf("cuBLAS %d\n", version);
  std::printf("%-26s %10s %10s %10s %10s   %s\n", "case", "separate", "grouped", "batched",
              "concat", "max|diff| grouped batched concat");
  for (const Case& c : cases) {
    Buffers b;
    int total = 0;
    for (int n : c.n) total += n;
    size_t bytes = ((size_t)c.m * c.k + (size_t)c.k * total) * 2;
    b.copies = (int)std::max<size_t>(1, std::min<size_t>(4, (200u << 20) / bytes + 1));
    for (int copy = 0; copy < b.copies; ++copy) {
      b.x.push_back(alloc_fill((size_t)c.m * c.k, 17 + copy));
      std::vector<half*> ws;
      if (c.fused) {
        half* cat = alloc_fill((size_t)c.k * total, 91 + copy);
        b.wcat.push_back(cat);
        int col = 0;
        for (int n : c.n) {
          ws.push_back(cat + col);
          col += n;
        }
      } else {
        for (size_t i = 0; i < c.n.size(); ++i)
          ws.push_back(alloc_fill((size_t)c.k * c.n[i], 131 + copy * 7 + (unsigned)i));
      }
      b.w.push_back(ws);
    }
    for (size_t i = 0; i < c.n.size(); ++i) {
      b.ldw.push_back(c.fused ? total : c.n[i]);
      half* o;
      CHECK(cudaMalloc(&o, (size_t)c.m * c.n[i] * sizeof(half)));
      b.out.push_back(o);
    }
    CHECK(cudaMalloc(&b.outcat, (size_t)c.m * total * sizeof(half)));
    CHECK(cudaDeviceSynchronize());
    PointerArrays d = make_arrays(c, b);

    auto run_sep = [&](int copy) { return separate(h, c, b, copy); };
    auto run_grp = [&](int copy) { return grouped(h, c, b, d, copy); };
    auto run_bat = [&](int copy) { return batched(h, c, b, d, copy); };
    auto run_cat = [&](int copy) { return concatenated(h, c, b, copy); };

    run_sep(0);
    CHECK(cudaDeviceSynchronize());
    auto ref = snapshot(c, b, false);
    std::string diffs;
    auto check = [&](auto& f, bool from_cat) -> bool {
      for (half* o : b.out) CHECK(cudaMemset(o, 0xff, 2));
      if (!f(0)) return false;
      CHECK(cudaDeviceSynchronize());
      double dd = max_diff(ref, snapshot(c, b, from_cat));
      char buf[32];
      std::snprintf(buf, sizeof buf, " %.3g", dd);
      diffs += buf;
      return dd < 1e-2;
    };
    bool equal_shapes = std::all_of(c.n.begin(), c.n.end(), [&](int n) { return n == c.n[0]; }) &&
                        std::all_of(b.ldw.begin(), b.ldw.end(), [&](int l) { return l == b.ldw[0]; });
    double t_sep = time_us(s, b.copies, run_sep);
    double t_grp = check(run_grp, false) ? time_us(s, b.copies, run_grp) : -1;
    double t_bat = equal_shapes && check(run_bat, false) ? time_us(s, b.copies, run_bat) : -1;
    double t_cat = c.fused && check(run_cat, true) ? time_us(s, b.copies, run_cat) : -1;
    std::printf("%-26s %10.2f %10.2f %10.2f %10.2f  %s\n", c.name, t_sep, t_grp, t_bat, t_cat,
                diffs.c_str());
    std::fflush(stdout);
    cudaDeviceSynchronize();
  }
  return 0;
}
