// Writing a compiled task graph (docs/megakernel.md, "The task file").
#include "strata/mpk/task_graph_json.h"

#include "strata/mpk/generated_ops.h"

namespace strata::mpk {

Json task_graph_to_json(const TaskGraph& g) {
  Json j;
  j["format"] = "strata-mpk-tasks";
  j["version"] = 1;
  j["abi_version"] = STRATA_MPK_ABI_VERSION;
  j["model"] = model_config_to_json(g.model);
  j["workers"] = g.options.workers;
  Json buffers = Json::array();
  for (int t : g.buffers) {
    const TensorInfo& T = g.tensors[t];
    buffers.push_back({{"name", T.name},
                       {"kind", T.storage == Storage::Weight ? "weight" : "state"},
                       {"dtype", dtype_name(T.dtype)},
                       {"shape", T.shape}});
  }
  j["buffers"] = buffers;
  Json tensors = Json::array();
  for (const TensorInfo& T : g.tensors) {
    if (T.storage != Storage::Workspace) continue;
    tensors.push_back({{"name", T.name},
                       {"dtype", dtype_name(T.dtype)},
                       {"shape", T.shape},
                       {"offset", T.offset},
                       {"bytes", T.bytes()}});
  }
  j["tensors"] = tensors;
  j["workspace_bytes"] = g.workspace_bytes;
  j["workspace_reuse"] = g.workspace_reuse;
  Json ops = Json::array(), op_names = Json::array();
  for (size_t o = 0; o < g.ops.size(); ++o) {
    ops.push_back(op_record(g, static_cast<int>(o)));
    op_names.push_back(g.ops[o].name);
  }
  Json functions = Json::array();
  for (const GeneratedFunction& f : g.functions) {
    const GeneratedGraph& gg = g.options.generated->at(f.op);
    const GeneratedKernel& k = gg.kernels[f.kernel];
    functions.push_back({{"id", functions.size()},
                         {"entry", k.entry},
                         {"op", f.op},
                         {"kernel_op", k.kernel_op},
                         {"grid", {k.grid.x, k.grid.y, k.grid.z}},
                         {"threads", k.threads},
                         {"smem_bytes", k.smem_bytes},
                         {"args", k.args.size()},
                         {"from", gg.how}});
  }
  j["generated"] = functions;
  j["generated_smem_bytes"] = g.options.generated ? generated_smem_bytes(*g.options.generated) : 0;
  j["op_fields"] = MPK_OP_FIELDS;
  j["ops"] = ops;
  j["op_names"] = op_names;
  std::vector<int32_t> tasks, waits, triggers, counts;
  for (const TaskInfo& t : g.tasks) {
    int32_t rec[MPK_TASK_FIELDS] = {};
    rec[MPK_TASK_OP] = t.op;
    rec[MPK_TASK_I0] = t.i0;
    rec[MPK_TASK_I1] = t.i1;
    rec[MPK_TASK_I2] = t.i2;
    rec[MPK_TASK_WAIT_BEGIN] = static_cast<int32_t>(waits.size());
    rec[MPK_TASK_WAIT_COUNT] = static_cast<int32_t>(t.waits.size());
    rec[MPK_TASK_TRIG_BEGIN] = static_cast<int32_t>(triggers.size());
    rec[MPK_TASK_TRIG_COUNT] = static_cast<int32_t>(t.triggers.size());
    waits.insert(waits.end(), t.waits.begin(), t.waits.end());
    triggers.insert(triggers.end(), t.triggers.begin(), t.triggers.end());
    tasks.insert(tasks.end(), rec, rec + MPK_TASK_FIELDS);
  }
  for (const EventInfo& e : g.events) counts.push_back(static_cast<int32_t>(e.producers.size()));
  j["task_fields"] = MPK_TASK_FIELDS;
  j["tasks"] = tasks;
  j["events"] = counts;
  j["waits"] = waits;
  j["triggers"] = triggers;
  j["order"] = g.order;
  j["worker_lists"] = g.worker_lists;
  Json per_kind = Json::object();
  for (const OpInfo& op : g.ops) {
    const std::string k = std::to_string(op.kind);
    per_kind[k] = per_kind.value(k, 0) + op.num_tasks;
  }
  j["summary"] = {{"ops", g.ops.size()},
                  {"tasks", g.tasks.size()},
                  {"events", g.events.size()},
                  {"waits", waits.size()},
                  {"triggers", triggers.size()},
                  {"tasks_per_kind", per_kind},
                  {"makespan_estimate", g.makespan_estimate}};
  return j;
}

}  // namespace strata::mpk
