// The graph arguments shared by the commands that take a program or μGraph (check, show, run,
// equiv, cost, emit, profile, optimize): each may also be a search result document (the JSON
// written by `strata optimize -o`), from which `--rank N` picks ranked[N]; without --rank the
// profiled fastest entry (gpu_profile.fastest) is taken if there is one, else the best.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/util/status.h"

namespace strata::cli {

/// Adds `--rank N` (parsed into `rank`; -1 when not given) to `app`.
void add_rank_option(CLI::App& app, int64_t& rank);

/// Loads each of `paths` with load_graph_entry(path, rank). With rank ≥ 0, at least one of
/// them must be a result document; otherwise an error says that --rank has nothing to select.
Result<std::vector<LoadedGraph>> load_graph_args(const std::vector<std::string>& paths,
                                                 int64_t rank);
/// The one-file case of load_graph_args.
Result<LoadedGraph> load_graph_arg(const std::string& path, int64_t rank);

}  // namespace strata::cli
