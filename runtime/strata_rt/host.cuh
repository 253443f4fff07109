// strata device runtime: host-side helpers of the generated launcher (nvcc builds only; the
// device part of a generated file never includes this header, so NVRTC never sees it).
//
// Under STRATA_RT_EMULATE the same calls run the kernels on the CPU emulator instead.
#pragma once

#if !defined(__CUDACC_RTC__)

#include "strata_rt/core.cuh"

#if !defined(STRATA_RT_EMULATE)
#include <cuda_runtime.h>
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
  (void)stream;
  emu::copy_bytes(dst, src, bytes);
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

}  // namespace host
}  // namespace strata_rt

/// Launches `kernel` on `grid` × `block` threads with `smem` bytes of dynamic shared memory.
#if defined(STRATA_RT_EMULATE)
#define STRATA_RT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::strata_rt::emu::launch(grid, block, smem, [=] { kernel(__VA_ARGS__); })
#else
#define STRATA_RT_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#endif

#endif  // !__CUDACC_RTC__
