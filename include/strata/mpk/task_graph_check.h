// Checking the invariants of a compiled task graph (task_graph.h lists them; docs/megakernel.md,
// "Invariants").
#pragma once

#include "strata/mpk/task_graph.h"
#include "strata/util/status.h"

namespace strata::mpk {

/// Checks: op and task tables consistent; `order` a permutation in which every producer of every
/// waited event comes before the waiting task (so the graph is acyclic); every event's count
/// equals the tasks that list it as a trigger; every region read is covered: each task that
/// writes an overlapping region in an earlier op produces one of the reader's events; no two
/// tasks write overlapping regions; the worker lists partition the tasks, each in `order`; the
/// workspace plan keeps tensors apart unless every access of one happens before every write
/// of the other, and within workspace_bytes. The error names the first violation.
Status validate_task_graph(const TaskGraph& g);

}  // namespace strata::mpk
