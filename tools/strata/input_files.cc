#include "input_files.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "strata/ir/graph_io.h"

namespace strata::cli {

Result<std::vector<std::vector<double>>> read_input_files(const std::string& dir,
                                                          const KernelGraph& program) {
  std::vector<std::vector<double>> values;
  for (int t : program.inputs()) {
    const std::string name = program.tensor_name(t);
    const Shape& shape = program.tensor(t).shape;
    const std::string path = (std::filesystem::path(dir) / (name + ".f64")).string();
    // Tensors have at most 2^48 elements (shape.h), so the byte count cannot overflow. Reading
    // stops past it, so a wrong file (or an endless device) is reported, never slurped whole.
    const int64_t want = shape.numel() * 8;
    auto wrong_size = [&](uint64_t found) {
      return make_error(path + ": expected " + std::to_string(shape.numel()) +
                        " float64 values for " + name + shape.str() + ", found " +
                        std::to_string(found) + " bytes");
    };
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      const uintmax_t size = std::filesystem::file_size(path, ec);
      if (!ec && size != static_cast<uintmax_t>(want)) return wrong_size(size);
    }
    STRATA_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path, want));
    if (static_cast<int64_t>(bytes.size()) != want) return wrong_size(bytes.size());
    std::vector<double> v(shape.numel());
    std::memcpy(v.data(), bytes.data(), bytes.size());
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        return make_error(path + ": value " + std::to_string(i) + " is " + std::to_string(v[i]) +
                          "; expected finite input values");
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace strata::cli
