#include "strata/interp/interpreter.h"

#include <unistd.h>

#include <cstdio>

#include "interp/executor.h"
#include "strata/ir/rank_expansion.h"
#include "util/mix.h"
#include "util/parallel.h"

namespace strata {

Result<std::vector<HostTensor>> run_reference(const KernelGraph& g,
                                              const std::vector<HostTensor>& inputs,
                                              const ExecOptions& options) {
  if (g.ranks() > 1) {  // every rank on its shard: the unsharded form (docs/tensor-parallel.md)
    STRATA_ASSIGN_OR_RETURN(KernelGraph full, expand_ranks(g));
    return run_reference(full, inputs, options);
  }
  STRATA_RETURN_IF_ERROR(check_host_size(g));
  std::vector<const HostTensor*> ptrs;
  for (const HostTensor& t : inputs) ptrs.push_back(&t);
  interp::ExecConfig cfg;
  cfg.threads = resolve_threads(options.threads);
  return interp::execute(interp::DoubleArith{}, g, ptrs, cfg);
}

Status check_host_size(const KernelGraph& g, int64_t bytes_per_element) {
  int64_t bytes = 0;
  for (const KernelTensor& t : g.tensors())
    bytes = saturating_add(bytes, saturating_mul(t.shape.numel(), bytes_per_element));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int64_t physical = pages > 0 && page > 0 ? saturating_mul(pages, page) : int64_t{1} << 40;
  if (bytes <= physical) return Status::success();
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "the graph's tensors need %.3g GB of host memory to evaluate on the CPU, more "
                "than this machine's %.3g GB; expected a graph small enough for the CPU "
                "reference",
                static_cast<double>(bytes) / 1e9, static_cast<double>(physical) / 1e9);
  return make_error(msg);
}

std::vector<HostTensor> random_inputs(const KernelGraph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    HostTensor t(full_input_shape(g, static_cast<int>(i)));
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
