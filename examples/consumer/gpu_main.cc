// strata's GPU runtime used as a library: reports the CUDA devices this process sees. Runs
// (and reports none) on machines without a GPU or driver, since strata::gpu links the CUDA
// runtime statically and loads the driver lazily.
#include <cstdio>

#include "strata/gpu/gpu_device.h"

int main() {
  const int n = strata::gpu_count();
  std::printf("strata::gpu: %d CUDA device(s)\n", n);
  for (int d = 0; d < n; ++d) {
    auto info = strata::query_device(d);
    if (info.ok()) std::printf("  %d: %s (%s)\n", d, info->name.c_str(), info->arch().c_str());
  }
  return 0;
}
