// Reading untrusted JSON: μGraph documents, search results, cache entries, checkpoints
// (docs/mugraph-json.md, "Limits").
//
// parse_json_text is the one way strata turns JSON text into a document. Before it builds the
// document it enforces the limits every JSON loader shares, each reported as
// "ORIGIN:LINE:COL: invalid JSON: ..." with exit code 2 in the tool:
//  - nesting: arrays and objects at most kMaxJsonDepth deep, so that no recursive walk of the
//    document later (serializing, copying, comparing, the readers) can exhaust the stack;
//  - numbers: a literal beyond the range of a double (1e400) or one that is not zero but would
//    round to zero (1e-400) is an error, never ±inf or a silent 0; subnormal values are kept;
//  - a UTF-8 byte-order mark at the start of the text is skipped.
//
// The json_* readers take one value at a JSON path ("FILE: ops[2].block_graph.grid[0]") and
// return it or an Error "PATH: expected ..., got ...". Integers are read as 64-bit values and
// checked against the range the field allows: a value is never truncated or wrapped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "strata/util/status.h"

namespace strata {

using Json = nlohmann::ordered_json;

/// Deepest nesting of arrays and objects accepted in a JSON document (the same depth as the
/// call nesting limit of the .strata parser; strata's own documents nest at most 13 deep).
inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON text within the limits above; `origin` (a file name) prefixes errors.
Result<Json> parse_json_text(std::string_view text, const std::string& origin);

/// `text` without a leading UTF-8 byte-order mark.
std::string_view skip_utf8_bom(std::string_view text);

/// A short rendering of a value for messages (at most about 60 characters).
std::string json_brief(const Json& v);
/// A string from a document, fit to quote in a message: escaped as in JSON (no raw control
/// characters reach a terminal) and shortened like json_brief, without the quotes.
std::string json_quote(const std::string& s);

/// The member `key` of object `obj` at `path`; an error if `obj` is not an object or lacks it.
Result<const Json*> json_member(const Json& obj, const char* key, const std::string& path);
/// The member `key`, or nullptr when absent; an error if `obj` is not an object.
Result<const Json*> json_optional_member(const Json& obj, const char* key, const std::string& path);

/// An integer in [lo, hi]. Floats, integers beyond 64 bits and values outside the range are
/// errors naming the path and the range.
Result<int64_t> json_int(const Json& v, const std::string& path, int64_t lo, int64_t hi);
/// A number (integer or float); finite, since parse_json_text rejects overflow.
Result<double> json_number(const Json& v, const std::string& path);
Result<std::string> json_string(const Json& v, const std::string& path);
Result<bool> json_bool(const Json& v, const std::string& path);

}  // namespace strata
