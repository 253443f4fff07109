// JSON views of cost-model predictions (cost_model.h), shared by `strata cost --json` and the
// search result document (docs/search.md, "Result format").
#pragma once

#include "strata/cost/cost_model.h"
#include "strata/ir/graph_json.h"

namespace strata {

/// {"op_id", "label", "load_bytes", "l2_bytes", "narrow_bytes", "store_bytes", "tensor_flops",
///  "simt_flops", "blocks", "forloop", "waves", "alpha", "underfill", "t_mem_us", "t_comp_us",
///  "predicted_us", "smem_bytes", "library"}, and with the kernel's code features
///  (KernelCost::code, when present) "threads", "loop_groups", "loop_ops", "once_ops",
///  "loop_barriers", "once_barriers", "loop_reduce_steps", "once_reduce_steps".
Json kernel_cost_to_json(const KernelCost& k);

/// {"target", "predicted_us", "kernels": [kernel_cost_to_json …]}.
Json graph_cost_to_json(const GraphCost& c, const Target& t);

}  // namespace strata
