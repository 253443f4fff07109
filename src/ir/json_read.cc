#include "strata/ir/json_read.h"

#include <cmath>
#include <optional>

#include "util/real_literal.h"

namespace strata {
namespace {

std::pair<int, int> line_col(std::string_view text, size_t byte) {
  int line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++col;  // columns count code points, as in the .strata parser
    }
  }
  return {line, col};
}

Error located(std::string_view text, size_t byte, const std::string& origin,
              const std::string& detail) {
  auto [line, col] = line_col(text, byte);
  return make_error(origin + ":" + std::to_string(line) + ":" + std::to_string(col) +
                    ": invalid JSON: " + detail);
}

bool number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/// The limits of parse_json_text, checked in one pass over the text before nlohmann's parser
/// builds anything: nesting depth (brackets outside strings) and the range of number literals.
/// Syntax is left to the parser; on malformed text this pass may report first.
std::optional<Error> check_limits(std::string_view text, const std::string& origin) {
  int depth = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return located(text, i, origin,
                       "arrays and objects nested more than " + std::to_string(kMaxJsonDepth) +
                           " deep; expected at most " + std::to_string(kMaxJsonDepth) +
                           " levels (strata's documents nest far less)");
      ++i;
    } else if (c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
      ++i;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < n && number_char(text[j])) ++j;
      std::string_view token = text.substr(i, j - i);
      double v;
      switch (parse_real_literal(token, v)) {
        case RealLiteral::Overflow:
          return located(text, i, origin,
                         "number " + std::string(token) +
                             " is out of range; expected a finite number (at most about "
                             "1.8e308 in magnitude)");
        case RealLiteral::Underflow:
          return located(text, i, origin,
                         "number " + std::string(token) +
                             " is too small to represent (it would become 0); expected 0 or a "
                             "magnitude of at least about 4.9e-324");
        default:  // Ok, or malformed: the parser reports syntax
          break;
      }
      i = j;
    } else {
      ++i;
    }
  }
  return std::nullopt;
}

std::string range_text(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

std::string_view skip_utf8_bom(std::string_view text) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return text;
}

Result<Json> parse_json_text(std::string_view text, const std::string& origin) {
  text = skip_utf8_bom(text);
  if (auto e = check_limits(text, origin)) return *e;
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    auto pos = what.find(": ");
    std::string detail = pos == std::string::npos ? what : what.substr(pos + 2);
    return located(text, e.byte == 0 ? 0 : e.byte - 1, origin, detail);
  } catch (const nlohmann::json::exception& e) {
    // Every limit the parser could hit is checked above; this keeps any other one an error.
    return make_error(origin + ": invalid JSON: " + e.what());
  }
}

std::string json_brief(const Json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string json_quote(const std::string& s) {
  std::string q = json_brief(Json(s));
  if (q.size() >= 2 && q.front() == '"' && q.back() == '"') return q.substr(1, q.size() - 2);
  return q.size() > 1 && q.front() == '"' ? q.substr(1) : q;  // shortened: "…..."
}

Result<const Json*> json_member(const Json& obj, const char* key, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* v, json_optional_member(obj, key, path));
  if (!v) return make_error(path + ": missing key \"" + key + "\"");
  return v;
}

Result<const Json*> json_optional_member(const Json& obj, const char* key,
                                         const std::string& path) {
  if (!obj.is_object()) return make_error(path + ": expected an object, got " + json_brief(obj));
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Result<int64_t> json_int(const Json& v, const std::string& path, int64_t lo, int64_t hi) {
  auto out_of_range = [&]() {
    return make_error(path + ": " + json_brief(v) + " is out of range; expected an integer in " +
                      range_text(lo, hi));
  };
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi)) return out_of_range();
    auto x = static_cast<int64_t>(u);
    if (x < lo) return out_of_range();
    return x;
  }
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return out_of_range();
    return x;
  }
  if (v.is_number_float()) {
    // An integer literal beyond 64 bits is read as a float: say so rather than "not an integer".
    double x = v.get<double>();
    if (std::isfinite(x) && std::trunc(x) == x && std::fabs(x) >= 0x1p63) return out_of_range();
  }
  return make_error(path + ": expected an integer in " + range_text(lo, hi) + ", got " +
                    json_brief(v));
}

Result<double> json_number(const Json& v, const std::string& path) {
  if (!v.is_number()) return make_error(path + ": expected a number, got " + json_brief(v));
  double x = v.get<double>();
  if (!std::isfinite(x)) return make_error(path + ": expected a finite number");
  return x;
}

Result<std::string> json_string(const Json& v, const std::string& path) {
  if (!v.is_string()) return make_error(path + ": expected a string, got " + json_brief(v));
  return v.get<std::string>();
}

Result<bool> json_bool(const Json& v, const std::string& path) {
  if (!v.is_boolean()) return make_error(path + ": expected true or false, got " + json_brief(v));
  return v.get<bool>();
}

}  // namespace strata
