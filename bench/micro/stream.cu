// Microbenchmark: how fast can a block grid stream a [K, N] f16 weight matrix (the W of the
// rmsnorm / gatedmlp benchmarks) through shared memory in column tiles of 64?
//
// Each block owns one 64-column tile (grid.x = N / 64) and a K range (grid.y = split-K parts),
// and walks its rows in steps of ROWS with a STAGES-deep pipeline, loading either with
// per-thread 16-byte cp.async copies or with bulk copies (cp.async.bulk, one per 128-byte tile
// row, completing on an mbarrier; sm_90) or with tensor-map copies (cp.async.bulk.tensor.2d, one
// ROWS x 64 box per stage, 128-byte swizzle; sm_90). Consumers read every landed chunk from
// shared memory and sum it, so the loads cannot be elided. Inputs rotate over enough copies of W
// to defeat L2.
//
// Times are per pass: the median over 5 rounds of 60 back-to-back launches on a stream, and the
// median of 20 replays of one CUDA graph that launches once per copy of W (the benchmark's
// method, bench/timing.py), divided by the launches.
//
// Build and run: bench/micro/run.sh (prints one line per configuration: µs per pass, TB/s).
#include <cuda.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <string>

#include "micro_common.cuh"


constexpr int kThreads = 128;
constexpr int kTileCols = 64;         // columns per block tile (128 bytes per row)
constexpr int kRowBytes = kTileCols * 2;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// One tensor-map box at (col, row) into `dst`, completing on the mbarrier `bar`, which is
/// told to expect `bytes` (sm_90; one thread).
__device__ __forceinline__ void load_box(const CUtensorMap& map, unsigned char* dst, int col, int row,
                                         unsigned long long* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(col), "r"(row), "r"(smem_addr(bar))
      : "memory");
}

/// Dynamic shared memory rounded up to 1024 bytes (tensor-map boxes with 128-byte swizzle).
__device__ __forceinline__ unsigned char* smem_1024() {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  return reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
}

/// Spins until phase `parity` of the mbarrier at `bar` has completed (sm_90).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n LAB_WAIT%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra LAB_WAIT%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// ---- cp.async pipeline -------------------------------------------------------------------
// NMAT tiles of COLS columns per stage, tile j from column j * N / NMAT + blockIdx.x * COLS
// (NMAT = 2 reads two matrices side by side, as gatedmlp reads W1 and W3).
template <int STAGES, int ROWS, int COLS = kTileCols, int NMAT = 1>
__global__ void __launch_bounds__(kThreads) stream_cpasync(const __half* __restrict__ w, int K, int N,
                                                           float* __restrict__ out) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kRow = COLS * 2;                  // bytes per tile row
  constexpr int kQ = kRow / 16;                   // 16-byte chunks per tile row
  constexpr int kStage = NMAT * ROWS * kRow;      // bytes per stage
  constexpr int kChunks = kStage / 16;
  constexpr int kPer = kChunks / kThreads;
  static_assert(kChunks % kThreads == 0, "whole chunks per thread");
  const int tid = threadIdx.x;
  const int rows_per_block = K / gridDim.y;
  const int iters = rows_per_block / ROWS;
  const __half* base = w + static_cast<size_t>(blockIdx.y) * rows_per_block * N + blockIdx.x * COLS;
  auto load = [&](int it, int stage) {
    const __half* src = base + static_cast<size_t>(it) * ROWS * N;
    unsigned char* dst = smem + stage * kStage;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = tid + k * kThreads;
      const int m = c / (ROWS * kQ), r = (c / kQ) % ROWS, col = c % kQ;
      asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(
                       smem_addr(dst + (m * ROWS + r) * kRow + ((col ^ (r % kQ)) * 16))),
                   "l"(src + m * (N / NMAT) + static_cast<size_t>(r) * N + col * 8));
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < iters) load(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
    __syncthreads();
    const int next = it + STAGES - 1;
    if (next < iters) load(next, next % STAGES);
    asm volatile("cp.async.commit_group;\n" ::);
    const __half2* t = reinterpret_cast<const __half2*>(smem + (it % STAGES) * kStage);
#pragma unroll
    for (int k = 0; k < kStage / 4 / kThreads; k += 8) {
      __half2 v = t[tid + k * kThreads];
      acc += __low2float(v) + __high2float(v);
    }
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}

// ---- cp.async pipeline in loop groups (the structure of strata's skinny-matmul kernels) ------
// The block's warps form GROUPS groups; group g runs iterations g, g + GROUPS, ... of ROWS rows
// each with its own STAGES-deep pipeline and its own barrier (named barrier 1 + g, or
// __syncwarp for one-warp groups). LATE: refill a stage only after it has been consumed, behind a
// second barrier (strata's order); otherwise refill the stage consumed one iteration earlier
// right after the top barrier (stream_cpasync's order). END says what the kernel does besides
// copying: kConsume reads every landed tile (the default); the others read no tile in the loop
// and, after the last wait, nothing (kNothing), one shared load (kSharedLoad) or one 16-byte
// global store per thread (kGlobalStore) — what an epilogue after a stream costs.
enum End { kConsume = 0, kNothing = 1, kSharedLoad = 2, kGlobalStore = 3 };
template <int GROUPS, int STAGES, int ROWS, bool LATE, int END = kConsume>
__global__ void __launch_bounds__(kThreads) stream_groups(const __half* __restrict__ w, int K, int N,
                                                          float* __restrict__ out) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kGT = kThreads / GROUPS;             // threads per group
  constexpr int kStage = ROWS * kRowBytes;
  constexpr int kPer = kStage / 16 / kGT;
  static_assert(kStage / 16 % kGT == 0, "whole chunks per thread");
  const int tid = threadIdx.x, grp = tid / kGT, gtid = tid % kGT;
  const int iters = K / ROWS;
  const int n_it = (iters - grp + GROUPS - 1) / GROUPS;
  unsigned char* gsmem = smem + grp * STAGES * kStage;
  const __half* base = w + blockIdx.x * kTileCols;
  auto sync = [&] {
    if constexpr (kGT == 32) {
      __syncwarp();
    } else {
      asm volatile("bar.sync %0, %1;\n" ::"r"(1 + grp), "n"(kGT) : "memory");
    }
  };
  auto load = [&](int gj, int stage) {
    const __half* src = base + static_cast<size_t>(grp + gj * GROUPS) * ROWS * N;
    unsigned char* dst = gsmem + stage * kStage;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = gtid + k * kGT;
      const int r = c / 8, col = c % 8;
      asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(
                       smem_addr(dst + r * kRowBytes + ((col ^ (r & 7)) * 16))),
                   "l"(src + static_cast<size_t>(r) * N + col * 8));
    }
  };
  constexpr int kAhead = LATE ? STAGES : STAGES - 1;  // groups issued before the loop
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < n_it) load(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  float acc = 0.f;
  for (int gj = 0; gj < n_it; ++gj) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1));
    sync();
    if constexpr (!LATE) {
      if (gj + STAGES - 1 < n_it) load(gj + STAGES - 1, (gj + STAGES - 1) % STAGES);
      asm volatile("cp.async.commit_group;\n" ::);
    }
    if constexpr (END == kConsume) {
      const __half2* t = reinterpret_cast<const __half2*>(gsmem + (gj % STAGES) * kStage);
#pragma unroll
      for (int k = 0; k < kStage / 4 / kGT; k += 8) {
        __half2 v = t[gtid + k * kGT];
        acc += __low2float(v) + __high2float(v);
      }
    }
    if constexpr (LATE) {
      sync();
      if (gj + STAGES < n_it) load(gj + STAGES, gj % STAGES);
      asm volatile("cp.async.commit_group;\n" ::);
    }
  }
  if constexpr (END != kConsume) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  if constexpr (END == kSharedLoad) acc = __half2float(reinterpret_cast<const __half*>(gsmem)[gtid]);
  if constexpr (END == kGlobalStore) {
    reinterpret_cast<uint4*>(out)[blockIdx.x * kThreads + tid] = make_uint4(tid, 0, 0, 0);
    return;
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}

// ---- warp-specialized pipeline (sm_90): one producer, three consumer warps -----------------
// The producer fills a ring of STAGES stages of ROWS rows of the 64-column tile, each stage
// completing on its `full` mbarrier; warps 1..3 wait on `full`, read the stage and release it
// on its `empty` mbarrier (one arrival per consumer warp), which the producer waits on before
// refilling. No block barrier in the loop. Two producers: warp 0 issuing per-lane 16-byte
// cp.async copies (`full` counts one cp.async.mbarrier.arrive.noinc per lane), or one thread
// issuing each stage as one tensor-map box (`full` completes on the byte count).
constexpr int kConsumerWarps = kThreads / 32 - 1;

/// Thread 0 initializes the rings (`full` expecting `full_count` arrivals); the block waits.
template <int STAGES>
__device__ __forceinline__ void init_rings(unsigned long long* full, unsigned long long* empty, int full_count) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(&full[s])), "r"(full_count));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(&empty[s])), "n"(kConsumerWarps));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
  }
  __syncthreads();
}

/// The producer's wait before refilling stage it % STAGES (free once iteration it − STAGES
/// was consumed).
template <int STAGES>
__device__ __forceinline__ void wait_free(unsigned long long* empty, int it) {
  if (it >= STAGES) mbarrier_wait(&empty[it % STAGES], ((it / STAGES) + 1) & 1);
}

/// A consumer warp's loop: wait for each stage, read its share, release it. Returns the sum.
template <int STAGES, int STAGE_BYTES>
__device__ __forceinline__ float consume_rings(const unsigned char* smem, unsigned long long* full,
                                               unsigned long long* empty, int iters) {
  const int ct = threadIdx.x - 32, lane = threadIdx.x % 32;
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    const int s = it % STAGES;
    mbarrier_wait(&full[s], (it / STAGES) & 1);
    const __half2* t = reinterpret_cast<const __half2*>(smem + s * STAGE_BYTES);
    for (int k = ct; k < STAGE_BYTES / 4; k += 32 * kConsumerWarps * 8) {
      __half2 v = t[k];
      acc += __low2float(v) + __high2float(v);
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(&empty[s])) : "memory");
  }
  return acc;
}

template <int STAGES, int ROWS>
__global__ void __launch_bounds__(kThreads) stream_producer(const __half* __restrict__ w, int K, int N,
                                                            float* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  constexpr int kStage = ROWS * kRowBytes;
  constexpr int kPerLane = kStage / 16 / 32;
  const int lane = threadIdx.x % 32, iters = K / ROWS;
  const __half* base = w + blockIdx.x * kTileCols;
  init_rings<STAGES>(full, empty, 32);
  float acc = 0.f;
  if (threadIdx.x < 32) {
    for (int it = 0; it < iters; ++it) {
      const int s = it % STAGES;
      wait_free<STAGES>(empty, it);
      const __half* src = base + static_cast<size_t>(it) * ROWS * N;
      unsigned char* dst = smem + s * kStage;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int c = lane + k * 32;
        const int r = c / 8, col = c % 8;
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(
                         smem_addr(dst + r * kRowBytes + ((col ^ (r & 7)) * 16))),
                     "l"(src + static_cast<size_t>(r) * N + col * 8));
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(&full[s]))
                   : "memory");
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else {
    acc = consume_rings<STAGES, kStage>(smem, full, empty, iters);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
#endif
}

template <int STAGES, int ROWS>
__global__ void __launch_bounds__(kThreads) stream_producer_tma(const __grid_constant__ CUtensorMap map, int K,
                                                                float* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned char* smem = smem_1024();
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  constexpr int kStage = ROWS * kRowBytes;
  const int iters = K / ROWS, col0 = blockIdx.x * kTileCols;
  if (threadIdx.x == 0)
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
  init_rings<STAGES>(full, empty, 1);
  float acc = 0.f;
  if (threadIdx.x == 0) {
    for (int it = 0; it < iters; ++it) {
      const int s = it % STAGES;
      wait_free<STAGES>(empty, it);
      load_box(map, smem + s * kStage, col0, it * ROWS, &full[s], kStage);
    }
  } else if (threadIdx.x >= 32) {
    acc = consume_rings<STAGES, kStage>(smem, full, empty, iters);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
#endif
}

// ---- bulk copies (sm_90) ----------------------------------------------------------------------
template <int STAGES, int ROWS>
__global__ void __launch_bounds__(kThreads) stream_bulk(const __half* __restrict__ w, int K, int N,
                                                        float* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kStride = kRowBytes + 16;  // padded rows (bulk copies cannot swizzle)
  __shared__ __align__(8) unsigned long long full[STAGES];
  const int tid = threadIdx.x;
  const int rows_per_block = K / gridDim.y;
  const int iters = rows_per_block / ROWS;
  const __half* base = w + static_cast<size_t>(blockIdx.y) * rows_per_block * N + blockIdx.x * kTileCols;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
  }
  __syncthreads();
  auto load = [&](int it, int stage) {  // warp 0
    const int lane = tid & 31;
    if (lane == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                       smem_addr(&full[stage])),
                   "r"(ROWS * kRowBytes));
    __syncwarp();
    const __half* src = base + static_cast<size_t>(it) * ROWS * N;
    unsigned char* dst = smem + stage * ROWS * kStride;
    for (int r = lane; r < ROWS; r += 32)
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
              smem_addr(dst + r * kStride)),
          "l"(src + static_cast<size_t>(r) * N), "r"(kRowBytes), "r"(smem_addr(&full[stage]))
          : "memory");
  };
  if (tid < 32)
    for (int s = 0; s < STAGES && s < iters; ++s) load(s, s);
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    const int stage = it % STAGES;
    mbarrier_wait(&full[stage], (it / STAGES) & 1);
    const unsigned char* t = smem + stage * ROWS * kStride;
#pragma unroll
    for (int k = 0; k < ROWS * kRowBytes / 4 / kThreads; k += 8) {
      const int e = tid + k * kThreads;  // 4-byte word
      const int r = e / (kRowBytes / 4), c = e % (kRowBytes / 4);
      __half2 v = *reinterpret_cast<const __half2*>(t + r * kStride + c * 4);
      acc += __low2float(v) + __high2float(v);
    }
    __syncthreads();  // the stage is free again
    if (tid < 32 && it + STAGES < iters) load(it + STAGES, stage);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
#endif
}

// ---- tensor-map copies (sm_90) ---------------------------------------------------------------
// One thread issues a ROWS x 64 box per stage into a 1024-byte-aligned stage buffer (128-byte
// swizzle: 16-byte chunk c of row r lands at chunk c ^ (r % 8)); every thread waits on the
// stage's mbarrier, reads it, and the block barrier frees the stage for the next box.
template <int STAGES, int ROWS>
__global__ void __launch_bounds__(kThreads) stream_tma(const __grid_constant__ CUtensorMap map, int K,
                                                       float* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned char* smem = smem_1024();
  __shared__ __align__(8) unsigned long long full[STAGES];
  const int tid = threadIdx.x;
  const int rows_per_block = K / gridDim.y;
  const int iters = rows_per_block / ROWS;
  const int row0 = blockIdx.y * rows_per_block, col0 = blockIdx.x * kTileCols;
  if (tid == 0) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
    for (int s = 0; s < STAGES; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
  }
  __syncthreads();
  auto load = [&](int it, int stage) {  // thread 0
    load_box(map, smem + stage * ROWS * kRowBytes, col0, row0 + it * ROWS, &full[stage], ROWS * kRowBytes);
  };
  if (tid == 0)
    for (int s = 0; s < STAGES && s < iters; ++s) load(s, s);
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    const int stage = it % STAGES;
    mbarrier_wait(&full[stage], (it / STAGES) & 1);
    const __half2* t = reinterpret_cast<const __half2*>(smem + stage * ROWS * kRowBytes);
#pragma unroll
    for (int k = 0; k < ROWS * kRowBytes / 4 / kThreads; k += 8) {
      __half2 v = t[tid + k * kThreads];
      acc += __low2float(v) + __high2float(v);
    }
    __syncthreads();  // the stage is free again
    if (tid == 0 && it + STAGES < iters) load(it + STAGES, stage);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
#endif
}

// ---- plain read kernel: the achievable read bandwidth ----------------------------------------
__global__ void read_all(const uint4* __restrict__ p, size_t n, float* __restrict__ out) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = __ldcs(p + i);
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (acc == 12345.f) out[0] = acc;
}

struct Times {
  float stream_us, graph_us;
};

// Median µs per launch: back-to-back launches on a stream, and replays of a CUDA graph holding
// one launch per copy (launch(i) must be capturable).
template <class F>
Times time_us(F launch, int copies, int reps = 60) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < copies; ++i) launch(i, s);
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < reps; ++i) launch(i % copies, s);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f / reps);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  const float stream_us = t[t.size() / 2];
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < copies; ++i) launch(i, s);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(exec, s));
  t.clear();
  for (int rep = 0; rep < 20; ++rep) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f / copies);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return {stream_us, t[t.size() / 2]};
}

#ifndef STREAM_NO_MAIN
int main(int argc, char** argv) {
  const int K = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int N = argc > 2 ? std::atoi(argv[2]) : 6144;
  // "tiles": tile shapes only (column width, matrices side by side, split-K), no bulk / TMA
  // mode "tiles": tile shapes only (column width, matrices side by side, split-K); "groups": the
  // loop-group pipelines of strata's kernels only; default: tile shapes, then cp.async, bulk and
  // tensor-map pipelines
  const std::string mode = argc > 3 ? argv[3] : "all";
  const size_t elems = size_t(K) * N, bytes = elems * 2;
  const int copies = int((6 * 60e6) / bytes) + 2;
  std::vector<__half*> w(copies);
  // STRATA_MICRO_ZEROS=1: W filled with zeros (as this benchmark did before 2026-11-24)
  const bool zeros = std::getenv("STRATA_MICRO_ZEROS") && std::string(std::getenv("STRATA_MICRO_ZEROS")) == "1";
  for (size_t c = 0; c < w.size(); ++c) {
    CHECK(cudaMalloc(&w[c], bytes));
    if (zeros) {
      CHECK(cudaMemset(w[c], 0, bytes));
    } else {
      fill_random<<<1024, 256>>>(w[c], elems, 1234u + 77u * unsigned(c));
      CHECK(cudaGetLastError());
    }
  }
  CHECK(cudaDeviceSynchronize());
  float* out;
  CHECK(cudaMalloc(&out, 1 << 20));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; W [%d, %d] f16 = %.1f MB, %d copies, %s\n", prop.name,
              prop.multiProcessorCount, K, N, bytes / 1e6, copies, zeros ? "zeros" : "random values");
  std::printf("%-44s %9s %6s  %9s %6s\n", "", "stream us", "TB/s", "graph us", "TB/s");
  auto report = [&](const char* name, Times t) {
    std::printf("%-44s %9.2f %6.2f  %9.2f %6.2f\n", name, t.stream_us, bytes / (t.stream_us * 1e-6) / 1e12,
                t.graph_us, bytes / (t.graph_us * 1e-6) / 1e12);
  };
  report("read_all (grid 4 x SMs x 512 threads)", time_us([&](int i, cudaStream_t s) {
           read_all<<<prop.multiProcessorCount * 4, 512, 0, s>>>(reinterpret_cast<const uint4*>(w[i]),
                                                                bytes / 16, out);
         }, copies));
  Times copy = time_us([&](int i, cudaStream_t s) {
    CHECK(cudaMemcpyAsync(w[(i + 1) % copies], w[i], bytes, cudaMemcpyDeviceToDevice, s));
  }, copies);
  report("cudaMemcpy D2D (read + write / 2)", {copy.stream_us / 2, copy.graph_us / 2});

  auto run_cp = [&](auto kernel, int stages, int rows, int split) {
    const int smem = stages * rows * kRowBytes;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid(N / kTileCols, split);
    char name[96];
    std::snprintf(name, sizeof name, "cp.async  grid %4d stages %2d rows %3d", grid.x * grid.y, stages, rows);
    report(name, time_us([&](int i, cudaStream_t s) { kernel<<<grid, kThreads, smem, s>>>(w[i], K, N, out); },
                         copies));
  };
  auto run_bulk = [&](auto kernel, int stages, int rows, int split) {
    const int smem = stages * rows * (kRowBytes + 16);
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid(N / kTileCols, split);
    char name[96];
    std::snprintf(name, sizeof name, "bulk      grid %4d stages %2d rows %3d", grid.x * grid.y, stages, rows);
    report(name, time_us([&](int i, cudaStream_t s) { kernel<<<grid, kThreads, smem, s>>>(w[i], K, N, out); },
                         copies));
  };
  // One tensor map per copy of W: [K, N] f16, row stride N * 2 bytes, box ROWS x 64, swizzled.
  auto maps_for = [&](int rows) {
    std::vector<CUtensorMap> maps(copies);
    for (int i = 0; i < copies; ++i) {
      const cuuint64_t dims[2] = {cuuint64_t(N), cuuint64_t(K)};
      const cuuint64_t strides[1] = {cuuint64_t(N) * 2};
      const cuuint32_t box[2] = {cuuint32_t(kTileCols), cuuint32_t(rows)};
      const cuuint32_t estrides[2] = {1, 1};
      CUresult r = cuTensorMapEncodeTiled(&maps[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, w[i], dims, strides, box,
                                          estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for box %d x %d\n", int(r), rows, kTileCols);
        std::exit(1);
      }
    }
    return maps;
  };
  auto run_tma = [&](auto kernel, int stages, int rows, int split) {
    const int smem = stages * rows * kRowBytes + 1024;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const std::vector<CUtensorMap> maps = maps_for(rows);
    dim3 grid(N / kTileCols, split);
    char name[96];
    std::snprintf(name, sizeof name, "tma       grid %4d stages %2d rows %3d", grid.x * grid.y, stages, rows);
    report(name, time_us([&](int i, cudaStream_t s) { kernel<<<grid, kThreads, smem, s>>>(maps[i], K, out); },
                         copies));
  };
  // Loop groups: G groups x S stages of R rows (64-column tiles, grid N / 64), refill early / late.
  auto run_grp = [&](auto kernel, int groups, int stages, int rows, bool late, const char* end = "") {
    const int smem = groups * stages * rows * kRowBytes;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid(N / kTileCols);
    char name[96];
    std::snprintf(name, sizeof name, "groups %d stages %2d rows %3d refill %s%s", groups, stages, rows,
                  late ? "late " : "early", end);
    report(name, time_us([&](int i, cudaStream_t s) { kernel<<<grid, kThreads, smem, s>>>(w[i], K, N, out); },
                         copies));
  };
  if (mode == "groups") {
    run_grp(stream_groups<1, 8, 64, false>, 1, 8, 64, false);
    run_grp(stream_groups<1, 8, 64, true>, 1, 8, 64, true);
    run_grp(stream_groups<1, 4, 128, false>, 1, 4, 128, false);
    run_grp(stream_groups<1, 4, 128, true>, 1, 4, 128, true);
    run_grp(stream_groups<1, 16, 32, false>, 1, 16, 32, false);
    run_grp(stream_groups<2, 4, 64, false>, 2, 4, 64, false);
    run_grp(stream_groups<2, 4, 64, true>, 2, 4, 64, true);
    run_grp(stream_groups<4, 2, 128, true>, 4, 2, 128, true);   // rmsnorm_b1's winner
    run_grp(stream_groups<4, 2, 128, false>, 4, 2, 128, false);
    run_grp(stream_groups<4, 4, 64, true>, 4, 4, 64, true);     // rmsnorm_b8's winner
    run_grp(stream_groups<4, 4, 64, false>, 4, 4, 64, false);
    run_grp(stream_groups<4, 8, 32, false>, 4, 8, 32, false);
    run_grp(stream_groups<4, 3, 128, false>, 4, 3, 128, false);
    // One producer warp for the whole block, three consumer warps (no block barrier).
    auto run_prod = [&](auto kernel, int stages, int rows) {
      const int smem = stages * rows * kRowBytes;
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      char name[96];
      std::snprintf(name, sizeof name, "producer warp, stages %2d rows %3d", stages, rows);
      report(name, time_us([&](int i, cudaStream_t s) {
               kernel<<<N / kTileCols, kThreads, smem, s>>>(w[i], K, N, out);
             }, copies));
    };
    run_prod(stream_producer<8, 64>, 8, 64);
    run_prod(stream_producer<12, 64>, 12, 64);
    run_prod(stream_producer<16, 32>, 16, 32);
    run_prod(stream_producer<4, 128>, 4, 128);
    auto run_prod_tma = [&](auto kernel, int stages, int rows) {
      const int smem = stages * rows * kRowBytes + 1024;
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const std::vector<CUtensorMap> maps = maps_for(rows);
      char name[96];
      std::snprintf(name, sizeof name, "producer tma, stages %2d rows %3d", stages, rows);
      report(name, time_us([&](int i, cudaStream_t s) {
               kernel<<<N / kTileCols, kThreads, smem, s>>>(maps[i], K, out);
             }, copies));
    };
    run_prod_tma(stream_producer_tma<4, 128>, 4, 128);
    run_prod_tma(stream_producer_tma<8, 64>, 8, 64);
    run_prod_tma(stream_producer_tma<12, 64>, 12, 64);
    run_prod_tma(stream_producer_tma<6, 128>, 6, 128);
    // The end of a stream: no tile read in the loop, then nothing / one shared load / one
    // global store per thread after the last wait (4 x 2 x 128 late, rmsnorm_b1's winner, and
    // 1 x 8 x 64).
    std::printf("no tile read in the loop; after the last wait:\n");
    run_grp(stream_groups<4, 2, 128, true, kNothing>, 4, 2, 128, true, " nothing");
    run_grp(stream_groups<4, 2, 128, true, kSharedLoad>, 4, 2, 128, true, " smem ld");
    run_grp(stream_groups<4, 2, 128, true, kGlobalStore>, 4, 2, 128, true, " gl store");
    run_grp(stream_groups<1, 8, 64, false, kNothing>, 1, 8, 64, false, " nothing");
    run_grp(stream_groups<1, 8, 64, false, kSharedLoad>, 1, 8, 64, false, " smem ld");
    run_grp(stream_groups<1, 8, 64, false, kGlobalStore>, 1, 8, 64, false, " gl store");
    return 0;
  }
  // Tile shapes: COLS-wide tiles of NMAT matrices side by side ([K, N] read as NMAT matrices
  // of N / NMAT columns), 8 stages of 64 rows, 128 threads; grid N / NMAT / COLS x split.
  auto run_tile = [&](auto kernel, int cols, int nmat, int split) {
    const int smem = 8 * 64 * cols * 2 * nmat;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid(N / nmat / cols, split);
    char name[96];
    std::snprintf(name, sizeof name, "cp.async  grid %4d cols %2d x %d mat split %d", grid.x * grid.y, cols, nmat,
                  split);
    report(name, time_us([&](int i, cudaStream_t s) { kernel<<<grid, kThreads, smem, s>>>(w[i], K, N, out); },
                         copies));
  };
  for (int split : {1, 2}) {
    run_tile(stream_cpasync<8, 64, 32, 1>, 32, 1, split);
    run_tile(stream_cpasync<8, 64, 64, 1>, 64, 1, split);
    run_tile(stream_cpasync<8, 64, 32, 2>, 32, 2, split);
    run_tile(stream_cpasync<8, 64, 64, 2>, 64, 2, split);
  }
  if (mode == "tiles") return 0;
  for (int split : {1, 2, 4}) {
    run_cp(stream_cpasync<8, 64>, 8, 64, split);
    run_cp(stream_cpasync<12, 64>, 12, 64, split);
    run_cp(stream_cpasync<6, 128>, 6, 128, split);
    if (split == 1) run_bulk(stream_bulk<8, 64>, 8, 64, split);
    run_tma(stream_tma<4, 64>, 4, 64, split);
    run_tma(stream_tma<8, 64>, 8, 64, split);
    run_tma(stream_tma<4, 128>, 4, 128, split);
    run_tma(stream_tma<6, 128>, 6, 128, split);
    run_tma(stream_tma<3, 256>, 3, 256, split);
    run_tma(stream_tma<6, 256>, 6, 256, split);
  }
  return 0;
}
#endif  // STREAM_NO_MAIN
