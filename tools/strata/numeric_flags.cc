#include "numeric_flags.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace strata::cli {
namespace {

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool all_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        bool shape = all_digits(text, text.size() > 0 && text[0] == '-' ? 1 : 0);
        if (!shape || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
          return "expected " + range + ", got " + text;
        text = std::to_string(v);  // CLI11 would read a leading 0 as octal
        return "";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "integer_in");
}

CLI::Validator any_uint64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (!all_digits(text, 0) || ec != std::errc() || end != text.data() + text.size())
          return "expected a non-negative integer below 2^64 (decimal digits), got " + text;
        text = std::to_string(v);  // CLI11 would read a leading 0 as octal
        return "";
      },
      "UINT64", "any_uint64");
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  const std::string range =
      "a number " + std::string(lo_open ? "above " : "from ") + show(lo) + " to " + show(hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) ||
            (lo_open ? v <= lo : v < lo) || v > hi)
          return "expected " + range + ", got " + text;
        return "";
      },
      "NUMBER", "number_in");
}

}  // namespace strata::cli
