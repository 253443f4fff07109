// Reading the graphs out of a result document: a μGraph JSON file or the RESULT.json written
// by `strata optimize` (docs/gpu-runtime.md, "Result documents").
//
// The runtime, the profiler and `strata profile` accept either. A μGraph document (an object
// with "inputs" and "ops") is one graph. In a result document the ranked list is used: the
// first array found under "ranked", "candidates", "results" or "graphs" whose elements are
// μGraphs or objects holding one (under any key); failing that, a μGraph under "best" or
// "best_graph". The order of the document is kept (best first) and duplicate graphs are
// dropped. A candidate's predicted time is read, when present, from the element's
// "predicted_us" or "cost": {"predicted_us"} (also "predicted_time_us").
//
// When a result carries the GPU profile of `strata optimize` ("gpu_profile": {"fastest": rank,
// "fastest_variant": knob spec}), the graph at that rank of the ranked list is marked as the
// profiled fastest and carries the emitter knobs it was timed with (include/strata/codegen/emit_knobs.h).
//
// The commands of the tool take one graph of a result document (result_graph_at, used by
// load_graph_entry in graph_loader.h): ranked[N] for `--rank N`, by default the profiled fastest
// entry when the document has a GPU profile with one, else the entry at "best" (else 0).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/ir/graph_json.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// One graph of a result document.
struct ResultGraph {
  KernelGraph graph;
  std::string where;                   ///< origin and JSON path, e.g. "r.json: ranked[2].graph"
  std::optional<double> predicted_us;  ///< the cost model's prediction, when the document has one
  std::string knobs = "default";  ///< emitter knobs it was profiled fastest with ("default": none)
  bool profiled_fastest = false;  ///< the fastest correct candidate of the document's GPU profile
  int rank = -1;      ///< index in the document's ranked list; -1 when not from a ranked list
  bool best = false;  ///< the entry the document's "best" names
  /// The entry's "derived" field: how a graph the enumeration did not find was made
  /// ("split_kv", "pointwise_seed", "prologue_fold"; docs/search.md); empty otherwise.
  std::string derived;
};

/// Index of the graph marked profiled_fastest, else of the one marked best, else 0.
int preferred_graph(const std::vector<ResultGraph>& graphs);

/// True when `doc` is a μGraph document (an object with "inputs" and "ops" arrays).
bool is_mugraph_document(const Json& doc);
/// True when `doc` is a result document: not a μGraph document, and either of format
/// "strata-search-result" or holding one of the keys this header reads graphs from.
bool is_result_document(const Json& doc);

/// The graphs of a μGraph or result document, best first. An Error names the JSON path of a
/// graph that does not load, or says that the document holds no graph.
Result<std::vector<ResultGraph>> graphs_in_document(const Json& doc, const std::string& origin);

/// One graph of a result (or μGraph) document: ranked[rank] for rank ≥ 0; for rank < 0 the
/// profiled fastest entry, else the entry named by "best", else the first. Only that graph is
/// loaded. An Error for a rank beyond the list, naming the ranks there are.
Result<ResultGraph> result_graph_at(const Json& doc, const std::string& origin, int64_t rank);

/// Reads `path` and returns graphs_in_document of it.
Result<std::vector<ResultGraph>> load_result_graphs(const std::string& path);

}  // namespace strata
