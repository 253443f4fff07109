// The one description of a GPU architecture (docs/architecture.md, "GPU architectures"): the
// hardware facts the cost model (Target), the kernel planner (PlanOptions::for_arch) and the
// runtime (DeviceInfo::traits) all read, so that no module keeps its own copy of them.
//
// Facts only: what the data sheets and the CUDA device properties give. The cost model's
// fitted rates (sustained bandwidths, effective tensor rate, launch overhead, …) are the
// Target's own (cost_model.h, docs/cost-model.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata {

struct ArchTraits {
  std::string name;                  ///< "h100" | "h200" | "a100"
  std::string sm_arch;               ///< nvcc -arch for the architecture, e.g. "sm_90a"
  int cc_major = 0, cc_minor = 0;    ///< compute capability
  int sm_count = 0;                  ///< streaming multiprocessors
  int64_t smem_per_block_bytes = 0;  ///< opt-in shared memory per thread block
  int64_t smem_per_sm_bytes = 0;     ///< shared memory per SM (bounds co-resident blocks)
  int registers_per_sm = 0;          ///< 32-bit registers per SM
  int max_threads_per_sm = 0;        ///< resident threads per SM
  int64_t l2_bytes = 0;              ///< L2 cache size
  double peak_dram_Bps = 0;          ///< data-sheet DRAM bandwidth, bytes/s (0: unknown)
  double peak_tensor_flops = 0;  ///< data-sheet dense fp16 tensor-core rate, FLOP/s (0: unknown)
  /// Warpgroup MMA (wgmma.mma_async): the architecture is compiled for sm_90a, where the code
  /// generator can emit it under the knob `wgmma` (docs/codegen.md, "wgmma"), and the cost model
  /// plans the kernels as that tuning variant does (docs/cost-model.md, "Warpgroup MMA").
  bool wgmma = false;

  /// The built-in architecture of that name; the error lists the valid names.
  static Result<ArchTraits> by_name(std::string_view name);
  /// The architecture the planner assumes when none is named: h100.
  static const ArchTraits& default_arch();
};

/// The built-in architectures, in the order they are listed to users.
const std::vector<ArchTraits>& known_archs();

/// The built-in architecture a device is, by its name (CUDA's, e.g. "NVIDIA H200"): the first
/// whose name it contains, ignoring case; null when none matches.
const ArchTraits* known_arch_for_device(std::string_view device_name);

}  // namespace strata
