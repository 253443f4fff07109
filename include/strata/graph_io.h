// Reading and writing graph files: .strata programs and μGraph JSON documents.
#pragma once

#include <string>

#include "strata/kernel_graph.h"
#include "strata/status.h"

namespace strata {

/// Reads a whole file; the error names the path when it cannot be read.
Result<std::string> read_text_file(const std::string& path);
/// Writes a whole file atomically (temporary file + rename).
Status write_text_file(const std::string& path, const std::string& text);

/// Loads a program or μGraph: `.json` files (or text starting with `{`) as μGraph JSON,
/// anything else as a .strata program. Errors carry file:line:col or the JSON path.
Result<KernelGraph> load_graph(const std::string& path);

/// Writes a kernel graph as μGraph JSON.
Status save_graph_json(const KernelGraph& g, const std::string& path);

}  // namespace strata
