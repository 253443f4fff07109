#include "strata/gpu_device.h"

#include <cuda_runtime_api.h>

#include "cuda_check.h"

namespace strata {

std::string arch_for_compute_capability(int major, int minor) {
  std::string base = "sm_" + std::to_string(major) + std::to_string(minor);
  if ((major == 9 && minor == 0) || (major == 10 && minor == 0)) return base + "a";
  return base;
}

std::string DeviceInfo::arch() const {
  return arch_for_compute_capability(cc_major, cc_minor);
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls are not affected
    return 0;
  }
  return n;
}

Result<DeviceInfo> query_device(int ordinal) {
  int count = gpu_count();
  if (count == 0) return make_error("no CUDA device is available (no driver or no GPU)");
  if (ordinal < 0)
    STRATA_RETURN_IF_ERROR(gpu::cuda_status("cudaGetDevice", cudaGetDevice(&ordinal)));
  if (ordinal >= count)
    return make_error("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                      std::to_string(count) + " present)");
  cudaDeviceProp prop{};
  STRATA_RETURN_IF_ERROR(
      gpu::cuda_status("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, ordinal)));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.smem_per_block = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  info.global_mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

}  // namespace strata
