#include "frontend/program_lexer.h"

#include <charconv>

#include "util/real_literal.h"

namespace strata::frontend {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

/// Columns of byte offsets in a UTF-8 line, for offsets queried in increasing order (so a
/// line is scanned once): the column of a byte is 1 + the code points before it.
class ColumnCounter {
 public:
  explicit ColumnCounter(std::string_view line) : line_(line) {}
  int at(size_t bytes) {
    for (; counted_ < bytes && counted_ < line_.size(); ++counted_)
      if ((static_cast<unsigned char>(line_[counted_]) & 0xC0) != 0x80) ++col_;
    return col_;
  }

 private:
  std::string_view line_;
  size_t counted_ = 0;
  int col_ = 1;
};

/// The whole UTF-8 sequence starting at `i` (or one byte when it is not a valid lead byte),
/// printable in a message.
std::string char_at(std::string_view line, size_t i) {
  unsigned char c = static_cast<unsigned char>(line[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  bool valid = n > 0 && i + n <= line.size();
  for (size_t k = 1; valid && k < n; ++k)
    if ((static_cast<unsigned char>(line[i + k]) & 0xC0) != 0x80) valid = false;
  if (valid && (c >= 0x20 && c != 0x7F)) return "`" + std::string(line.substr(i, n)) + "`";
  static const char* hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
}

}  // namespace

Error located_error(const std::string& file, int line, int col, const std::string& message) {
  return make_error(file + ":" + std::to_string(line) + ":" + std::to_string(col) +
                    ": error: " + message);
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokKind::Ident:
      return "name `" + t.text + "`";
    case TokKind::Int:
    case TokKind::Real:
      return "number `" + t.text + "`";
    case TokKind::End:
      return "end of line";
    default:
      return "`" + t.text + "`";
  }
}

Result<std::vector<Token>> lex_line(std::string_view line, int line_no, const std::string& file) {
  std::vector<Token> out;
  ColumnCounter columns(line);
  size_t i = 0;
  size_t last_end = 0;  // byte just after the last token
  auto error_here = [&](size_t at, const std::string& msg) {
    return located_error(file, line_no, columns.at(at), msg);
  };
  while (i < line.size()) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
      continue;
    }
    if (c == '#') break;
    Token t;
    t.line = line_no;
    t.col = columns.at(i);
    size_t start = i;
    bool sign = (c == '-' || c == '+');
    size_t j = sign ? i + 1 : i;
    bool number_start =
        j < line.size() &&
        (is_digit(line[j]) || (line[j] == '.' && j + 1 < line.size() && is_digit(line[j + 1])));
    if (is_ident_start(c)) {
      while (i < line.size() && is_ident_char(line[i])) ++i;
      t.kind = TokKind::Ident;
    } else if (number_start) {
      i = j;
      bool real = false;
      while (i < line.size() && is_digit(line[i])) ++i;
      if (i < line.size() && line[i] == '.') {
        real = true;
        ++i;
        while (i < line.size() && is_digit(line[i])) ++i;
      }
      if (i < line.size() && (line[i] == 'e' || line[i] == 'E')) {
        size_t k = i + 1;
        if (k < line.size() && (line[k] == '+' || line[k] == '-')) ++k;
        if (k < line.size() && is_digit(line[k])) {
          real = true;
          i = k;
          while (i < line.size() && is_digit(line[i])) ++i;
        }
      }
      if (i < line.size() && (is_ident_char(line[i]) || line[i] == '.')) {
        while (i < line.size() && (is_ident_char(line[i]) || line[i] == '.')) ++i;
        return error_here(start, "malformed number `" + std::string(line.substr(start, i - start)) +
                                     "`; expected digits with an optional fraction and exponent "
                                     "(like 4096, -1, 0.5 or 1e-3)");
      }
      t.kind = real ? TokKind::Real : TokKind::Int;
      std::string text(line.substr(start, i - start));
      if (!real) {
        const char* b = text.data() + (text[0] == '+' ? 1 : 0);
        auto [p, ec] = std::from_chars(b, text.data() + text.size(), t.int_value);
        if (ec != std::errc() || p != text.data() + text.size())
          return error_here(start,
                            "integer `" + text + "` is out of range; expected a 64-bit integer");
        t.real_value = static_cast<double>(t.int_value);
      } else {
        // The nearest double, subnormal values included; never a silent 0 or infinity.
        switch (parse_real_literal(text, t.real_value)) {
          case RealLiteral::Ok:
            break;
          case RealLiteral::Overflow:
            return error_here(start,
                              "number `" + text + "` is out of range; expected a finite number");
          case RealLiteral::Underflow:
            return error_here(start, "number `" + text +
                                         "` is too small to represent (it would become 0); "
                                         "expected 0 or a magnitude of at least about 4.9e-324");
          case RealLiteral::Malformed:
            return error_here(start, "malformed number `" + text + "`");
        }
      }
    } else {
      ++i;
      switch (c) {
        case ':':
          t.kind = TokKind::Colon;
          break;
        case ',':
          t.kind = TokKind::Comma;
          break;
        case '(':
          t.kind = TokKind::LParen;
          break;
        case ')':
          t.kind = TokKind::RParen;
          break;
        case '[':
          t.kind = TokKind::LBracket;
          break;
        case ']':
          t.kind = TokKind::RBracket;
          break;
        case '=':
          t.kind = TokKind::Equals;
          break;
        default: {
          std::string hint;
          if (c == '+' || c == '-' || c == '*' || c == '/' || c == '@')
            hint =
                " (arithmetic is written as calls: add(a, b), sub(a, b), mul(a, b), div(a, b), "
                "matmul(a, b))";
          return error_here(start, "unexpected character " + char_at(line, start) +
                                       "; expected a name, a number, one of `: , ( ) [ ] =`, or "
                                       "`#` to start a comment" +
                                       hint);
        }
      }
    }
    t.text = std::string(line.substr(start, i - start));
    last_end = i;
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = TokKind::End;
  end.line = line_no;
  // End sits just after the last token (before trailing blanks and comments).
  end.col = out.empty() ? 1 : ColumnCounter(line).at(last_end);
  out.push_back(std::move(end));
  return out;
}

}  // namespace strata::frontend
