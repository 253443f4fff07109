// Reading and writing files: whole text files (with the size bound every loader shares) and
// μGraph JSON. Loading a graph file of any kind (.strata program, μGraph JSON or search result
// document) is graph_loader.h, in the frontend module above the IR.
#pragma once

#include <cstdint>
#include <string>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// The most bytes read_text_file reads by default (1 GiB): far beyond any program, μGraph or
/// result document, and a bound on what an endless or enormous file can make strata allocate.
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

/// Reads a whole file; the error names the path when it cannot be read, is a directory or is
/// larger than `max_bytes`.
Result<std::string> read_text_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);
/// Writes a whole file atomically (temporary file + rename).
Status write_text_file(const std::string& path, const std::string& text);

/// Writes a kernel graph as μGraph JSON.
Status save_graph_json(const KernelGraph& g, const std::string& path);

}  // namespace strata
