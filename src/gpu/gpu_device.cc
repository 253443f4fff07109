#include "strata/gpu/gpu_device.h"

#include <cuda_runtime_api.h>

#include "cuda_check.h"

namespace strata {

std::string arch_for_compute_capability(int major, int minor) {
  std::string base = "sm_" + std::to_string(major) + std::to_string(minor);
  if ((major == 9 && minor == 0) || (major == 10 && minor == 0)) return base + "a";
  return base;
}

std::string DeviceInfo::arch() const {
  return traits.sm_arch;
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
  ArchTraits& t = info.traits;
  if (const ArchTraits* known = known_arch_for_device(info.name))
    t = *known;
  else
    t.name = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  t.cc_major = prop.major;
  t.cc_minor = prop.minor;
  t.sm_arch = arch_for_compute_capability(prop.major, prop.minor);
  t.wgmma = t.sm_arch == "sm_90a";
  t.sm_count = prop.multiProcessorCount;
  t.smem_per_block_bytes = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  t.smem_per_sm_bytes = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  t.registers_per_sm = prop.regsPerMultiprocessor;
  t.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  t.l2_bytes = prop.l2CacheSize;
  info.global_mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

}  // namespace strata
