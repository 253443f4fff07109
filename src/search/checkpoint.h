// Checkpoints of a stopped search (docs/search.md, "Cache and checkpoints"): which tasks of
// the enumeration are done, where unfinished ones stopped and their statistics, and the
// candidate pool, in the checked envelope of search_cache.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "search/candidate_pool.h"
#include "search/enumerator.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata::search {

/// State carried from one run to the next through a checkpoint.
struct Progress {
  std::vector<char> done;  ///< per task
  TaskStats done_stats;    ///< collection pass + finished tasks
  /// Unfinished tasks that finished some subtrees: where to continue, and their statistics
  /// up to there (docs/search.md, "Resuming inside a task").
  std::map<size_t, TaskResume> partial;
  std::vector<KernelGraph> pool;
};

/// Writes `p` and the pool (fused graphs, program included) to `path`, keyed by the search's
/// cache key and the program hash.
Status write_checkpoint(const std::string& path, const std::string& key, const std::string& program,
                        const Progress& p, const std::vector<PoolEntry>& pool);

/// Loads a checkpoint into `p`; errors (never exceptions: a damaged file is not fatal) leave
/// `p` untouched. A missing file's message starts with "missing: ". Pool graphs restored from
/// it are screened and verified like any other.
Status read_checkpoint(const std::string& path, const std::string& key, const std::string& program,
                       const std::vector<TaskPath>& tasks, Progress& p);

}  // namespace strata::search
