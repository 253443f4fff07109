// The persistent megakernel: one launch runs one decode step of a compiled task graph
// (docs/megakernel.md, "The runtime"). Built as a shared library (nvcc -shared) and driven from
// Python through ctypes (bench/mpk_decode.py).
//
// The task functions are in mpk_tasks.cuh (also run on the CPU emulator by the tests); with
// -DSTRATA_MPK_GENERATED_HEADER='"FILE"' (the header `strata mpk compile --cuda FILE` writes)
// MPK_GENERATED tasks call strata's generated task entries.
//
// Execution model. The grid is one block per worker (one per SM; every block resident). A
// worker takes tasks either from its static list (mode 0) or from a global counter over the
// compiled topological order (mode 1); for each task it
//   1. asks L2 to prefetch the task's weights (or cached keys and values), then
//      waits until every event the task waits on has reached count · step (thread 0 spins on an
//      acquire load with __nanosleep; the counters only grow, so no reset between steps),
//   2. runs the task's device function with all 256 threads,
//   3. after a barrier, thread 0 fences and adds 1 to every event the task triggers (release).
// With a trace buffer (MpkParams::trace) thread 0 also records when each of these began.
// Either way a worker's tasks come in a topological order and every worker is resident, so the
// first unfinished task of the order can always run: no deadlock (docs/megakernel.md,
// "Invariants").
//
// The same device functions, one kernel launch per op without events (mpk_launch_op), are the
// "one kernel per op" baseline.
#include <cstdio>

#include "mpk/mpk_tasks.cuh"

namespace {

using namespace strata_mpk;

// Polls of an event (each followed by a ~64 ns sleep, in practice longer) before a worker gives
// up: about 2^26 · 64 ns ≈ 4 s, far above any step.
constexpr unsigned kMaxPolls = 1u << 26;

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ void run_task(const MpkParams& p, int id, char* smem) {
  const int* r = p.tasks + (size_t)id * MPK_TASK_FIELDS;
  const Task task = load_task(p, id);
  unsigned long long* trace = p.trace ? p.trace + (size_t)id * 4 : nullptr;
  if (threadIdx.x == 0) {
    if (trace) {
      trace[0] = blockIdx.x;
      trace[1] = global_ns();
    }
    if (p.prefetch) prefetch_task(p, task);
    const int wb = __ldg(r + MPK_TASK_WAIT_BEGIN), wn = __ldg(r + MPK_TASK_WAIT_COUNT);
    for (int i = 0; i < wn; ++i) {
      const int e = __ldg(p.waits + wb + i);
      const unsigned target = (unsigned)__ldg(p.event_counts + e) * p.step;
      // A wait of seconds means a broken graph or a worker that never started: fail the launch
      // (an error on the host) instead of hanging it.
      unsigned polls = 0, seen;
      while ((seen = ld_acquire(p.event_counters + e)) < target) {
        __nanosleep(64);
        if (++polls == kMaxPolls) {
          printf("mpk: worker %d, task %d: event %d at %u of %u after %u polls\n", blockIdx.x, id,
                 e, seen, target, polls);
          __trap();
        }
      }
    }
  }
  __syncthreads();
  if (trace && threadIdx.x == 0) trace[2] = global_ns();
  run_task_body(p, task, smem);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (trace) trace[3] = global_ns();
    __threadfence();
    const int tb = __ldg(r + MPK_TASK_TRIG_BEGIN), tn = __ldg(r + MPK_TASK_TRIG_COUNT);
    for (int i = 0; i < tn; ++i) red_release(p.event_counters + __ldg(p.triggers + tb + i), 1u);
  }
}

__global__ void __launch_bounds__(kThreads, 1) mpk_persistent(const __grid_constant__ MpkParams p) {
  extern __shared__ __align__(128) char smem[];
  if (p.mode == 0) {
    const int begin = p.worker_offsets[blockIdx.x], end = p.worker_offsets[blockIdx.x + 1];
    for (int i = begin; i < end; ++i) run_task(p, __ldg(p.worker_tasks + i), smem);
  } else {
    __shared__ int next;
    const unsigned base = (p.step - 1) * (unsigned)(p.num_tasks + gridDim.x);
    for (;;) {
      if (threadIdx.x == 0) next = (int)(atomicAdd(p.queue_counter, 1u) - base);
      __syncthreads();
      const int i = next;
      __syncthreads();
      if (i >= p.num_tasks) break;
      run_task(p, __ldg(p.order + i), smem);
    }
  }
}

// One op, one kernel: block i runs task first + i; the stream orders the ops.
__global__ void __launch_bounds__(kThreads, 1)
    mpk_op_kernel(const __grid_constant__ MpkParams p, int first) {
  extern __shared__ __align__(128) char smem[];
  run_task_body(p, load_task(p, first + (int)blockIdx.x), smem);
}

}  // namespace

extern "C" {

/// Allows `smem_bytes` of dynamic shared memory for both kernels; returns a cudaError_t.
int mpk_configure(int smem_bytes) {
  cudaError_t e =
      cudaFuncSetAttribute(mpk_persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return (int)e;
  return (int)cudaFuncSetAttribute(mpk_op_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   smem_bytes);
}

/// One decode step as one persistent launch of `grid` workers. A cooperative launch: it fails
/// (cudaErrorCooperativeLaunchTooLarge) rather than start when the workers cannot all be
/// resident at once, which the absence of deadlock relies on.
int mpk_launch(const MpkParams* p, int grid, int smem_bytes, void* stream) {
  MpkParams copy = *p;
  void* args[] = {&copy};
  return (int)cudaLaunchCooperativeKernel((const void*)mpk_persistent, dim3(grid), dim3(kThreads),
                                          args, (size_t)smem_bytes, (cudaStream_t)stream);
}

/// One op's tasks as one ordinary launch (no events): the one-kernel-per-op baseline.
int mpk_launch_op(const MpkParams* p, int first_task, int num_tasks, int smem_bytes, void* stream) {
  mpk_op_kernel<<<num_tasks, kThreads, smem_bytes, (cudaStream_t)stream>>>(*p, first_task);
  return (int)cudaGetLastError();
}

/// sizeof(MpkParams), for the driver to check its mirror of the structure.
int mpk_params_size() {
  return (int)sizeof(MpkParams);
}

/// Dynamic shared memory a step needs: the matmul rows, the attention buffers, the argmax.
int mpk_smem_bytes(int batch, int max_k, int heads, int kv_heads, int head_dim) {
  const int m = step_smem_bytes(batch, max_k, heads, kv_heads, head_dim);
  return m > MPK_GENERATED_SMEM_BYTES ? m : MPK_GENERATED_SMEM_BYTES;  // generated task entries
}

/// The generated task entries built in (STRATA_MPK_GENERATED_HEADER), 0 without: the driver
/// checks it against the task file's "generated" list before it launches.
int mpk_generated_functions() {
  return MPK_GENERATED_FUNCTIONS;
}

}  // extern "C"
