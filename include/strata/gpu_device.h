// The GPU seen at run time: presence, properties and the compile target that matches it.
//
// strata links the CUDA runtime statically and never requires a driver to start: without a
// driver or a device, gpu_count() is 0 and everything else that needs a GPU returns an Error.
#pragma once

#include <cstdint>
#include <string>

#include "strata/status.h"

namespace strata {

/// Properties of one device that the JIT and the profiler use.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;  ///< e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;        ///< L2 cache size
  int64_t smem_per_block = 0;  ///< opt-in maximum shared memory per block
  int64_t global_mem_bytes = 0;
  int driver_version = 0;  ///< e.g. 13000
  int runtime_version = 0;
  /// The nvcc -arch value for this device (see arch_for_compute_capability).
  std::string arch() const;
};

/// Number of CUDA devices usable by this process; 0 when there is no driver or no device
/// (never an error).
int gpu_count();

/// Properties of device `ordinal` (-1: the calling thread's current device).
Result<DeviceInfo> query_device(int ordinal = -1);

/// nvcc -arch for a compute capability: "sm_90a" / "sm_100a" for the architectures whose
/// arch-specific features (wgmma, TMA multicast, tcgen05) generated code may use, "sm_XY"
/// otherwise.
std::string arch_for_compute_capability(int major, int minor);

}  // namespace strata
