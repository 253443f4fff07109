#include "strata/graph_io.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "strata/graph_json.h"
#include "strata/program_parser.h"
#include "strata/result_graphs.h"

namespace strata {

Result<std::string> read_text_file(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(path + ": is a directory; expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open file for reading");
  // Read in chunks up to the limit, so that an endless device or a huge file cannot exhaust
  // memory.
  std::string text;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const std::streamsize got = in.gcount();
    if (static_cast<int64_t>(text.size()) + got > max_bytes)
      return make_error(path + ": larger than " + std::to_string(max_bytes) +
                        " bytes, the most strata reads from this file");
    text.append(buf, static_cast<size_t>(got));
  }
  if (in.bad()) return make_error(path + ": read error");
  return text;
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(path + ": cannot open file for writing");
    out << text;
    if (!out) return make_error(path + ": write error");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return make_error(path + ": cannot replace file");
  }
  return Status::success();
}

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

Status save_graph_json(const KernelGraph& g, const std::string& path) {
  return write_text_file(path, kernel_graph_to_json(g).dump(2) + "\n");
}

}  // namespace strata
