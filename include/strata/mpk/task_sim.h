// A simulated persistent kernel: workers that run the task graph's schedule in random
// interleavings (docs/megakernel.md, "Testing").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/mpk/task_graph.h"
#include "strata/util/status.h"

namespace strata::mpk {

/// How workers get tasks: their static lists, or the next task of `order` from a shared counter.
enum class SchedulePolicy { StaticLists, GlobalQueue };

struct SimHooks {
  /// Called when task t starts (inputs ready) and when it finishes; either may be empty.
  std::function<void(int)> on_start, on_finish;
};

/// Runs every task once: at each step a random enabled action happens — a worker whose next task
/// has all its events fired starts it, or a running task finishes and triggers its events. Each
/// start is checked against the footprints directly (every task of an earlier op that writes a
/// region the task reads has finished). Returns the start order, or an error naming the task
/// that started too early, or the deadlock (no action enabled before every task ran).
Result<std::vector<int>> simulate(const TaskGraph& g, SchedulePolicy policy, uint64_t seed,
                                  const SimHooks& hooks = {});

}  // namespace strata::mpk
