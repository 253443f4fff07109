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
//   1. with MpkParams::prefetch > 0, asks L2 for the first `prefetch` bytes of each range the
//      task streams (weights, or cached keys and values), then
//      waits until every event the task waits on has reached count · step (thread 0 spins on an
//      acquire load with __nanosleep; the counters only grow, so no reset between steps),
//   2. runs the task's device function with all 256 threads,
//   3. after a barrier, thread 0 adds 1 to every event the task triggers (release).
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

// A task's record (task_abi.h: op, I0..I2, the ranges of its waits and triggers): 32 bytes
// read at once, read-only during a step.
struct TaskRec {
  Task t;
  int wait_begin, wait_count, trig_begin, trig_count;
};
static_assert(MPK_TASK_FIELDS == 8, "a task record is two 16-byte vectors");

__device__ __forceinline__ TaskRec read_rec(const MpkParams& p, int id) {
  const int4* r = reinterpret_cast<const int4*>(p.tasks + (size_t)id * MPK_TASK_FIELDS);
  const int4 a = __ldg(r), b = __ldg(r + 1);
  return TaskRec{Task{a.x, a.y, a.z, a.w}, b.x, b.y, b.z, b.w};
}

__device__ void run_task(const MpkParams& p, int id, const TaskRec& rec, char* smem) {
  unsigned long long* trace = p.trace ? p.trace + (size_t)id * 4 : nullptr;
  if (threadIdx.x == 0) {
    if (trace) {
      trace[0] = blockIdx.x;
      trace[1] = global_ns();
    }
    if (p.prefetch) prefetch_task(p, rec.t);
    for (int i = 0; i < rec.wait_count; ++i) {
      const int e = __ldg(p.waits + rec.wait_begin + i);
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
  run_task_body(p, rec.t, smem);
  // The barrier orders every thread's writes of the task before thread 0's release adds (a
  // release is cumulative over what its thread has observed, the barrier included), so the
  // consumers' acquire loads see them.
  __syncthreads();
  if (threadIdx.x == 0) {
    if (trace) trace[3] = global_ns();
    for (int i = 0; i < rec.trig_count; ++i)
      red_release(p.event_counters + __ldg(p.triggers + rec.trig_begin + i), 1u);
  }
}

__global__ void __launch_bounds__(kThreads, 1) mpk_persistent(const __grid_constant__ MpkParams p) {
  extern __shared__ __align__(128) char smem[];
  if (p.mode == 0) {
    // The next task's record is read while the current one runs.
    const int begin = p.worker_offsets[blockIdx.x], end = p.worker_offsets[blockIdx.x + 1];
    int id = begin < end ? __ldg(p.worker_tasks + begin) : 0;
    TaskRec rec = begin < end ? read_rec(p, id) : TaskRec{};
    for (int i = begin; i < end; ++i) {
      const int next_id = i + 1 < end ? __ldg(p.worker_tasks + i + 1) : id;
      const TaskRec next = read_rec(p, next_id);
      run_task(p, id, rec, smem);
      id = next_id;
      rec = next;
    }
  } else {
    __shared__ int next;
    const unsigned base = (p.step - 1) * (unsigned)(p.num_tasks + gridDim.x);
    for (;;) {
      if (threadIdx.x == 0) next = (int)(atomicAdd(p.queue_counter, 1u) - base);
      __syncthreads();
      const int i = next;
      __syncthreads();
      if (i >= p.num_tasks) break;
      const int id = __ldg(p.order + i);
      run_task(p, id, read_rec(p, id), smem);
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

/// STRATA_MPK_ABI_VERSION of task_abi.h as built in: the driver refuses a task file of another
/// version (its op records would be misread).
int mpk_abi_version() {
  return STRATA_MPK_ABI_VERSION;
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
