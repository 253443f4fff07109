// The compiled task graph as a JSON document, the input of the device runtime's host driver
// (docs/megakernel.md, "The task file").
#pragma once

#include "strata/ir/json_read.h"
#include "strata/mpk/task_graph.h"

namespace strata::mpk {

/// format "strata-mpk-tasks", version 1: the model, the ABI version, buffers (name, kind,
/// dtype, shape), workspace tensors (name, dtype, shape, offset), the op records, the task
/// records (MPK_TASK_FIELDS each, flattened), event counts, waits, triggers, order and the
/// static worker lists, plus a summary (counts, workspace bytes, schedule estimate).
Json task_graph_to_json(const TaskGraph& g);

}  // namespace strata::mpk
