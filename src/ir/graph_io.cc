#include "strata/ir/graph_io.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "strata/ir/graph_json.h"

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

Status save_graph_json(const KernelGraph& g, const std::string& path) {
  return write_text_file(path, kernel_graph_to_json(g).dump(2) + "\n");
}

}  // namespace strata
