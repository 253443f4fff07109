// Reading and writing graph files: .strata programs, μGraph JSON documents and search result
// documents (the JSON written by `strata optimize -o`).
#pragma once

#include <cstdint>
#include <string>

#include "strata/kernel_graph.h"
#include "strata/status.h"

namespace strata {

/// The most bytes read_text_file reads by default (1 GiB): far beyond any program, μGraph or
/// result document, and a bound on what an endless or enormous file can make strata allocate.
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

/// Reads a whole file; the error names the path when it cannot be read, is a directory or is
/// larger than `max_bytes`.
Result<std::string> read_text_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);
/// Writes a whole file atomically (temporary file + rename).
Status write_text_file(const std::string& path, const std::string& text);

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

/// Writes a kernel graph as μGraph JSON.
Status save_graph_json(const KernelGraph& g, const std::string& path);

}  // namespace strata
