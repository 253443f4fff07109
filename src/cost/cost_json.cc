#include "strata/cost/cost_json.h"

namespace strata {

Json kernel_cost_to_json(const KernelCost& k) {
  Json j;
  j["op_id"] = k.op_id;
  j["label"] = k.label;
  j["load_bytes"] = k.load_bytes;
  j["l2_bytes"] = k.l2_bytes;
  j["narrow_bytes"] = k.narrow_bytes;
  j["store_bytes"] = k.store_bytes;
  j["tensor_flops"] = k.tensor_flops;
  j["wgmma_flops"] = k.wgmma_flops;
  j["simt_flops"] = k.simt_flops;
  j["blocks"] = k.blocks;
  j["forloop"] = k.forloop;
  j["waves"] = k.waves;
  j["blocks_per_sm"] = k.blocks_per_sm;
  j["alpha"] = k.alpha;
  j["underfill"] = k.underfill;
  j["t_mem_us"] = k.t_mem_s * 1e6;
  j["t_comp_us"] = k.t_comp_s * 1e6;
  j["t_simt_us"] = k.t_simt_s * 1e6;
  j["t_pass_us"] = k.t_pass_s * 1e6;
  j["t_sync_us"] = k.t_sync_s * 1e6;
  j["t_latency_us"] = k.t_latency_s * 1e6;
  j["t_throughput_us"] = k.t_throughput_s * 1e6;
  j["predicted_us"] = k.predicted_s * 1e6;
  j["smem_bytes"] = k.smem_bytes;
  j["library"] = k.library;
  if (k.code) {
    j["threads"] = k.code->threads;
    j["loop_groups"] = k.code->loop_groups;
    j["loop_ops"] = k.code->loop_ops;
    j["once_ops"] = k.code->once_ops;
    j["loop_barriers"] = k.code->loop_barriers;
    j["once_barriers"] = k.code->once_barriers;
    j["loop_reduce_steps"] = k.code->loop_reduce_steps;
    j["once_reduce_steps"] = k.code->once_reduce_steps;
    j["loop_simt_mm_steps"] = k.code->loop_simt_mm_steps;
    j["once_simt_mm_steps"] = k.code->once_simt_mm_steps;
    j["loop_pass_steps"] = k.code->loop_pass_steps;
    j["once_pass_steps"] = k.code->once_pass_steps;
    j["register_loads"] = k.code->register_loads;
  }
  return j;
}

Json graph_cost_to_json(const GraphCost& c, const Target& t) {
  Json j;
  j["target"] = t.name;
  j["predicted_us"] = c.predicted_us;
  // The rate the kernels' wgmma_flops were charged at (0: a target without wgmma).
  j["wgmma_tensor_flops"] = t.wgmma_tensor_flops;
  Json ks = Json::array();
  for (const KernelCost& k : c.kernels) ks.push_back(kernel_cost_to_json(k));
  j["kernels"] = ks;
  return j;
}

}  // namespace strata
