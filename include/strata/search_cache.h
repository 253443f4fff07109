// The on-disk result cache and checkpoints of the search (docs/search.md, "Cache and
// checkpoints").
//
// Both are JSON documents in one envelope:
//   {"format": F, "version": 1, "key": K, "checksum": C, "payload": {...}}
// where C is the hex hash of payload.dump() and K the cache key of the search. Reading checks
// every field, so a truncated file, bad JSON, a changed payload or a document written for
// another key is reported as an error naming the file and the problem; callers report it and
// carry on as if the file did not exist. Files are written atomically (temporary + rename).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/graph_json.h"
#include "strata/kernel_graph.h"
#include "strata/search.h"
#include "strata/status.h"

namespace strata {

/// A 128-bit content hash as 32 hex digits (two independent 64-bit FNV-1a-style hashes with
/// a final mix). Stable across runs and platforms.
std::string content_hash(std::string_view data);

/// The cache directory: `configured` if non-empty, else $STRATA_CACHE_DIR, else
/// $HOME/.cache/strata.
std::string resolve_cache_dir(const std::string& configured);

/// What ranks and generates candidates beyond the configuration: the cost model's constants for
/// `target` (the built-in table) and the default SplitPolicy's tile lists. Part of the cache
/// key, so that a build with a refitted model or other splits does not reuse stale rankings.
Json search_model_fingerprint(const std::string& target);

/// The cache key of a search: content_hash of the program's canonical μGraph JSON, the
/// configuration fields that change results (marked (key) in SearchConfig), the model
/// fingerprint and the strata version.
std::string search_cache_key(const KernelGraph& program, const SearchConfig& config);

/// Writes `payload` in the checked envelope to `path`, creating its directory.
Status write_checked_json(const std::string& path, std::string_view format, const std::string& key,
                          const Json& payload);

/// Reads a checked envelope. Errors: missing file (message starts with "missing: "), bad
/// JSON, truncation, wrong format or version, key mismatch, checksum mismatch.
Result<Json> read_checked_json(const std::string& path, std::string_view format,
                               const std::string& key);

}  // namespace strata
