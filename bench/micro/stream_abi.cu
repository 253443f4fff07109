// The streaming microbenchmark's loop-group kernel (stream.cu, stream_groups) behind the ABI of
// a strata library (strata_launch & co.), so that bench/ablate.py --source can time it with the
// benchmark's own method next to an emitted kernel. It reads input 1 (the W of rmsnorm, [K, N]
// f16, in 64-column tiles, grid N / 64) and writes nothing useful: its output check fails on
// purpose. STREAM_GROUPS, STREAM_STAGES, STREAM_ROWS, STREAM_LATE and STREAM_K / STREAM_N pick
// the pipeline and the shape (default: 4 groups x 4 stages of 64 rows, early refill, 4096 x
// 6144).
#define STREAM_NO_MAIN
#include "stream.cu"

#ifndef STREAM_GROUPS
#define STREAM_GROUPS 4
#endif
#ifndef STREAM_STAGES
#define STREAM_STAGES 4
#endif
#ifndef STREAM_ROWS
#define STREAM_ROWS 64
#endif
#ifndef STREAM_LATE
#define STREAM_LATE false
#endif
#ifndef STREAM_K
#define STREAM_K 4096
#endif
#ifndef STREAM_N
#define STREAM_N 6144
#endif

namespace {
float* g_sink = nullptr;
}

extern "C" int strata_launch(const void* const* inputs, void* const* outputs, void* workspace,
                             cudaStream_t stream) {
  (void)outputs;
  (void)workspace;
  auto kernel = stream_groups<STREAM_GROUPS, STREAM_STAGES, STREAM_ROWS, STREAM_LATE>;
  const int smem = STREAM_GROUPS * STREAM_STAGES * STREAM_ROWS * kRowBytes;
  static const cudaError_t init = [&] {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    return e != cudaSuccess ? e : cudaMalloc(&g_sink, 1 << 16);
  }();
  if (init != cudaSuccess) return static_cast<int>(init);
  kernel<<<STREAM_N / kTileCols, kThreads, smem, stream>>>(static_cast<const __half*>(inputs[1]),
                                                           STREAM_K, STREAM_N, g_sink);
  return static_cast<int>(cudaGetLastError());
}
extern "C" unsigned long long strata_workspace_bytes(void) { return 0ULL; }
extern "C" int strata_num_inputs(void) { return 2; }
extern "C" int strata_num_outputs(void) { return 1; }
