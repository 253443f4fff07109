// The on-disk result cache and checkpoints of the search (docs/search.md, "Cache and
// checkpoints").
//
// Both are JSON documents in one envelope:
//   {"format": F, "version": 2, "key": K, "program": H, "checksum": C, "payload": {...}}
// where K is the cache key of the search, H the SHA-256 of the program's canonical μGraph JSON
// (the program the document answers), and C the SHA-256 of K, H and payload.dump(). Reading
// checks every field and never throws, so a truncated file, bad JSON (invalid UTF-8, numbers
// out of range, …), a changed payload or a document written for another key or program is
// reported as an error naming the file and the problem; callers report it and carry on as if
// the file did not exist. Files are written atomically (temporary + rename). All hashing is
// the project's SHA-256 (strata/hash.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/util/cache_dir.h"  // resolve_cache_dir: the folder of both files
#include "strata/ir/graph_json.h"
#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/util/status.h"

namespace strata {

/// What ranks and generates candidates beyond the configuration: the cost model's constants for
/// `target` (the built-in table) and the default SplitPolicy's tile lists. Part of the cache
/// key, so that a build with a refitted model or other splits does not reuse stale rankings.
Json search_model_fingerprint(const std::string& target);

/// The content hash of the sources that determine search results (the search, expressions,
/// verifier, passes, cost model, IR, interpreter and utilities, and the public headers), as
/// 64 hex digits; computed by the build (cmake/source_hash.cmake), so it changes whenever
/// one of those files does.
std::string_view search_source_hash();

/// SHA-256 of the program's canonical μGraph JSON: what cache entries and checkpoints record
/// as the program they answer.
std::string program_hash(const KernelGraph& program);

/// The cache key of a search: SHA-256 (64 hex digits) of the program's canonical μGraph JSON,
/// the configuration fields that change results (marked (key) in SearchConfig), the model
/// fingerprint, the strata version and `source_hash` (default: this build's
/// search_source_hash(); tests pass others).
std::string search_cache_key(const KernelGraph& program, const SearchConfig& config);
std::string search_cache_key(const KernelGraph& program, const SearchConfig& config,
                             std::string_view source_hash);

/// The checksum a checked envelope carries: SHA-256 over its key, its program hash and its
/// payload (as written).
std::string checked_json_checksum(const std::string& key, const std::string& program,
                                  const Json& payload);

/// Writes `payload` in the checked envelope to `path`, creating its directory. `program` is
/// the program_hash() of the program it answers.
Status write_checked_json(const std::string& path, std::string_view format, const std::string& key,
                          const std::string& program, const Json& payload);

/// Reads a checked envelope. Errors (never exceptions): missing file (message starts with
/// "missing: "), unreadable file, bad JSON, truncation, wrong format or version, key mismatch,
/// a document for another program, checksum mismatch.
Result<Json> read_checked_json(const std::string& path, std::string_view format,
                               const std::string& key, const std::string& program);

}  // namespace strata
