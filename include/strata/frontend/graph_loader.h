// Loading a graph file of any kind: a .strata program (the frontend's parser), a μGraph JSON
// document or a search result document (the JSON written by `strata optimize -o`). This is
// the dispatch every command and the Python package use; it lives in the frontend module,
// above the IR, because it calls the program parser (docs/architecture.md, "Module order").
#pragma once

#include <cstdint>
#include <string>

#include "strata/ir/graph_io.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// A graph read by load_graph_entry.
struct LoadedGraph {
  KernelGraph graph;
  std::string where;         ///< the file; for a result document, also the entry's JSON path
  bool from_result = false;  ///< the file is a result document (the graph is one of its entries)
  std::string knobs = "default";  ///< emitter knobs the entry was profiled fastest with
};

/// Loads a program, a μGraph or one graph of a result document. `.json` files (or text starting
/// with `{`) are JSON, anything else a .strata program; a leading UTF-8 byte-order mark is
/// skipped. A JSON result document (result_graphs.h: format "strata-search-result", or a
/// "ranked" list) gives its entry ranked[rank] when rank ≥ 0, by default (rank < 0) its
/// profiled fastest entry (gpu_profile.fastest) if it has one, else its best. `rank` is
/// ignored for programs and μGraphs (from_result tells). Errors carry file:line:col or the
/// JSON path.
Result<LoadedGraph> load_graph_entry(const std::string& path, int64_t rank = -1);

/// load_graph_entry(path) without the details: the graph of a program, μGraph or result.
Result<KernelGraph> load_graph(const std::string& path);

}  // namespace strata
