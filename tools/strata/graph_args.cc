#include "graph_args.h"

#include "numeric_flags.h"

namespace strata::cli {

void add_rank_option(CLI::App& app, int64_t& rank) {
  rank = -1;
  app.add_option("--rank", rank,
                 "for a search result document (strata optimize -o): use its entry ranked[N] "
                 "(default: the GPU-profiled fastest entry if the result has one, else the "
                 "best)")
      ->type_name("N")
      ->transform(integer_in(0, 1 << 20));
}

Result<std::vector<LoadedGraph>> load_graph_args(const std::vector<std::string>& paths,
                                                 int64_t rank) {
  std::vector<LoadedGraph> graphs;
  bool any_result = false;
  for (const std::string& p : paths) {
    STRATA_ASSIGN_OR_RETURN(LoadedGraph g, load_graph_entry(p, rank));
    any_result = any_result || g.from_result;
    graphs.push_back(std::move(g));
  }
  if (rank >= 0 && !any_result) {
    std::string files;
    for (const std::string& p : paths) files += (files.empty() ? "" : " and ") + p;
    return make_error("--rank " + std::to_string(rank) +
                      " selects an entry of a search result document, but " + files +
                      (paths.size() == 1 ? " is not one" : " are not") +
                      " (expected the JSON written by strata optimize -o)");
  }
  return graphs;
}

Result<LoadedGraph> load_graph_arg(const std::string& path, int64_t rank) {
  STRATA_ASSIGN_OR_RETURN(std::vector<LoadedGraph> g, load_graph_args({path}, rank));
  return std::move(g[0]);
}

}  // namespace strata::cli
