#include "strata/interpreter.h"

#include "interp/executor.h"
#include "util/mix.h"
#include "util/parallel.h"

namespace strata {

Result<std::vector<HostTensor>> run_reference(const KernelGraph& g,
                                              const std::vector<HostTensor>& inputs,
                                              const ExecOptions& options) {
  std::vector<const HostTensor*> ptrs;
  for (const HostTensor& t : inputs) ptrs.push_back(&t);
  interp::ExecConfig cfg;
  cfg.threads = resolve_threads(options.threads);
  return interp::execute(interp::DoubleArith{}, g, ptrs, cfg);
}

std::vector<HostTensor> random_inputs(const KernelGraph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    HostTensor t(g.tensor(g.inputs()[i]).shape);
    uint64_t key = mix64(seed ^ mix64(0x5eedull + i));
    for (int64_t e = 0; e < t.numel(); ++e) {
      uint64_t r = mix64(key + static_cast<uint64_t>(e) * kGolden);
      t[e] = static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0;  // 2·U[0,1) − 1
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace strata
