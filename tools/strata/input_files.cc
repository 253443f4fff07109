#include "input_files.h"

#include <cstring>
#include <filesystem>

#include "strata/graph_io.h"

namespace strata::cli {

Result<std::vector<std::vector<double>>> read_input_files(const std::string& dir,
                                                          const KernelGraph& program) {
  std::vector<std::vector<double>> values;
  for (int t : program.inputs()) {
    const std::string name = program.tensor_name(t);
    const Shape& shape = program.tensor(t).shape;
    const std::string path = (std::filesystem::path(dir) / (name + ".f64")).string();
    STRATA_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path));
    if (static_cast<int64_t>(bytes.size()) != shape.numel() * 8)
      return make_error(path + ": expected " + std::to_string(shape.numel()) +
                        " float64 values for " + name + shape.str() + ", found " +
                        std::to_string(bytes.size()) + " bytes");
    std::vector<double> v(shape.numel());
    std::memcpy(v.data(), bytes.data(), bytes.size());
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace strata::cli
