// `strata device`: the GPU this process sees (exit 1 when there is none), the device runtime
// headers and the toolkit that compile emitted code.
#include <cstdio>

#include "command.h"
#include "strata/codegen/runtime_dir.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/gpu_jit.h"
#endif

namespace strata::cli {
namespace {

std::function<int()> setup(CLI::App& app) {
  return []() -> int {
    auto runtime = find_runtime_dir();
    std::printf("runtime headers: %s\n",
                runtime.ok() ? runtime->c_str() : runtime.error().message.c_str());
#ifdef STRATA_HAVE_CUDA
    JitOptions jit;
    std::printf("nvcc: %s\n", nvcc_executable(jit).c_str());
    auto toolkit = toolkit_version(jit);
    std::printf("toolkit: %s\n", toolkit.ok() ? toolkit->c_str() : toolkit.error().message.c_str());
    std::printf("binary cache: %s\n", binary_cache_dir(jit).c_str());
    int n = gpu_count();
    if (n == 0) {
      std::printf("no CUDA device (no driver or no GPU)\n");
      return kExitFalse;
    }
    for (int d = 0; d < n; ++d) {
      auto info = query_device(d);
      if (!info.ok()) {
        std::fprintf(stderr, "strata: %s\n", info.error().message.c_str());
        return kExitInternal;
      }
      std::printf(
          "device %d: %s, compute %d.%d (%s), %d SMs, L2 %.1f MB, %lld KB shared memory per "
          "block, %.1f GB, driver %d\n",
          d, info->name.c_str(), info->traits.cc_major, info->traits.cc_minor, info->arch().c_str(),
          info->traits.sm_count, info->traits.l2_bytes / 1048576.0,
          static_cast<long long>(info->traits.smem_per_block_bytes / 1024), info->global_mem_bytes / 1e9,
          info->driver_version);
    }
    return kExitOk;
#else
    std::printf("this build has no CUDA support (no toolkit was found at build time)\n");
    return kExitFalse;
#endif
  };
}

}  // namespace

static CommandRegistrar reg{Command{
    "device",
    "show the GPU, the runtime headers, the CUDA toolkit and the binary cache (exit 1 if no GPU)",
    setup, 70}};

}  // namespace strata::cli
