// Tokens of the .strata program format (docs/program-format.md) and located errors.
//
// The format is line-oriented: a statement never spans lines, so the lexer works one line at
// a time and ends every line with an End token. Columns are 1-based and count Unicode code
// points, so they match what an editor shows for UTF-8 text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata::frontend {

enum class TokKind : uint8_t {
  Ident,     ///< [A-Za-z_][A-Za-z0-9_]*
  Int,       ///< an integer literal, optionally signed: -1, 4096
  Real,      ///< a number with a fraction or exponent: 0.5, -2.5, 1e-3
  Colon,     ///< :
  Comma,     ///< ,
  LParen,    ///< (
  RParen,    ///< )
  LBracket,  ///< [
  RBracket,  ///< ]
  Equals,    ///< =
  End,       ///< end of the statement (end of line or start of a comment)
};

struct Token {
  TokKind kind;
  std::string text;  ///< the exact source text (empty for End)
  int line = 0;
  int col = 0;
  int64_t int_value = 0;  ///< Int only
  double real_value = 0;  ///< Int and Real
};

/// "file:line:col: error: <message>", the one error format of the program parser.
Error located_error(const std::string& file, int line, int col, const std::string& message);

/// How a token is named in messages: "name `X`", "number `0.5`", "`(`", "end of line".
std::string describe(const Token& t);

/// Splits one source line (without its newline) into tokens ending with End. Text after `#`
/// is a comment. Fails on characters outside the format, malformed numbers and integers
/// outside the 64-bit range, with the error located at the offending character.
Result<std::vector<Token>> lex_line(std::string_view line, int line_no, const std::string& file);

}  // namespace strata::frontend
