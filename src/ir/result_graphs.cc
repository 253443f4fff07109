#include "strata/ir/result_graphs.h"

#include <set>

#include "strata/ir/graph_io.h"

namespace strata {
namespace {

constexpr const char* kSearchResultFormat = "strata-search-result";

/// A graph candidate inside an element of a ranked list: the element itself or the first
/// μGraph among its members (depth-first, in key order). Recursion is bounded by the nesting
/// limit of parse_json_text.
const Json* find_graph(const Json& v, std::string& path) {
  if (is_mugraph_document(v)) return &v;
  if (!v.is_object()) return nullptr;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string sub = path + "." + json_quote(it.key());
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
  if (!doc.is_object()) return nullptr;
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

/// An index into a list of `size` entries stored at `key` of `obj`, if it is one.
std::optional<int64_t> index_at(const Json& obj, const char* key, size_t size) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  auto i = json_int(*it, key, 0, static_cast<int64_t>(size) - 1);
  if (!i.ok()) return std::nullopt;
  return *i;
}

/// What a result document says about its ranked list: the GPU profile's fastest rank and its
/// knobs, and the best rank.
struct ListInfo {
  std::optional<int64_t> fastest;
  std::string fastest_knobs = "default";
  std::optional<int64_t> best;
};

ListInfo list_info(const Json& doc, const std::string& key, size_t size) {
  ListInfo info;
  if (key != "ranked") return info;
  info.best = index_at(doc, "best", size);
  auto profile = doc.find("gpu_profile");
  if (profile == doc.end() || !profile->is_object()) return info;
  info.fastest = index_at(*profile, "fastest", size);
  if (auto v = profile->find("fastest_variant"); v != profile->end() && v->is_string())
    info.fastest_knobs = v->get<std::string>();
  return info;
}

/// Loads the graph of element `i` of a ranked list stored at `key`.
Result<ResultGraph> element_graph(const Json& list, const std::string& key, size_t i,
                                  const std::string& origin, const ListInfo& info) {
  std::string graph_path = key + "[" + std::to_string(i) + "]";
  const Json* g = find_graph(list[i], graph_path);
  std::string where = origin + ": " + graph_path;
  if (!g) return make_error(where + ": holds no μGraph");
  STRATA_ASSIGN_OR_RETURN(KernelGraph graph, kernel_graph_from_json(*g, where));
  ResultGraph r{std::move(graph), where, predicted_time(list[i])};
  r.rank = static_cast<int>(i);
  if (info.fastest && *info.fastest == static_cast<int64_t>(i)) {
    r.knobs = info.fastest_knobs;
    r.profiled_fastest = true;
  }
  r.best = info.best && *info.best == static_cast<int64_t>(i);
  if (auto d = list[i].find("derived"); d != list[i].end() && d->is_string())
    r.derived = d->get<std::string>();
  return r;
}

}  // namespace

bool is_mugraph_document(const Json& doc) {
  return doc.is_object() && doc.contains("inputs") && doc["inputs"].is_array() &&
         doc.contains("ops") && doc["ops"].is_array();
}

bool is_result_document(const Json& doc) {
  if (!doc.is_object() || is_mugraph_document(doc)) return false;
  if (auto f = doc.find("format"); f != doc.end() && *f == kSearchResultFormat) return true;
  for (const char* k : {"ranked", "candidates", "results", "graphs", "best", "best_graph"})
    if (doc.contains(k)) return true;
  return false;
}

Result<std::vector<ResultGraph>> graphs_in_document(const Json& doc, const std::string& origin) {
  std::vector<ResultGraph> graphs;
  std::set<std::string> seen;
  auto add = [&](ResultGraph r) {
    if (seen.insert(kernel_graph_to_json(r.graph).dump()).second) graphs.push_back(std::move(r));
  };
  std::string key;
  if (is_mugraph_document(doc)) {
    STRATA_ASSIGN_OR_RETURN(KernelGraph graph, kernel_graph_from_json(doc, origin));
    add(ResultGraph{std::move(graph), origin, std::nullopt});
  } else if (const Json* list = ranked_list(doc, key)) {
    const ListInfo info = list_info(doc, key, list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(ResultGraph r, element_graph(*list, key, i, origin, info));
      add(std::move(r));
    }
  } else if (doc.is_object()) {
    for (const char* k : {"best", "best_graph"})
      if (doc.contains(k)) {
        std::string path = k;
        const Json* g = find_graph(doc[k], path);
        std::string where = origin + ": " + path;
        if (!g) return make_error(where + ": holds no μGraph");
        STRATA_ASSIGN_OR_RETURN(KernelGraph graph, kernel_graph_from_json(*g, where));
        add(ResultGraph{std::move(graph), where, predicted_time(doc[k])});
        break;
      }
  }
  if (graphs.empty())
    return make_error(origin +
                      ": holds no μGraph (expected a μGraph document or a strata optimize "
                      "result with a \"ranked\" list)");
  return graphs;
}

int preferred_graph(const std::vector<ResultGraph>& graphs) {
  for (size_t i = 0; i < graphs.size(); ++i)
    if (graphs[i].profiled_fastest) return static_cast<int>(i);
  for (size_t i = 0; i < graphs.size(); ++i)
    if (graphs[i].best) return static_cast<int>(i);
  return 0;
}

Result<ResultGraph> result_graph_at(const Json& doc, const std::string& origin, int64_t rank) {
  std::string key;
  const Json* list = ranked_list(doc, key);
  if (!list) {
    STRATA_ASSIGN_OR_RETURN(std::vector<ResultGraph> graphs, graphs_in_document(doc, origin));
    if (rank > 0)
      return make_error(origin + ": --rank " + std::to_string(rank) +
                        ": the document has no ranked list, only one graph (rank 0)");
    return std::move(graphs[0]);
  }
  const ListInfo info = list_info(doc, key, list->size());
  if (rank >= static_cast<int64_t>(list->size()))
    return make_error(origin + ": --rank " + std::to_string(rank) + ": the document ranks " +
                      std::to_string(list->size()) + " graph(s) (ranks 0 to " +
                      std::to_string(list->size() - 1) + ")");
  size_t i = rank >= 0 ? static_cast<size_t>(rank)
                       : static_cast<size_t>(info.fastest ? *info.fastest : info.best.value_or(0));
  return element_graph(*list, key, i, origin, info);
}

Result<std::vector<ResultGraph>> load_result_graphs(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, path));
  return graphs_in_document(doc, path);
}

}  // namespace strata
