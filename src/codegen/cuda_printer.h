// Internal: the one CUDA printer of the emitter's IR (cuda_ir.h). Everything the emitter
// generates is text only here.
//
// Statements print one per line with two spaces of indentation per open brace. Expressions
// print with the parentheses C++ precedence needs, plus some for clarity: an operand of *, /
// or % that is itself an operator expression is parenthesized unless it is the left operand
// with the same operator (`(c / 8 % 4) * 520` prints as `(c / 8 % 4) * 520`), and operands of
// bitwise, shift and logical operators are parenthesized when they use another operator.
#pragma once

#include <string>

#include "cuda_ir.h"

namespace strata::codegen::ir {

/// The C++ spelling of an expression.
std::string print_expr(const Expr& e);
/// The CUDA spelling of a float literal: `%.9g` with a decimal point and an `f` suffix;
/// infinities and NaN as bit patterns.
std::string float_text(double v);
/// The source text of a statement tree (each line ends with a newline).
std::string print_cuda(const Stmt& s);

}  // namespace strata::codegen::ir
