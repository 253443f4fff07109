#include "strata/util/arch_traits.h"

#include <cctype>

namespace strata {

const std::vector<ArchTraits>& known_archs() {
  // Data sheets and cudaDeviceProp of each part (docs/cost-model.md, "Targets"): H100 SXM
  // and H200 share the SM (Hopper, 132 SMs, 227 KB opt-in shared memory per block, 228 KB
  // per SM); the A100 has 108 SMs and 163 KB per block, 164 KB per SM.
  static const std::vector<ArchTraits> table = {
      // name  sm_arch  cc  SMs  smem/block  smem/SM  regs/SM  threads/SM  L2  DRAM B/s
      //   tensor FLOP/s  wgmma (sm_90a)
      {"h100", "sm_90a", 9, 0, 132, 232448, 233472, 65536, 2048, 50 << 20, 3.35e12, 989e12, true},
      {"h200", "sm_90a", 9, 0, 132, 232448, 233472, 65536, 2048, 60 << 20, 4.8e12, 989e12, true},
      {"a100", "sm_80", 8, 0, 108, 166912, 167936, 65536, 2048, 40 << 20, 2.039e12, 312e12, false},
  };
  return table;
}

Result<ArchTraits> ArchTraits::by_name(std::string_view name) {
  std::string valid;
  for (const ArchTraits& a : known_archs()) {
    if (a.name == name) return a;
    valid += (valid.empty() ? "" : ", ") + a.name;
  }
  return make_error("unknown target `" + std::string(name) + "`; valid targets: " + valid);
}

const ArchTraits& ArchTraits::default_arch() {
  return known_archs().front();
}

const ArchTraits* known_arch_for_device(std::string_view device_name) {
  std::string lower;
  for (char c : device_name) lower.push_back(static_cast<char>(std::tolower(c)));
  for (const ArchTraits& a : known_archs())
    if (lower.find(a.name) != std::string::npos) return &a;
  return nullptr;
}

}  // namespace strata
