#include "strata/graph_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "strata/graph_json.h"
#include "strata/program_parser.h"

namespace strata {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open file for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(path + ": read error");
  return ss.str();
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

Result<KernelGraph> load_graph(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  size_t first = text.find_first_not_of(" \t\r\n");
  bool is_json = (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) ||
                 (first != std::string::npos && text[first] == '{');
  if (!is_json) return parse_program(text, path);
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, path));
  return kernel_graph_from_json(doc, path);
}

Status save_graph_json(const KernelGraph& g, const std::string& path) {
  return write_text_file(path, kernel_graph_to_json(g).dump(2) + "\n");
}

}  // namespace strata
