// The task device functions of the persistent megakernel (docs/megakernel.md, "The runtime"):
// one function per task kind of task_abi.h, each run by one block of kThreads threads on its
// share of an op. Included by runtime/mpk/megakernel.cu, and compiled as host C++ with
// STRATA_RT_EMULATE on the CPU emulator of runtime/strata_rt/emulate.h by
// tests/mpk_emulation_test.cc, which checks these functions against the float64 task executor.
//
// Memory: data written in the current step (activations, the new cache entries) is read with
// ld.global.cg (L2: never a stale L1 line); weights are streamed with ld.global.nc and no L1
// allocation.
#pragma once

#include <math.h>
#include <stdint.h>

#include "strata/mpk/task_abi.h"
#include "strata_rt/core.cuh"
#include "strata_rt/mma.cuh"

// The task entries of strata's generated code (`strata mpk compile --cuda FILE`, docs/megakernel.md
// "Generated tasks"), when built with -DSTRATA_MPK_GENERATED_HEADER='"FILE"'.
#if defined(STRATA_MPK_GENERATED_HEADER)
#include STRATA_MPK_GENERATED_HEADER
#else
#define MPK_GENERATED_SMEM_BYTES 0
#define MPK_GENERATED_FUNCTIONS 0
#endif

namespace strata_mpk {

// The large task functions (matmul family, attention chunks) are compiled as functions of their
// own, not inlined into the dispatch: each then gets its own register allocation (inlined into
// one switch they spill).
#if defined(STRATA_RT_EMULATE)
#define STRATA_MPK_TASK_FN __device__ inline
#else
#define STRATA_MPK_TASK_FN __device__ __noinline__
#endif

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxBatch = 8;          // rows of a matmul task (the driver checks the model's batch)
constexpr int kMaxGroup = 16;         // q heads per kv head
constexpr int kAttnBlock = kThreads;  // positions scored per attention sub-block

/// Everything one launch needs; the layout is mirrored by the ctypes structure of the driver.
struct MpkParams {
  const long long* ops;
  const int* tasks;
  const int* waits;
  const int* triggers;
  const int* event_counts;
  unsigned* event_counters;
  const int* worker_offsets;  // [workers + 1] ranges of worker_tasks
  const int* worker_tasks;
  const int* order;
  unsigned* queue_counter;
  void* const* buffers;  // weights and state by buffer id
  char* workspace;
  const int* tokens_in;  // [batch]
  int* tokens_out;       // [batch]
  // Null, or [num_tasks][4] timestamps of one step (docs/megakernel.md, "Tracing"): the worker,
  // the global timer (ns) when the worker took the task, when its events had fired, when its
  // body ended.
  unsigned long long* trace;
  int num_tasks;
  int pos;        // position of the new token (the cache holds pos entries before the step)
  unsigned step;  // 1, 2, ...: the events' targets are count · step
  int mode;       // 0 static lists, 1 global queue
  int prefetch;   // 0, or the bytes of each streamed range a task asks L2 for before its wait
  int batch, hidden, heads, kv_heads, head_dim, intermediate, vocab, max_kv, layers;
  float eps;
};

// Portability: the same code on the GPU and on the CPU emulator (STRATA_RT_EMULATE).

// 16 bytes of weights, streamed: not kept in L1.
STRATA_DEVICE uint4 ld_stream(const void* p) {
#if defined(STRATA_RT_EMULATE)
  return *static_cast<const uint4*>(p);
#else
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
#endif
}

// A load through L2 only (data another block may have written during this launch).
template <class T>
STRATA_DEVICE T ldcg(const T* p) {
#if defined(STRATA_RT_EMULATE)
  return *p;
#else
  return __ldcg(p);
#endif
}

STRATA_DEVICE int imin(int a, int b) {
  return a < b ? a : b;
}

STRATA_DEVICE float fast_exp(float x) {
#if defined(STRATA_RT_EMULATE)
  return expf(x);
#else
  return __expf(x);
#endif
}

STRATA_DEVICE float rsqrt_f(float x) {
#if defined(STRATA_RT_EMULATE)
  return 1.0f / sqrtf(x);
#else
  return rsqrtf(x);
#endif
}

STRATA_DEVICE float shfl_xor(float v, int o) {
#if defined(STRATA_RT_EMULATE)
  return strata_rt::emu::shfl_xor(v, o);
#else
  return __shfl_xor_sync(0xffffffffu, v, o);
#endif
}

STRATA_DEVICE int shfl_xor_int(int v, int o) {
#if defined(STRATA_RT_EMULATE)
  float f;
  std::memcpy(&f, &v, 4);
  f = strata_rt::emu::shfl_xor(f, o);  // moves the 32 bits unchanged
  std::memcpy(&v, &f, 4);
  return v;
#else
  return __shfl_xor_sync(0xffffffffu, v, o);
#endif
}

STRATA_DEVICE void sync_warp() {
#if defined(STRATA_RT_EMULATE)
  strata_rt::emu::syncwarp();
#else
  __syncwarp();
#endif
}

STRATA_DEVICE void sin_cos(float a, float* s, float* c) {
#if defined(STRATA_RT_EMULATE)
  *s = sinf(a);
  *c = cosf(a);
#else
  sincosf(a, s, c);
#endif
}

STRATA_DEVICE float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}

STRATA_DEVICE float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, shfl_xor(v, o));
  return v;
}

STRATA_DEVICE float h2f(__half h) {
  return __half2float(h);
}
STRATA_DEVICE __half ldcg_h(const __half* p) {
  return ldcg(p);
}

// dot of 8 halves (w) with 8 halves (x), in fp32.
STRATA_DEVICE float dot8(const uint4& w, const uint4& x) {
  const __half2* a = reinterpret_cast<const __half2*>(&w);
  const __half2* b = reinterpret_cast<const __half2*>(&x);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __half22float2(a[i]), fb = __half22float2(b[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

struct Task {
  int op, i0, i1, i2;
};

template <class T>
STRATA_DEVICE T* ws(const MpkParams& p, long long off) {
  return reinterpret_cast<T*>(p.workspace + off);
}

// ---- attention partials ------------------------------------------------------------------------

// The combination of the C chunks' partials of one (batch row, q head) — o at po, (max, sum) at
// pml, rows r0 .. r0 + C − 1 — at dimension d: one online pass, eight chunks' loads in flight,
// empty chunks (sum 0) skipped.
STRATA_DEVICE float combine_partials(const float* po, const float* pml, size_t r0, int C, int D,
                                     int d) {
  float M = -INFINITY, Lsum = 0, acc = 0;
  for (int c0 = 0; c0 < C; c0 += 8) {
    float m[8], l[8], v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const bool in = c0 + u < C;
      m[u] = in ? ldcg(pml + (r0 + c0 + u) * 2) : 0.f;
      l[u] = in ? ldcg(pml + (r0 + c0 + u) * 2 + 1) : 0.f;
      v[u] = in ? ldcg(po + (r0 + c0 + u) * D + d) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if (!(l[u] > 0)) continue;  // an empty chunk (no positions)
      const float Mn = fmaxf(M, m[u]);
      const float a = M == -INFINITY ? 0.f : fast_exp(M - Mn), e = fast_exp(m[u] - Mn);
      acc = acc * a + v[u] * e;
      Lsum = Lsum * a + l[u] * e;
      M = Mn;
    }
  }
  return acc / Lsum;
}

// ---- matmul family: NORM_MATMUL, MATMUL_RESIDUAL, NORM_GATED, NORM_LMHEAD --------------------

// Loads the B input rows into shared memory as f16, RMS-normalized with the gain when the op has
// one: xs[b][k] = f16(x·rstd·gain) (K padded to a multiple of 8 with zeros); rstd[B] follows xs.
__device__ inline void load_rows(const MpkParams& p, const long long* op, __half* xs, float* rstd,
                                 int B, int K, int Kp) {
  const __half* x = ws<const __half>(p, op[MPK_OP_IN0]);
  const long long gw = op[MPK_OP_W0];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (gw >= 0) {
    for (int b = warp; b < B; b += kWarps) {
      float ss = 0;
      if (K % 8 == 0) {
        for (int k = lane * 8; k < K; k += 256) {
          const uint4 v = ldcg(reinterpret_cast<const uint4*>(x + (size_t)b * K + k));
          ss += dot8(v, v);
        }
      } else {
        for (int k = lane; k < K; k += 32) {
          const float v = h2f(ldcg_h(x + (size_t)b * K + k));
          ss = fmaf(v, v, ss);
        }
      }
      ss = warp_sum(ss);
      if (lane == 0) rstd[b] = rsqrt_f(ss / K + p.eps);
    }
    __syncthreads();
  }
  const __half* gain = gw >= 0 ? static_cast<const __half*>(p.buffers[gw]) : nullptr;
  if (K % 8 == 0) {  // 16-byte vectors (Kp == K)
    const int K8 = K / 8;
    for (int i = threadIdx.x; i < B * K8; i += kThreads) {
      const int b = i / K8, k = (i % K8) * 8;
      uint4 v = ldcg(reinterpret_cast<const uint4*>(x + (size_t)b * K + k));
      if (gain) {
        const uint4 g = *reinterpret_cast<const uint4*>(gain + k);
        __half2* v2 = reinterpret_cast<__half2*>(&v);
        const __half2* g2 = reinterpret_cast<const __half2*>(&g);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 a = __half22float2(v2[j]), c = __half22float2(g2[j]);
          v2[j] = __floats2half2_rn(a.x * rstd[b] * c.x, a.y * rstd[b] * c.y);
        }
      }
      *reinterpret_cast<uint4*>(xs + (size_t)b * Kp + k) = v;
    }
    __syncthreads();
    return;
  }
  for (int i = threadIdx.x; i < B * Kp; i += kThreads) {
    const int b = i / Kp, k = i % Kp;
    float v = 0;
    if (k < K) {
      v = h2f(ldcg_h(x + (size_t)b * K + k));
      if (gain) v = v * rstd[b] * h2f(gain[k]);
    }
    xs[i] = __float2half(v);
  }
  __syncthreads();
}

// The matmul family's product on the tensor cores (docs/megakernel.md, "Matmul tasks"):
// Y[b][c] = Σ_k xs[b][k]·W[c][k] for the task's columns and the B ≤ 8 batch rows, as
// mma.sync m16n8k16 tiles with f32 accumulation — A: 16 weight rows (output columns) × 16 k,
// B: 16 k × 8 batch rows (rows ≥ B are zeros), C: 16 columns × 8 batch rows.
//
// The k order inside a fragment: a dot product does not depend on the order of its k, so the
// fragment slots need not hold the k the PTX layout names as long as A and B agree on it. Lane
// (g = lane/4, t = lane%4) loads the 8 halves k = kb + 8t … kb + 8t + 7 of weight rows g and
// g + 8 (one 16-byte load each) and of input row g: halves 0–3 fill its slots {2t, 2t+1, 2t+8,
// 2t+9} of one mma, halves 4–7 those of a second. A chunk is 32 k (two mmas); one warp load
// covers 64 contiguous bytes of each of 8 weight rows.
constexpr int kChunkK = 32;      // k per chunk
constexpr int kChunkLoads = 16;  // 16-byte weight loads per lane in flight together

// 8 halves of row `row` from k (k % 8 == 0, k < K): one streamed 16-byte load when rows are
// 16-byte aligned (VEC: K % 8 == 0), else element loads with zeros past K.
template <bool VEC>
STRATA_DEVICE uint4 load8(const __half* row, int k, int K) {
  if constexpr (VEC) {
    return ld_stream(row + k);
  } else {
    __align__(16) __half h[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = k + e < K ? row[k + e] : __float2half(0.f);
    return *reinterpret_cast<const uint4*>(h);
  }
}

// acc[j] += the 16 × 8 product of weight matrix j's rows r0 … r0 + 15 (rows ≥ c1 are zeros)
// with the staged input rows, over chunks ch0 … ch1 − 1. G: 1, or 2 for the gated MLP's gate
// and up matrices (one chunk's loads of both in flight together). All 32 lanes call it.
template <int G, bool VEC>
STRATA_DEVICE void mma_rows(const __half* const (&W)[2], int K, int Kp, const __half* xs, int nb,
                            int r0, int c1, int ch0, int ch1, float (&acc)[2][4]) {
  constexpr int U = kChunkLoads / (2 * G);  // chunks per round
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const bool lo = r0 + g < c1, hi = r0 + g + 8 < c1, has_x = g < nb;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const __half* rlo[G];
  const __half* rhi[G];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    rlo[j] = W[j] + (size_t)(lo ? r0 + g : 0) * K;
    rhi[j] = W[j] + (size_t)(hi ? r0 + g + 8 : 0) * K;
  }
  const __half* xrow = xs + (size_t)(has_x ? g : 0) * Kp;
  for (int ch = ch0; ch < ch1; ch += U) {
    uint4 wl[U][G], wh[U][G], xv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k = (ch + u) * kChunkK + 8 * t;
      const bool in = ch + u < ch1 && k < K;
#pragma unroll
      for (int j = 0; j < G; ++j) {
        wl[u][j] = in && lo ? load8<VEC>(rlo[j], k, K) : zero;
        wh[u][j] = in && hi ? load8<VEC>(rhi[j], k, K) : zero;
      }
      // Kp rounds K up to 8 with zeros, so k < K keeps k + 8 ≤ Kp.
      xv[u] = in && has_x ? *reinterpret_cast<const uint4*>(xrow + k) : zero;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const strata_rt::u32 a0[4] = {wl[u][j].x, wh[u][j].x, wl[u][j].y, wh[u][j].y};
        const strata_rt::u32 b0[2] = {xv[u].x, xv[u].y};
        strata_rt::mma_16816<__half>(acc[j], a0, b0);
        const strata_rt::u32 a1[4] = {wl[u][j].z, wh[u][j].z, wl[u][j].w, wh[u][j].w};
        const strata_rt::u32 b1[2] = {xv[u].z, xv[u].w};
        strata_rt::mma_16816<__half>(acc[j], a1, b1);
      }
  }
}

// The epilogue of column c for batch row b: y (and u for the gated MLP) are the f32 sums; `best`
// and `best_i` (the LM head's running argmax of this batch row) are updated in place.
STRATA_DEVICE void matmul_store(const MpkParams& p, const long long* op, int kind, int N, int c,
                                int b, float acc, float acc_up, float& best, int& best_i) {
  const float y = h2f(__float2half(acc));
  if (kind == MPK_NORM_MATMUL) {
    ws<__half>(p, op[MPK_OP_OUT0])[(size_t)b * N + c] = __float2half(y);
  } else if (kind == MPK_MATMUL_RESIDUAL) {
    const float r = h2f(ldcg_h(ws<const __half>(p, op[MPK_OP_IN1]) + (size_t)b * N + c));
    ws<__half>(p, op[MPK_OP_OUT0])[(size_t)b * N + c] = __float2half(r + y);
  } else if (kind == MPK_NORM_GATED) {
    const float u = h2f(__float2half(acc_up));
    const float s = h2f(__float2half(y / (1.f + fast_exp(-y))));
    ws<__half>(p, op[MPK_OP_OUT0])[(size_t)b * N + c] = __float2half(s * u);
  } else {  // MPK_NORM_LMHEAD
    ws<float>(p, op[MPK_OP_OUT0])[(size_t)b * N + c] = y;
    if (y > best || (y == best && c < best_i)) {
      best = y;
      best_i = c;
    }
  }
}

// Stores a C fragment pair (acc[0]; acc[1] the up projection's when gated) of the columns r0 …
// r0 + 15: lane (g, t) holds columns r0 + g and r0 + g + 8 of batch rows 2t and 2t + 1, whose
// running argmax (LM head) is best[e], best_i[e] for row 2t + e.
STRATA_DEVICE void matmul_epilogue(const MpkParams& p, const long long* op, int kind, int N, int nb,
                                   int r0, int c1, const float (&acc)[2][4], float (&best)[2],
                                   int (&best_i)[2]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int c = r0 + g + 8 * h;
    if (c >= c1) continue;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (2 * t + e < nb)
        matmul_store(p, op, kind, N, c, 2 * t + e, acc[0][2 * h + e], acc[1][2 * h + e], best[e],
                     best_i[e]);
  }
}

/// Bytes of shared memory the matmul family needs: the B normalized input rows (K up to max_k,
/// padded to 8) and their rstd, later reused for the warps' partial fragments of a k-split tile.
__host__ __device__ constexpr int matmul_smem_bytes(int batch, int max_k) {
  const int rows = batch * ((max_k + 7) / 8 * 8) * 2 + kMaxBatch * 4;
  const int partials = kWarps * 2 * 4 * 32 * 4;
  return rows > partials ? rows : partials;
}

// Batch rows ≥ 2: the task's columns c0 … c1 − 1 cut into 16-column tensor-core tiles; with
// fewer tiles than warps, each tile's k range is split among kWarps / tiles warps (their partial
// fragments summed through shared memory, over the input rows), so that every warp streams
// weights.
STRATA_DEVICE void mma_columns(const MpkParams& p, const long long* op, int kind, int N, int K,
                               int Kp, int nb, const __half* const (&W)[2], int c0, int c1,
                               char* smem, float (&best)[2], int (&best_i)[2]) {
  const __half* xs = reinterpret_cast<const __half*>(smem);
  const bool gated = W[1] != nullptr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int R = (c1 - c0 + 15) / 16, S = R >= kWarps ? 1 : kWarps / R;
  const int chunks = (K + kChunkK - 1) / kChunkK, per_slice = (chunks + S - 1) / S;
  float acc[2][4];
  for (int item = warp; item < R * S; item += kWarps) {
    const int r0 = c0 + 16 * (item % R), s = item / R;
    const int ch0 = s * per_slice, ch1 = imin(chunks, ch0 + per_slice);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
    if (gated) {
      if (K % 8 == 0)
        mma_rows<2, true>(W, K, Kp, xs, nb, r0, c1, ch0, ch1, acc);
      else
        mma_rows<2, false>(W, K, Kp, xs, nb, r0, c1, ch0, ch1, acc);
    } else {
      if (K % 8 == 0)
        mma_rows<1, true>(W, K, Kp, xs, nb, r0, c1, ch0, ch1, acc);
      else
        mma_rows<1, false>(W, K, Kp, xs, nb, r0, c1, ch0, ch1, acc);
    }
    if (S == 1) matmul_epilogue(p, op, kind, N, nb, r0, c1, acc, best, best_i);
  }
  if (S > 1) {
    // One item per warp (R·S ≤ kWarps); item r + R·s holds slice s of tile r. The partials
    // overwrite the input rows once every warp is past them.
    float* part = reinterpret_cast<float*>(smem);  // [item][2][4][32 lanes]
    __syncthreads();
    if (warp < R * S)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[((warp * 2 + j) * 4 + e) * 32 + lane] = acc[j][e];
    __syncthreads();
    if (warp < R) {
      for (int s = 1; s < S; ++s)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[j][e] += part[(((warp + R * s) * 2 + j) * 4 + e) * 32 + lane];
      matmul_epilogue(p, op, kind, N, nb, c0 + 16 * warp, c1, acc, best, best_i);
    }
  }
}

// Batch 1 on the CUDA cores: a tensor-core tile would use one of its eight batch columns and
// each warp load would span eight weight rows; streaming whole rows measured faster at batch 1
// (docs/megakernel.md, "Matmul tasks").
//
// acc[r] = Σ_k x[k]·rows[r][k] for NW weight rows streamed together by one warp, U 16-byte loads
// of each row in flight per lane (NW·U = 16); the sums are complete in every lane.
template <int NW>
STRATA_DEVICE void rows_dot(const __half* const (&rows)[NW], int K, const __half* x,
                            float (&acc)[NW]) {
  constexpr int U = 16 / NW;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < NW; ++r) acc[r] = 0;
  if (K % 8 == 0) {
    for (int k0 = lane * 8; k0 < K; k0 += 32 * 8 * U) {
      uint4 wv[NW][U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = k0 + u * 256;
#pragma unroll
        for (int r = 0; r < NW; ++r)
          wv[r][u] = k < K ? ld_stream(rows[r] + k) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = k0 + u * 256;
        if (k >= K) break;
        const uint4 xv = *reinterpret_cast<const uint4*>(x + k);
#pragma unroll
        for (int r = 0; r < NW; ++r) acc[r] += dot8(wv[r][u], xv);
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      const float xk = h2f(x[k]);
#pragma unroll
      for (int r = 0; r < NW; ++r) acc[r] = fmaf(h2f(rows[r][k]), xk, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < NW; ++r) acc[r] = warp_sum(acc[r]);
}

// One pass of a warp over NC columns c + 8i (i < NC; gated: NC gate and NC up rows); lane 0
// stores each column's epilogue.
template <int NC, bool GATED>
STRATA_DEVICE void gemv_pass(const MpkParams& p, const long long* op, int kind, int N, int K,
                             const __half* x, const __half* const (&W)[2], int c, float& best,
                             int& best_i) {
  constexpr int NW = GATED ? 2 * NC : NC;
  const __half* rows[NW];
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const size_t cc = (size_t)(c + i * kWarps) * K;
    if (GATED) {
      rows[2 * i] = W[0] + cc;
      rows[2 * i + 1] = W[1] + cc;
    } else {
      rows[i] = W[0] + cc;
    }
  }
  float acc[NW];
  rows_dot<NW>(rows, K, x, acc);
  if (threadIdx.x % 32 == 0)
#pragma unroll
    for (int i = 0; i < NC; ++i)
      matmul_store(p, op, kind, N, c + i * kWarps, 0, GATED ? acc[2 * i] : acc[i],
                   GATED ? acc[2 * i + 1] : 0.f, best, best_i);
}

// Warp w takes columns c0 + w + 8j, two per pass (a gate and up pair each when gated); the LM
// head's running argmax of the batch row is in lane 0's best[0], best_i[0].
STRATA_DEVICE void gemv_columns(const MpkParams& p, const long long* op, int kind, int N, int K,
                                const __half* x, const __half* const (&W)[2], int c0, int c1,
                                float (&best)[2], int (&best_i)[2]) {
  for (int c = c0 + threadIdx.x / 32; c < c1;) {
    const bool two = c + kWarps < c1;
    if (W[1] != nullptr) {
      if (two)
        gemv_pass<2, true>(p, op, kind, N, K, x, W, c, best[0], best_i[0]);
      else
        gemv_pass<1, true>(p, op, kind, N, K, x, W, c, best[0], best_i[0]);
    } else {
      if (two)
        gemv_pass<2, false>(p, op, kind, N, K, x, W, c, best[0], best_i[0]);
      else
        gemv_pass<1, false>(p, op, kind, N, K, x, W, c, best[0], best_i[0]);
    }
    c += two ? 2 * kWarps : kWarps;
  }
}

// A matmul task: columns c0 … c1 − 1 of the op for every batch row, from the rows load_rows
// stages (normalized when the op has a gain).
STRATA_MPK_TASK_FN void matmul_task(const MpkParams& p, const long long* op, const Task& t,
                                    char* smem) {
  const int kind = (int)op[MPK_OP_KIND];
  const int K = (int)op[MPK_OP_K], N = (int)op[MPK_OP_N], tile = (int)op[MPK_OP_TILE];
  const int Kp = (K + 7) / 8 * 8, nb = p.batch;
  __half* xs = reinterpret_cast<__half*>(smem);
  float* rstd = reinterpret_cast<float*>(smem + (size_t)nb * Kp * 2);
  load_rows(p, op, xs, rstd, nb, K, Kp);
  const __half* const W[2] = {
      static_cast<const __half*>(p.buffers[op[MPK_OP_W1]]),
      kind == MPK_NORM_GATED ? static_cast<const __half*>(p.buffers[op[MPK_OP_W2]]) : nullptr};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = t.i0 * tile, c1 = imin(N, c0 + tile);
  float best[2] = {-INFINITY, -INFINITY};
  int best_i[2] = {0x7fffffff, 0x7fffffff};
  if (nb == 1)
    gemv_columns(p, op, kind, N, K, xs, W, c0, c1, best, best_i);
  else
    mma_columns(p, op, kind, N, K, Kp, nb, W, c0, c1, smem, best, best_i);
  if (kind == MPK_NORM_LMHEAD) {
    // The tile's argmax per batch row: over the 8 lanes of each t (rows 2t, 2t + 1), then over
    // the warps.
#pragma unroll
    for (int e = 0; e < 2; ++e) {
#pragma unroll
      for (int o = 16; o >= 4; o >>= 1) {
        const float ov = shfl_xor(best[e], o);
        const int oi = shfl_xor_int(best_i[e], o);
        if (ov > best[e] || (ov == best[e] && oi < best_i[e])) {
          best[e] = ov;
          best_i[e] = oi;
        }
      }
    }
    __syncthreads();
    float* bv = reinterpret_cast<float*>(smem);
    int* bi = reinterpret_cast<int*>(smem + sizeof(float) * kWarps * kMaxBatch);
    if (lane < 4)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        bv[warp * kMaxBatch + 2 * lane + e] = best[e];
        bi[warp * kMaxBatch + 2 * lane + e] = best_i[e];
      }
    __syncthreads();
    if (threadIdx.x < nb) {
      const int b = threadIdx.x;
      float v = -INFINITY;
      int i = 0x7fffffff;
      for (int w = 0; w < kWarps; ++w) {
        const float x = bv[w * kMaxBatch + b];
        const int j = bi[w * kMaxBatch + b];
        if (x > v || (x == v && j < i)) {
          v = x;
          i = j;
        }
      }
      char* part = p.workspace + op[MPK_OP_OUT1] + ((size_t)t.i0 * nb + b) * 8;
      *reinterpret_cast<float*>(part) = v;
      *reinterpret_cast<int*>(part + 4) = i == 0x7fffffff ? c0 : i;
    }
  }
}

// ---- attention ---------------------------------------------------------------------------------

STRATA_DEVICE size_t cache_index(const MpkParams& p, int layer, int b, int h, int pos) {
  return ((((size_t)layer * p.batch + b) * p.kv_heads + h) * p.max_kv + pos) * p.head_dim;
}

// Loads v (D values from f16) into `buf` as floats; qk-norm (gain g) and rotation by pos;
// returns nothing, buf holds the result rounded to f16 precision. One warp.
__device__ inline void norm_rope(const MpkParams& p, float* buf, const __half* gain,
                                 const float* inv_freq, int D) {
  const int lane = threadIdx.x % 32;
  if (gain) {
    float ss = 0;
    for (int d = lane; d < D; d += 32) ss = fmaf(buf[d], buf[d], ss);
    ss = warp_sum(ss);
    const float r = rsqrt_f(ss / D + p.eps);
    sync_warp();
    for (int d = lane; d < D; d += 32) buf[d] = h2f(__float2half(buf[d] * r * h2f(gain[d])));
    sync_warp();
  }
  const int half = D / 2;
  for (int i = lane; i < half; i += 32) {
    float s, c;
    sin_cos((float)p.pos * inv_freq[i], &s, &c);
    const float x1 = buf[i], x2 = buf[i + half];
    buf[i] = h2f(__float2half(x1 * c - x2 * s));
    buf[i + half] = h2f(__float2half(x2 * c + x1 * s));
  }
  sync_warp();
}

// Loads the D values of qkv row `row` at column `col` into `buf` as floats (one warp); with
// `rotate`, then qk-norm (when `gain`) and the rotation by pos, each value rounded to f16: the
// values the cache holds for a key.
__device__ inline void load_head(const MpkParams& p, const __half* row, int col, float* buf,
                                 bool rotate, const __half* gain, const float* inv_freq) {
  const int lane = threadIdx.x % 32, D = p.head_dim;
  for (int d = lane; d < D; d += 32) buf[d] = h2f(ldcg_h(row + col + d));
  sync_warp();
  if (rotate) norm_rope(p, buf, gain, inv_freq, D);
}

// The thread layout of attention's key and value passes: a position's D values are read by
// `tpp` lanes (16 bytes each; tpp = D/8 rounded up to a power of two, lanes past D/8 idle), so a
// warp covers 32/tpp positions and the block `slots` = kWarps·32/tpp positions per pass.
struct AttnLanes {
  int v8, tpp, ppw, slots, slot, d8;
  STRATA_DEVICE explicit AttnLanes(int D) {
    v8 = D / 8;
    tpp = 1;
    while (tpp < v8) tpp *= 2;
    ppw = 32 / tpp;
    slots = kWarps * ppw;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    slot = warp * ppw + lane / tpp;
    d8 = lane % tpp;
  }
  STRATA_DEVICE bool active() const { return d8 < v8; }
};

// Positions a thread's loads cover per pass of the key and value loops, all in flight at once.
constexpr int kAttnUnroll = 4;
// q heads reduced together across the warps at the end of a chunk (bounds the shared buffer).
constexpr int kAttnRedHeads = 4;

/// Shared memory of an attention chunk task: q [G][D], the step's k and v [2][D], scores
/// [G][kAttnBlock], the softmax state, the cross-warp reduction buffer.
__host__ __device__ constexpr int attn_smem_bytes(int G, int D) {
  return ((G + 2) * D + G * kAttnBlock + 3 * kMaxGroup + kWarps * kAttnRedHeads * D) * 4;
}

/// Dynamic shared memory of a step's hand-written tasks (generated entries add their own): the
/// matmul family, attention (its combine's k and v buffer is smaller), argmax.
__host__ __device__ constexpr int step_smem_bytes(int batch, int max_k, int heads, int kv_heads,
                                                  int head_dim) {
  const int G = heads / kv_heads;
  const int mm = matmul_smem_bytes(batch, max_k), attn = attn_smem_bytes(G, head_dim);
  const int am = kThreads * 8;
  const int a = mm > attn ? mm : attn;
  return a > am ? a : am;
}

// One online-softmax step over the n scores per q head in S (one warp per head): S becomes
// exp(S − m_new), st = {m, l, alpha} per head with alpha the factor that rescales what came
// before. Between block barriers.
__device__ inline void attn_softmax_step(float* S, float* st, int n, int G) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int g = warp; g < G; g += kWarps) {
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, S[g * kAttnBlock + j]);
    mx = warp_max(mx);
    const float m_old = st[g], m_new = fmaxf(m_old, mx);
    float sum = 0;
    for (int j = lane; j < n; j += 32) {
      const float e = fast_exp(S[g * kAttnBlock + j] - m_new);
      S[g * kAttnBlock + j] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    sync_warp();
    if (lane == 0) {
      const float alpha = m_old == -INFINITY ? 0.f : fast_exp(m_old - m_new);
      st[g] = m_new;
      st[kMaxGroup + g] = st[kMaxGroup + g] * alpha + sum;
      st[2 * kMaxGroup + g] = alpha;
    }
  }
}

// o[g] *= alpha[g]: the rescale of a thread's share of p·v after a softmax step.
STRATA_DEVICE void attn_rescale(float (&o)[kMaxGroup][8], const float* st, int G) {
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
    const float a = st[2 * kMaxGroup + g];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[g][i] *= a;
  }
}

STRATA_MPK_TASK_FN void attn_chunk_task(const MpkParams& p, const long long* op, const Task& t,
                                        char* smem) {
  const int D = p.head_dim, G = p.heads / p.kv_heads, QW = p.heads * D, KVW = p.kv_heads * D;
  const int b = t.i0, h = t.i1, c = t.i2, C = (int)op[MPK_OP_N], layer = (int)op[MPK_OP_LAYER];
  const int len = (p.pos + C - 1) / C;
  const int jb = imin(p.pos, c * len), je = imin(p.pos, jb + len);
  const __half* kc =
      static_cast<const __half*>(p.buffers[op[MPK_OP_W3]]) + cache_index(p, layer, b, h, 0);
  const __half* vc =
      static_cast<const __half*>(p.buffers[op[MPK_OP_W4]]) + cache_index(p, layer, b, h, 0);
  float* q = reinterpret_cast<float*>(smem);  // [G][D]
  float* kvn = q + G * D;                     // the step's k and v [2][D] (chunk 0)
  float* S = kvn + 2 * D;                     // [G][kAttnBlock]
  float* st = S + G * kAttnBlock;             // m[G], l[G], alpha[G]
  float* red = st + 3 * kMaxGroup;            // [kWarps][kAttnRedHeads][D]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const AttnLanes al(D);
  const float scale = rsqrt_f((float)D);
  const int dk = al.d8 * 8;
  // The group's q heads normed and rotated (and, for chunk 0, the step's k and v): a warp each.
  {
    const __half* row = ws<const __half>(p, op[MPK_OP_IN0]) + (size_t)b * (QW + 2 * KVW);
    const __half* qn =
        op[MPK_OP_W0] >= 0 ? static_cast<const __half*>(p.buffers[op[MPK_OP_W0]]) : nullptr;
    const __half* kn =
        op[MPK_OP_W1] >= 0 ? static_cast<const __half*>(p.buffers[op[MPK_OP_W1]]) : nullptr;
    const float* inv_freq = static_cast<const float*>(p.buffers[op[MPK_OP_W2]]);
    for (int v = warp; v < G + (c == 0 ? 2 : 0); v += kWarps) {
      if (v < G) {
        load_head(p, row, (h * G + v) * D, q + v * D, true, qn, inv_freq);
        for (int d = lane; d < D; d += 32) q[v * D + d] *= scale;
      } else {
        load_head(p, row, (v == G ? QW : QW + KVW) + h * D, kvn + (v - G) * D, v == G, kn,
                  inv_freq);
      }
    }
  }
  if (tid < G) {
    st[tid] = -INFINITY;
    st[kMaxGroup + tid] = 0;
  }
  // o[g][i]: this thread's share (its positions, dims d8·8 + i) of p·v for q head g.
  float o[kMaxGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) o[g][i] = 0;
  __syncthreads();
  for (int s0 = jb; s0 < je; s0 += kAttnBlock) {
    const int n = imin(kAttnBlock, je - s0);
    // Scores: tpp lanes per position, kAttnUnroll positions per lane in flight; the lanes of a
    // position sum their partial dot products with shuffles (warp-uniform trip counts).
    for (int j0 = warp * al.ppw; j0 < n; j0 += kAttnUnroll * al.slots) {
      uint4 kv[kAttnUnroll];
#pragma unroll
      for (int u = 0; u < kAttnUnroll; ++u) {
        const int j = j0 + u * al.slots + lane / al.tpp;
        kv[u] = al.active() && j < n
                    ? ldcg(reinterpret_cast<const uint4*>(kc + (size_t)(s0 + j) * D + dk))
                    : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kAttnUnroll; ++u) {
        const int j = j0 + u * al.slots + lane / al.tpp;
        const __half2* k2 = reinterpret_cast<const __half2*>(&kv[u]);
        float kf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __half22float2(k2[i]);
          kf[2 * i] = f.x;
          kf[2 * i + 1] = f.y;
        }
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g >= G) break;
          float s = 0;
          if (al.active())
#pragma unroll
            for (int i = 0; i < 8; ++i) s = fmaf(q[g * D + dk + i], kf[i], s);
          for (int m = al.tpp / 2; m > 0; m >>= 1) s += shfl_xor(s, m);
          if (al.d8 == 0 && j < n) S[g * kAttnBlock + j] = s;
        }
      }
    }
    // The value pass's first loads, in flight during the softmax step.
    uint4 vfirst[kAttnUnroll];
#pragma unroll
    for (int u = 0; u < kAttnUnroll; ++u) {
      const int j = warp * al.ppw + u * al.slots + lane / al.tpp;
      vfirst[u] = al.active() && j < n
                      ? ldcg(reinterpret_cast<const uint4*>(vc + (size_t)(s0 + j) * D + dk))
                      : make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    attn_softmax_step(S, st, n, G);
    __syncthreads();
    // o[g] = o[g]·alpha[g] + Σ_j p[g][j]·v[j]: the same lanes-per-position layout as the scores.
    attn_rescale(o, st, G);
    for (int j0 = warp * al.ppw; j0 < n; j0 += kAttnUnroll * al.slots) {
      const bool first = j0 == warp * al.ppw;
      uint4 vv[kAttnUnroll];
#pragma unroll
      for (int u = 0; u < kAttnUnroll; ++u) {
        const int j = j0 + u * al.slots + lane / al.tpp;
        vv[u] = first ? vfirst[u]
                : al.active() && j < n
                    ? ldcg(reinterpret_cast<const uint4*>(vc + (size_t)(s0 + j) * D + dk))
                    : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kAttnUnroll; ++u) {
        const int j = j0 + u * al.slots + lane / al.tpp;
        if (j >= n) break;
        const __half2* v2 = reinterpret_cast<const __half2*>(&vv[u]);
        float vf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __half22float2(v2[i]);
          vf[2 * i] = f.x;
          vf[2 * i + 1] = f.y;
        }
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g >= G) break;
          const float pj = S[g * kAttnBlock + j];
#pragma unroll
          for (int i = 0; i < 8; ++i) o[g][i] = fmaf(pj, vf[i], o[g][i]);
        }
      }
    }
    __syncthreads();
  }
  if (c == 0) {
    // The step's own position (chunk 0): its score per q head (a warp each), a softmax step of
    // one position, and p·v added by the threads of position slot 0.
    for (int g = warp; g < G; g += kWarps) {
      float s = 0;
      for (int d = lane; d < D; d += 32) s = fmaf(q[g * D + d], kvn[d], s);
      s = warp_sum(s);
      if (lane == 0) S[g * kAttnBlock] = s;
    }
    __syncthreads();
    attn_softmax_step(S, st, 1, G);
    __syncthreads();
    attn_rescale(o, st, G);
    if (al.slot == 0 && al.active())
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        const float pj = S[g * kAttnBlock];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[g][i] = fmaf(pj, kvn[D + dk + i], o[g][i]);
      }
  }
  // Sum o over the positions: the lanes of a warp (shuffles over the position bits of the lane),
  // then the warps (shared memory, kAttnRedHeads heads at a time).
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      for (int m = al.tpp; m < 32; m <<= 1) o[g][i] += shfl_xor(o[g][i], m);
  }
  float* po = ws<float>(p, op[MPK_OP_OUT0]);
  float* pml = ws<float>(p, op[MPK_OP_OUT1]);
  for (int g0 = 0; g0 < G; g0 += kAttnRedHeads) {
    const int hc = imin(kAttnRedHeads, G - g0);
    if (lane < al.tpp && al.active())
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        if (g >= g0 && g < g0 + hc)
#pragma unroll
          for (int i = 0; i < 8; ++i)
            red[((size_t)warp * kAttnRedHeads + g - g0) * D + dk + i] = o[g][i];
      }
    __syncthreads();
    for (int i = tid; i < hc * D; i += kThreads) {
      const int g = g0 + i / D, dd = i % D;
      float s = 0;
      for (int w = 0; w < kWarps; ++w) s += red[((size_t)w * kAttnRedHeads + g - g0) * D + dd];
      const size_t r = ((size_t)b * p.heads + h * G + g) * C + c;
      po[r * D + dd] = s;
      if (dd == 0) {
        pml[r * 2] = st[g];
        pml[r * 2 + 1] = st[kMaxGroup + g];
      }
    }
    __syncthreads();
  }
}

// Appends the step's k (warp 0: normed, rotated, as chunk 0 scored it) and v (warp 1) of
// (batch row b, kv head h) to the caches at pos: qkv at IN2, the k-norm gain W1, the
// frequencies W2, the caches W3 and W4. Uses 2·D floats of shared memory.
__device__ inline void append_kv(const MpkParams& p, const long long* op, int b, int h,
                                 char* smem) {
  const int D = p.head_dim, QW = p.heads * D, KVW = p.kv_heads * D, warp = threadIdx.x / 32;
  if (warp >= 2) return;
  const __half* row = ws<const __half>(p, op[MPK_OP_IN2]) + (size_t)b * (QW + 2 * KVW);
  const __half* kn =
      op[MPK_OP_W1] >= 0 ? static_cast<const __half*>(p.buffers[op[MPK_OP_W1]]) : nullptr;
  const float* inv_freq = static_cast<const float*>(p.buffers[op[MPK_OP_W2]]);
  float* buf = reinterpret_cast<float*>(smem) + warp * D;
  load_head(p, row, (warp == 0 ? QW : QW + KVW) + h * D, buf, warp == 0, kn, inv_freq);
  __half* dst = static_cast<__half*>(p.buffers[op[warp == 0 ? MPK_OP_W3 : MPK_OP_W4]]) +
                cache_index(p, (int)op[MPK_OP_LAYER], b, h, p.pos);
  for (int d = threadIdx.x % 32; d < D; d += 32) dst[d] = __float2half(buf[d]);
}

// Merges the chunks' (o, max, sum) of one (batch row, kv head): thread per (q head, dim); then
// appends the step's k and v (every chunk of this head has read the cache by now).
__device__ inline void attn_combine_task(const MpkParams& p, const long long* op, const Task& t,
                                         char* smem) {
  const int D = p.head_dim, G = p.heads / p.kv_heads, QW = p.heads * D, C = (int)op[MPK_OP_N];
  const int b = t.i0, h = t.i1;
  const float* po = ws<const float>(p, op[MPK_OP_IN0]);
  const float* pml = ws<const float>(p, op[MPK_OP_IN1]);
  append_kv(p, op, b, h, smem);
  for (int i = threadIdx.x; i < G * D; i += kThreads) {
    const int g = i / D, d = i % D;
    const size_t r0 = ((size_t)b * p.heads + h * G + g) * C;
    ws<__half>(p, op[MPK_OP_OUT0])[(size_t)b * QW + (h * G + g) * D + d] =
        __float2half(combine_partials(po, pml, r0, C, D, d));
  }
}

// ---- embedding, argmax
// ---------------------------------------------------------------------------

__device__ inline void embed_task(const MpkParams& p, const long long* op, const Task& t) {
  const int H = (int)op[MPK_OP_K], b = t.i0;
  int tok = p.tokens_in[b];
  tok = tok < 0 ? 0 : (tok >= p.vocab ? p.vocab - 1 : tok);
  const __half* e = static_cast<const __half*>(p.buffers[op[MPK_OP_W0]]) + (size_t)tok * H;
  __half* x = ws<__half>(p, op[MPK_OP_OUT0]) + (size_t)b * H;
  for (int k = threadIdx.x; k < H; k += kThreads) x[k] = e[k];
}

__device__ inline void argmax_task(const MpkParams& p, const long long* op, char* smem) {
  const int T = (int)op[MPK_OP_NTILES], B = p.batch;
  const char* part = p.workspace + op[MPK_OP_IN0];
  float* bv = reinterpret_cast<float*>(smem);
  int* bi = reinterpret_cast<int*>(smem + sizeof(float) * kThreads);
  for (int b = 0; b < B; ++b) {
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int i = threadIdx.x; i < T; i += kThreads) {
      const char* e = part + ((size_t)i * B + b) * 8;
      const float x = ldcg(reinterpret_cast<const float*>(e));
      const int j = ldcg(reinterpret_cast<const int*>(e + 4));
      if (x > v || (x == v && j < idx)) {
        v = x;
        idx = j;
      }
    }
    bv[threadIdx.x] = v;
    bi[threadIdx.x] = idx;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        const float x = bv[threadIdx.x + s];
        const int j = bi[threadIdx.x + s];
        if (x > bv[threadIdx.x] || (x == bv[threadIdx.x] && j < bi[threadIdx.x])) {
          bv[threadIdx.x] = x;
          bi[threadIdx.x] = j;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) p.tokens_out[b] = bi[0] == 0x7fffffff ? 0 : bi[0];
    __syncthreads();
  }
}

// ---- dispatch
// -------------------------------------------------------------------------------------

STRATA_DEVICE bool is_matmul_kind(int kind) {
  return kind == MPK_NORM_MATMUL || kind == MPK_MATMUL_RESIDUAL || kind == MPK_NORM_GATED ||
         kind == MPK_NORM_LMHEAD;
}

/// Runs task t with all threads (its events have fired).
__device__ inline void run_task_body(const MpkParams& p, const Task& t, char* smem) {
  const long long* op = p.ops + (size_t)t.op * MPK_OP_FIELDS;
  const int kind = (int)op[MPK_OP_KIND];
  switch (kind) {
    case MPK_EMBED:
      embed_task(p, op, t);
      break;
    case MPK_NORM_MATMUL:
    case MPK_MATMUL_RESIDUAL:
    case MPK_NORM_GATED:
    case MPK_NORM_LMHEAD:
      matmul_task(p, op, t, smem);
      break;
    case MPK_ATTN_CHUNK:
      attn_chunk_task(p, op, t, smem);
      break;
    case MPK_ATTN_COMBINE:
      attn_combine_task(p, op, t, smem);
      break;
    case MPK_ARGMAX:
      argmax_task(p, op, smem);
      break;
#if defined(STRATA_MPK_GENERATED_HEADER)
    case MPK_GENERATED: {
      // The operands: workspace offsets or buffer ids (task_abi.h MPK_ARG_*).
      void* args[MPK_OP_MAX_ARGS];
      for (int a = 0; a < MPK_OP_MAX_ARGS; ++a) {
        const long long v = op[MPK_OP_ARG0 + a];
        args[a] = v >= 0                 ? static_cast<void*>(p.workspace + v)
                  : MPK_ARG_IS_BUFFER(v) ? p.buffers[MPK_ARG_BUFFER_ID(v)]
                                         : nullptr;
      }
      mpk_generated_dispatch(static_cast<int>(op[MPK_OP_FUNC]), t.i0, t.i1, t.i2, args,
                             reinterpret_cast<unsigned char*>(smem));
      break;
    }
#endif
    default:
      break;
  }
}

// ---- L2 prefetch
// ----------------------------------------------------------------------------------

// Asks L2 to fetch the first `cap` bytes of [ptr, ptr + bytes), without waiting. The cap
// (MpkParams::prefetch) bounds what ~132 SMs ask of one L2 (50 MB) at once: a whole tile each
// evicts what the others prefetched before they read it.
STRATA_DEVICE void prefetch_l2(const void* ptr, long long bytes, long long cap) {
  bytes = bytes < cap ? bytes : cap;
  bytes &= ~15LL;
  if (bytes <= 0 || (reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return;
#if defined(STRATA_RT_EMULATE)
  (void)ptr;
#else
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"((unsigned)bytes)
               : "memory");
#endif
}

// Prefetches what task t streams from memory that no task of this step writes: a matmul tile's
// weight rows, an attention chunk's cached keys and values (positions before pos). Called by
// one thread before the task waits for its events, so the fetch overlaps the wait.
STRATA_DEVICE void prefetch_task(const MpkParams& p, const Task& t) {
  const long long* op = p.ops + (size_t)t.op * MPK_OP_FIELDS;
  const int kind = (int)op[MPK_OP_KIND];
  if (is_matmul_kind(kind)) {
    const long long K = op[MPK_OP_K], N = op[MPK_OP_N], tile = op[MPK_OP_TILE];
    const long long c0 = t.i0 * tile, c1 = c0 + tile < N ? c0 + tile : N;
    const long long bytes = (c1 - c0) * K * 2;
    prefetch_l2(static_cast<const __half*>(p.buffers[op[MPK_OP_W1]]) + c0 * K, bytes, p.prefetch);
    if (kind == MPK_NORM_GATED)
      prefetch_l2(static_cast<const __half*>(p.buffers[op[MPK_OP_W2]]) + c0 * K, bytes, p.prefetch);
  } else if (kind == MPK_ATTN_CHUNK) {
    const int C = (int)op[MPK_OP_N], len = (p.pos + C - 1) / C;
    const int jb = imin(p.pos, t.i2 * len), je = imin(p.pos, jb + len);
    const size_t at = cache_index(p, (int)op[MPK_OP_LAYER], t.i0, t.i1, jb);
    const long long bytes = (long long)(je - jb) * p.head_dim * 2;
    prefetch_l2(static_cast<const __half*>(p.buffers[op[MPK_OP_W3]]) + at, bytes, p.prefetch);
    prefetch_l2(static_cast<const __half*>(p.buffers[op[MPK_OP_W4]]) + at, bytes, p.prefetch);
  }
}

STRATA_DEVICE Task load_task(const MpkParams& p, int id) {
  const int* r = p.tasks + (size_t)id * MPK_TASK_FIELDS;
  return Task{ldcg(r + MPK_TASK_OP), ldcg(r + MPK_TASK_I0), ldcg(r + MPK_TASK_I1),
              ldcg(r + MPK_TASK_I2)};
}

}  // namespace strata_mpk
