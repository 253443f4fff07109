// strata device runtime: host-side helpers of the generated launcher (nvcc builds only; the
// device part of a generated file never includes this header, so NVRTC never sees it).
//
// Under STRATA_RT_EMULATE the same calls run the kernels on the CPU emulator instead, through
// emu::enqueue: at once, or queued on their stream inside a StreamFork (strata_rt/streams.cuh).
#pragma once

#if !defined(__CUDACC_RTC__)

#include "strata_rt/core.cuh"

#if !defined(STRATA_RT_EMULATE)
#include <cuda_runtime.h>

#include <atomic>
#endif

namespace strata_rt {
namespace host {

/// Lets `kernel` use `bytes` of dynamic shared memory (required above 48 KB). Returns a
/// cudaError_t value (0 on success).
template <class Kernel>
inline int allow_dynamic_smem(Kernel* kernel, int bytes) {
#if defined(STRATA_RT_EMULATE)
  (void)kernel;
  (void)bytes;
  return 0;
#else
  return static_cast<int>(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
#endif
}

/// Asynchronous device-to-device copy on `stream`; returns a cudaError_t value.
inline int copy_device(void* dst, const void* src, unsigned long long bytes, cudaStream_t stream) {
#if defined(STRATA_RT_EMULATE)
  emu::enqueue(stream, [=] { emu::copy_bytes(dst, src, bytes); });
  return 0;
#else
  return static_cast<int>(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
#endif
}

/// The error state left by the last launch (cudaGetLastError); 0 when none.
inline int last_error() {
#if defined(STRATA_RT_EMULATE)
  return 0;
#else
  return static_cast<int>(cudaGetLastError());
#endif
}

/// The largest L2 access-policy window of the current device (cudaDevAttrMaxAccessPolicyWindowSize),
/// asked once per device and remembered; writes it to `bytes`. Returns a cudaError_t value.
inline int max_access_policy_window(int* bytes) {
#if defined(STRATA_RT_EMULATE)
  *bytes = 0;
  return 0;
#else
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // window + 1; 0 = not asked yet (zero-initialized)
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int cached = device < kDevices ? known[device].load(std::memory_order_relaxed) : 0;
  if (cached > 0) {
    *bytes = cached - 1;
    return 0;
  }
  err = cudaDeviceGetAttribute(bytes, cudaDevAttrMaxAccessPolicyWindowSize, device);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (device < kDevices) known[device].store(*bytes + 1, std::memory_order_relaxed);
  return 0;
#endif
}

/// Launches `kernel(args...)` on `grid` × `block` threads with `smem` bytes of dynamic shared
/// memory, with an L2 access-policy window that marks [base, base + bytes) as streaming: the
/// kernel reads each of those bytes once, so L2 evicts their lines first and keeps what is read
/// again (the other inputs, the kernel's intermediates). The window is clamped to the device's
/// maximum (cudaDevAttrMaxAccessPolicyWindowSize); where that is 0 the launch has no window.
/// A hint only: what the kernel computes does not change. Returns a cudaError_t value.
template <class... Params, class... Args>
inline int launch_streaming(void (*kernel)(Params...), dim3 grid, dim3 block, int smem,
                            cudaStream_t stream, const void* base, unsigned long long bytes,
                            Args... args) {
#if defined(STRATA_RT_EMULATE)
  (void)base;
  (void)bytes;
  emu::enqueue(stream, [=] { emu::launch(grid, block, smem, [=] { kernel(args...); }); });
  return 0;
#else
  int max_window = 0;
  if (int err = max_access_policy_window(&max_window)) return err;
  cudaLaunchAttribute window[1];
  window[0].id = cudaLaunchAttributeAccessPolicyWindow;
  window[0].val.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  window[0].val.accessPolicyWindow.num_bytes =
      bytes < static_cast<unsigned long long>(max_window) ? bytes : max_window;
  window[0].val.accessPolicyWindow.hitRatio = 1.0f;
  window[0].val.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
  window[0].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  config.attrs = window;
  config.numAttrs = max_window > 0 ? 1 : 0;
  return static_cast<int>(cudaLaunchKernelEx(&config, kernel, args...));
#endif
}

}  // namespace host
}  // namespace strata_rt

/// Launches `kernel` on `grid` × `block` threads with `smem` bytes of dynamic shared memory.
#if defined(STRATA_RT_EMULATE)
#define STRATA_RT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::strata_rt::emu::enqueue(                                     \
      stream, [=] { ::strata_rt::emu::launch(grid, block, smem, [=] { kernel(__VA_ARGS__); }); })
#else
#define STRATA_RT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#endif

#endif  // !__CUDACC_RTC__
