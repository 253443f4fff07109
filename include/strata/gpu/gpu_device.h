// The GPU seen at run time: presence, properties and the compile target that matches it.
//
// strata links the CUDA runtime statically and never requires a driver to start: without a
// driver or a device, gpu_count() is 0 and everything else that needs a GPU returns an Error.
#pragma once

#include <cstdint>
#include <string>

#include "strata/util/arch_traits.h"
#include "strata/util/status.h"

namespace strata {

/// Properties of one device that the JIT and the profiler use.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;  ///< e.g. "NVIDIA H100 80GB HBM3"
  /// The device's architecture (arch_traits.h), what the cost model and the planner read too:
  /// the built-in architecture the device's name names (known_arch_for_device; else name
  /// "sm_XY" and unknown peak rates), with every field the device reports measured: compute
  /// capability and sm_arch (arch_for_compute_capability), SMs, shared memory per block
  /// (opt-in) and per SM, registers and threads per SM, L2 size.
  ArchTraits traits;
  int64_t global_mem_bytes = 0;
  int driver_version = 0;  ///< e.g. 13000
  int runtime_version = 0;
  /// The nvcc -arch value for this device: traits.sm_arch.
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
