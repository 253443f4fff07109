// Internal helpers of the CUDA emitter: an indenting line writer and C++ spelling of types,
// identifiers and index arithmetic.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "strata/op.h"
#include "strata/shape.h"

namespace strata::codegen {

/// Accumulates source text line by line with two-space indentation per open block.
class CodeWriter {
 public:
  /// Writes one line at the current indentation (an empty string writes an empty line).
  void line(const std::string& text);
  /// Writes `text` followed by " {" and indents.
  void open(const std::string& text);
  /// Dedents and writes "}" followed by `suffix`.
  void close(const std::string& suffix = "");
  /// Writes several lines verbatim (each indented).
  void raw(const std::string& text);
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
};

/// The CUDA element type of a dtype: "__half", "__nv_bfloat16" or "float".
std::string cuda_type(DType t);
/// A C identifier made from `name` (other characters become '_'), prefixed to be unique.
std::string identifier(const std::string& prefix, const std::string& name);
/// Decimal literal of an integer.
std::string lit(int64_t v);
/// An f32 literal that round-trips `v` ("0.125f", "-3.0f", "1e-05f").
std::string float_lit(double v);

/// `e`, parenthesized unless it is a single identifier or literal.
std::string paren(const std::string& e);
/// `a * b` folded when either is a literal 0 or 1.
std::string mul(const std::string& a, int64_t b);
/// `a + b + …` of the non-"0" terms, "0" when all are.
std::string sum(const std::vector<std::string>& terms);

/// Index expressions of the dims of `shape` for a flat row-major element index `flat`
/// (an expression); size-1 dims give "0".
std::vector<std::string> unflatten(const std::string& flat, const Shape& shape);

/// Indices into an operand of shape `operand` broadcast (NumPy rules) to a result with
/// indices `out_idx`.
std::vector<std::string> broadcast_index(const Shape& operand,
                                         const std::vector<std::string>& out_idx);

/// The f32 expression of an elementwise op (unary: args[0]; binary: args[0], args[1]) through
/// the runtime's math functions — the one place that spells out each op's arithmetic.
std::string scalar_op_expr(OpKind kind, const std::vector<std::string>& args, const OpAttrs& attrs);

}  // namespace strata::codegen
