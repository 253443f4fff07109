#include "strata/result_graphs.h"

#include <set>

#include "strata/graph_io.h"

namespace strata {
namespace {

/// A graph candidate inside an element of a ranked list: the element itself or the first
/// μGraph among its members (depth-first, in key order).
const Json* find_graph(const Json& v, std::string& path) {
  if (is_mugraph_document(v)) return &v;
  if (!v.is_object()) return nullptr;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string sub = path + "." + it.key();
    if (const Json* g = find_graph(it.value(), sub)) {
      path = sub;
      return g;
    }
  }
  return nullptr;
}

std::optional<double> number_at(const Json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

/// The predicted time stored next to a graph in a ranked-list element.
std::optional<double> predicted_time(const Json& element) {
  for (const char* key : {"predicted_us", "predicted_time_us"}) {
    if (auto v = number_at(element, key)) return v;
    if (element.is_object() && element.contains("cost"))
      if (auto v = number_at(element["cost"], key)) return v;
  }
  return std::nullopt;
}

/// The ranked list of a result document, or nullptr.
const Json* ranked_list(const Json& doc, std::string& key) {
  for (const char* k : {"ranked", "candidates", "results", "graphs"}) {
    auto it = doc.find(k);
    if (it == doc.end() || !it->is_array() || it->empty()) continue;
    std::string path;
    if (!find_graph((*it)[0], path)) continue;
    key = k;
    return &*it;
  }
  return nullptr;
}

}  // namespace

bool is_mugraph_document(const Json& doc) {
  return doc.is_object() && doc.contains("inputs") && doc["inputs"].is_array() &&
         doc.contains("ops") && doc["ops"].is_array();
}

Result<std::vector<ResultGraph>> graphs_in_document(const Json& doc, const std::string& origin) {
  std::vector<std::pair<const Json*, std::string>> found;  // (element, path)
  int fastest = -1;                 // index into `found` of the GPU profile's fastest graph
  std::string fastest_knobs = "default";
  if (is_mugraph_document(doc)) {
    found.emplace_back(&doc, "");
  } else if (doc.is_object()) {
    std::string key;
    if (const Json* list = ranked_list(doc, key)) {
      const Json* profile = key == "ranked" && doc.contains("gpu_profile") ? &doc["gpu_profile"]
                                                                            : nullptr;
      if (profile && profile->is_object() && profile->contains("fastest") &&
          (*profile)["fastest"].is_number_integer()) {
        fastest = (*profile)["fastest"].get<int>();
        if (profile->contains("fastest_variant") && (*profile)["fastest_variant"].is_string())
          fastest_knobs = (*profile)["fastest_variant"].get<std::string>();
      }
      for (size_t i = 0; i < list->size(); ++i)
        found.emplace_back(&(*list)[i], key + "[" + std::to_string(i) + "]");
    } else {
      for (const char* k : {"best", "best_graph"})
        if (doc.contains(k)) {
          found.emplace_back(&doc[k], k);
          break;
        }
    }
  }
  if (found.empty())
    return make_error(origin +
                      ": holds no μGraph (expected a μGraph document or a strata optimize "
                      "result with a \"ranked\" list)");
  std::vector<ResultGraph> graphs;
  std::set<std::string> seen;
  for (size_t i = 0; i < found.size(); ++i) {
    const auto& [element, path] = found[i];
    std::string graph_path = path;
    const Json* g = find_graph(*element, graph_path);
    std::string where = graph_path.empty() ? origin : origin + ": " + graph_path;
    if (!g) return make_error(where + ": holds no μGraph");
    STRATA_ASSIGN_OR_RETURN(KernelGraph graph, kernel_graph_from_json(*g, where));
    std::string canonical = kernel_graph_to_json(graph).dump();
    if (!seen.insert(canonical).second) continue;
    graphs.push_back({std::move(graph), where, predicted_time(*element)});
    if (static_cast<int>(i) == fastest) {
      graphs.back().knobs = fastest_knobs;
      graphs.back().profiled_fastest = true;
    }
  }
  return graphs;
}

int preferred_graph(const std::vector<ResultGraph>& graphs) {
  for (size_t i = 0; i < graphs.size(); ++i)
    if (graphs[i].profiled_fastest) return static_cast<int>(i);
  return 0;
}

Result<std::vector<ResultGraph>> load_result_graphs(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, path));
  return graphs_in_document(doc, path);
}

}  // namespace strata
