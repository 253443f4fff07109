#include "strata/frontend/graph_loader.h"

#include "strata/ir/graph_json.h"
#include "strata/frontend/program_parser.h"
#include "strata/ir/result_graphs.h"

namespace strata {

Result<LoadedGraph> load_graph_entry(const std::string& path, int64_t rank) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  std::string_view body = skip_utf8_bom(text);
  size_t first = body.find_first_not_of(" \t\r\n");
  bool is_json = (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) ||
                 (first != std::string::npos && body[first] == '{');
  if (!is_json) {
    STRATA_ASSIGN_OR_RETURN(KernelGraph g, parse_program(body, path));
    return LoadedGraph{std::move(g), path, false};
  }
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(body, path));
  if (!is_result_document(doc)) {
    STRATA_ASSIGN_OR_RETURN(KernelGraph g, kernel_graph_from_json(doc, path));
    return LoadedGraph{std::move(g), path, false};
  }
  STRATA_ASSIGN_OR_RETURN(ResultGraph r, result_graph_at(doc, path, rank));
  return LoadedGraph{std::move(r.graph), r.where, true, r.knobs};
}

Result<KernelGraph> load_graph(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(LoadedGraph g, load_graph_entry(path));
  return std::move(g.graph);
}

}  // namespace strata
