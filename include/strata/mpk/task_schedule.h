// The schedule and memory plan of a task graph (docs/megakernel.md, "Schedule and memory").
#pragma once

#include <cstdint>
#include <vector>

#include "strata/mpk/task_graph.h"

namespace strata::mpk {

/// For every task, the set of tasks that happen before it (transitively through its events),
/// as bitsets of ⌈tasks/64⌉ words. Needs g.order to be topological.
std::vector<std::vector<uint64_t>> task_ancestors(const TaskGraph& g);

/// Places the workspace tensors: each at the lowest offset (256-byte aligned) where every
/// tensor it overlaps is dead before it is written — every access of the overlapped tensor
/// happens before every write of the new one. Sets offsets and g.workspace_bytes, and the
/// workspace offsets in the op records.
void plan_workspace(TaskGraph& g);

/// Static per-worker lists: list scheduling in `order`, each task to the worker where it can
/// start (its events fired and the worker idle) earliest in a model where a task takes its
/// cost plus a fixed overhead. Sets worker_lists and makespan_estimate.
void assign_workers(TaskGraph& g);

}  // namespace strata::mpk
