// The task graph of one decode step: the kernel-level ops of a decoder-only transformer, each
// split into tasks (one thread block's share), the events that order them, a topological order,
// a static assignment to workers and the activation memory plan (docs/megakernel.md, "The task
// graph").
//
// Invariants of a compiled TaskGraph (checked by validate_task_graph, task_graph_check.h):
//  - dependencies come from footprints: a task waits, through events, on exactly the tasks of
//    the same step that write a region of a tensor it reads (tile granularity);
//  - an event's count is the number of tasks that trigger it; a task triggers every event whose
//    producer set holds it; consumers with the same producer set share one event;
//  - `order` is a topological order of the tasks; each worker list is a subsequence of it, and
//    the lists partition the tasks (so a persistent kernel with every worker resident cannot
//    deadlock: the first unfinished task in `order` always has its inputs ready);
//  - workspace tensors overlap in memory only when every access to the earlier one happens
//    before (through the dependencies) every write of the later one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/mpk/model_config.h"
#include "strata/mpk/task_abi.h"
#include "strata/util/status.h"

namespace strata::mpk {

struct GeneratedGraph;
using GeneratedSet = std::map<std::string, GeneratedGraph>;

enum class DType { F16, F32, I32, ArgMax /* {f32 value, i32 index}: 8 bytes */ };
int64_t dtype_bytes(DType t);
const char* dtype_name(DType t);

/// Where a tensor lives: the activation workspace (planned), a model weight, or persistent
/// state kept across steps (the KV caches). Weights and state are "buffers" with ids.
enum class Storage { Workspace, Weight, State };

/// A tensor of the step, viewed as a matrix [rows, cols] (row-major) for footprints.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F16;
  std::vector<int64_t> shape;
  int64_t rows = 1, cols = 1;  ///< the 2-D view: rows = shape[0], cols = the rest
  Storage storage = Storage::Workspace;
  int64_t buffer = -1;  ///< buffer id (weights and state)
  int64_t offset = -1;  ///< workspace byte offset (set by the memory plan)
  bool keep = false;    ///< a step output (logits): never shares memory with another tensor
  int64_t bytes() const { return rows * cols * dtype_bytes(dtype); }
};

/// A rectangle [r0, r1) × [c0, c1) of a tensor's 2-D view.
struct Region {
  int tensor = -1;
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  bool overlaps(const Region& o) const {
    return tensor == o.tensor && r0 < o.r1 && o.r0 < r1 && c0 < o.c1 && o.c0 < c1;
  }
};

/// A kernel-level op: the operands of its ABI record (task_abi.h) as tensor ids (workspace
/// tensors) and buffer ids (weights, state); op_record resolves them to the device record.
struct OpInfo {
  int kind = 0;  ///< MPK_* of task_abi.h
  std::string name;
  int64_t layer = -1;
  int in0 = -1, in1 = -1, in2 = -1, out0 = -1, out1 = -1;  ///< workspace tensor ids or -1
  int64_t w[5] = {-1, -1, -1, -1, -1};                     ///< buffer ids or -1
  int64_t k = -1, n = -1, tile = -1, ntiles = -1;
  int first_task = 0, num_tasks = 0;
  /// MPK_GENERATED: the task entry (an index of TaskGraph::functions) and its operands, tensor
  /// ids in the entry's parameter order (workspace tensors, or weights by their tensor).
  int func = -1;
  std::vector<int> args;
};

/// A task entry of the generated header: kernel `kernel` (an index of GeneratedGraph::kernels)
/// of the μGraph of op program `op`.
struct GeneratedFunction {
  std::string op;
  int kernel = 0;
};

struct TaskInfo {
  int op = 0;
  int32_t i0 = 0, i1 = 0, i2 = 0;
  std::vector<Region> reads, writes;
  std::vector<int> waits;     ///< event ids
  std::vector<int> triggers;  ///< event ids
  double cost = 0;            ///< estimated bytes moved (the schedule's unit)
};

struct EventInfo {
  std::vector<int> producers;  ///< sorted task ids; the count is producers.size()
};

/// Options of the compiler.
struct CompileOptions {
  int64_t workers = 132;             ///< persistent blocks (one per SM)
  int64_t max_tile_bytes = 1 << 19;  ///< upper bound on the weight bytes one matmul task reads
  int64_t attn_chunks = 0;           ///< KV chunks per (batch row, kv head); 0: workers / (B·Hkv)
  /// Ops computed by generated μGraphs (generated_ops.h), by op program name; the others (and
  /// every op when null) are the hand-written tasks.
  std::shared_ptr<const GeneratedSet> generated;
};

struct TaskGraph {
  ModelConfig model;
  CompileOptions options;
  std::vector<TensorInfo> tensors;
  std::vector<int> buffers;  ///< buffer id -> tensor id (weights, then state)
  std::vector<OpInfo> ops;
  std::vector<GeneratedFunction> functions;  ///< the task entries MPK_GENERATED ops use
  std::vector<TaskInfo> tasks;
  std::vector<EventInfo> events;
  std::vector<int> order;                      ///< a topological order of the tasks
  std::vector<std::vector<int>> worker_lists;  ///< static per-worker lists (subsequences of order)
  int64_t workspace_bytes = 0;
  bool workspace_reuse = true;   ///< false: the graph was too large to prove reuse safe, so
                                 ///< every workspace tensor has its own memory
  double makespan_estimate = 0;  ///< of the static lists, in cost units (bytes / worker)
};

/// The ABI record of op `op` (MPK_OP_FIELDS values; workspace offsets from the memory plan).
std::vector<int64_t> op_record(const TaskGraph& g, int op);

/// Most tasks a step may have (checked before any is made).
inline constexpr int64_t kMaxTasks = int64_t{1} << 18;

/// Builds the ops, tasks, footprints, events and order of one step of `model` (no schedule, no
/// memory plan: see assign_workers and plan_workspace). Errors on invalid options and on
/// models of more than kMaxTasks tasks.
Result<TaskGraph> build_task_graph(const ModelConfig& model, const CompileOptions& options);

/// The whole compiler: build_task_graph, then plan_workspace and assign_workers.
Result<TaskGraph> compile_task_graph(const ModelConfig& model, const CompileOptions& options);

/// Columns per task of a matmul with N output columns and K inputs (`weights` matrices of N×K,
/// 2 for the gated MLP): the multiple of 8 (or N) that minimizes the time of the busiest worker,
/// ⌈⌈N/t⌉/workers⌉·(t·K·2·weights + a fixed per-task overhead), with at most max_tile_bytes of
/// weight per task; larger on ties.
int64_t choose_matmul_tile(int64_t n, int64_t k, int64_t weights, const CompileOptions& o);

}  // namespace strata::mpk
